"""A program of many ranks over gloo, for tests marked `torch` (run by the torch python).

    rankworker.py spawn PORT WORLD [ODD] [how]   torch.multiprocessing.spawn of WORLD ranks
    rankworker.py torchrun                         one rank, as torchrun starts it (RANK, WORLD_SIZE,
                                                   MASTER_ADDR/PORT from the environment);
                                                   ODD and how from RANKWORKER_ODD, RANKWORKER_HOW

Every rank joins the process group and says so; then rank ODD (if any) does `how` instead of
joining the warm-up all_reduce: `sleep` (never joins), `die` (exits 3 first).
RANKWORKER_DEVICE=cuda puts the tensor on the rank's GPU (cuda:<local rank> modulo the GPUs
seen: gloo's CUDA all_reduce on one GPU too), RANKWORKER_BACKEND=nccl uses NCCL (one GPU a rank).
With RANKWORKER_BUSY=1 rank 0 also burns a core on a thread of its own (a host that spins
while its ranks hang: the stall rule sees work, the spin rule sees the same waits).
"""

from __future__ import annotations

import os
import sys
import threading
import time


def burn() -> None:
    while True:
        pass


def work(rank: int, world: int, odd: int, how: str) -> None:
    import torch
    import torch.distributed as dist

    backend = os.environ.get("RANKWORKER_BACKEND", "gloo")
    dist.init_process_group(backend, rank=rank, world_size=world)
    tensor = torch.ones(4)
    if os.environ.get("RANKWORKER_DEVICE") == "cuda" or backend == "nccl":
        local = int(os.environ.get("LOCAL_RANK", rank))
        torch.cuda.set_device(local % torch.cuda.device_count())
        tensor = tensor.cuda()
    print(f"[rank{rank}]: joined the group of {world}", flush=True)
    if rank == 0 and os.environ.get("RANKWORKER_BUSY") == "1":
        threading.Thread(target=burn, name="burner", daemon=True).start()
    if rank == odd and how == "sleep":
        time.sleep(3600)  # the rank that never joins
    if rank == odd and how == "die":
        print(f"[rank{rank}]: RuntimeError: rank {rank} gives up", flush=True)
        sys.exit(3)
    dist.all_reduce(tensor)  # the warm-up collective
    print(f"[rank{rank}]: reduced {tensor.tolist()}", flush=True)
    time.sleep(3600)


def main() -> None:
    mode = sys.argv[1]
    if mode == "spawn":
        import torch.multiprocessing as mp

        os.environ["MASTER_ADDR"], os.environ["MASTER_PORT"] = "127.0.0.1", sys.argv[2]
        world = int(sys.argv[3])
        odd = int(sys.argv[4]) if len(sys.argv) > 4 else -1
        how = sys.argv[5] if len(sys.argv) > 5 else "sleep"
        mp.spawn(work, args=(world, odd, how), nprocs=world)
    else:
        odd, how = int(os.environ.get("RANKWORKER_ODD", "-1")), os.environ.get("RANKWORKER_HOW", "sleep")
        work(int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"]), odd, how)


if __name__ == "__main__":
    main()
