"""A real launch of many ranks over gloo on the CPU where one rank fails first; the others are
in an all_reduce and fail after it (their peer is gone). For tests/launch/test_first_rank_torch.py.

    python rankfail.py torchrun MODE            (under torchrun: RANK, WORLD_SIZE from it)
    python rankfail.py spawn MODE PORT WORLD    (torch.multiprocessing.spawn, WORLD ranks)

MODE: `import` (the failing rank imports a module that does not exist: import_error), `raise`
(a ValueError: class other), `segv` (the failing rank kills itself with SIGSEGV and prints
nothing), `logged` (the failing rank prints its own ImportError with no prefix, leaves the
group and takes LINGER_S to exit), `silent` (the same, printing nothing). The failing rank is
the last one (WORLD - 1); it fails 0.5 s after the group is up.

Under mp.spawn, `join` reports whichever failed process it finds first, and a rank's error
reaches the log only through that report. So the order of exits is made certain, never left to
the scheduler: in the first three modes the other ranks print their lost peer and take LINGER_S
to exit (join reports the failing rank, then stops them); in `logged` and `silent` they exit at
once and the failing rank lingers (join reports only a peer's fallout).
"""

from __future__ import annotations

import os
import signal
import sys
import time
import traceback

LINGER_S = 20.0  # far beyond any scheduling delay; the launcher stops a lingering rank at once
FAILING_RANK_LINGERS = ("logged", "silent")  # the modes where the failing rank, not its peers, ends last


def work(mode: str, rank: int | None = None, world: int | None = None) -> None:
    import torch
    import torch.distributed as dist

    if rank is None or world is None:
        dist.init_process_group("gloo")
    else:
        dist.init_process_group("gloo", rank=rank, world_size=world)
    me, size = dist.get_rank(), dist.get_world_size()
    print(f"rank {me} of {size} up", flush=True)
    if me == size - 1:
        time.sleep(0.5)  # the others are in their all_reduce by now
        if mode == "segv":
            os.kill(os.getpid(), signal.SIGSEGV)
        if mode in FAILING_RANK_LINGERS:
            _leaves_and_lingers(said=mode == "logged")
        if mode == "import":
            import diagbench_no_such_module  # noqa: F401  # the failing rank's own error
        raise ValueError(f"rank {me} gave up: bad shard 7")
    try:
        dist.all_reduce(torch.ones(4))
    except RuntimeError:
        if rank is not None:  # under mp.spawn (torchrun's ranks print theirs with a prefix as they end)
            traceback.print_exc()  # the lost peer: fallout
            if mode not in FAILING_RANK_LINGERS:
                time.sleep(LINGER_S)  # exits after the failing rank, whatever the load
        raise


def _leaves_and_lingers(said: bool) -> None:
    """The failing rank's own error, printed by itself (no prefix) if `said`, then it leaves the
    group and exits slowly."""
    import torch.distributed as dist

    try:
        import diagbench_no_such_module  # noqa: F401
    except ImportError:
        if said:
            traceback.print_exc()
    dist.destroy_process_group()  # its peers lose it now
    time.sleep(LINGER_S)
    sys.exit(1)


def spawned(rank: int, mode: str, world: int) -> None:
    work(mode, rank, world)


def main() -> None:
    launcher, mode = sys.argv[1], sys.argv[2]
    if launcher == "torchrun":
        work(mode)
        return
    import torch.multiprocessing as mp

    port, world = sys.argv[3], int(sys.argv[4])
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=port)
    mp.spawn(spawned, args=(mode, world), nprocs=world)


if __name__ == "__main__":
    main()
