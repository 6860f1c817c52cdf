"""A server of several nodes the Ray tests own: a real process on each node, told its place by
NODE_RANK, NNODES, MASTER_ADDR and MASTER_PORT, as torchrun's nodes are. Its first argument
says what the nodes do:

  up           each node says where it is; node 0 says READY once every node has (as after a
               rendezvous: their marker files in $NODESERVER_PIDS, when set); then all wait
  fail=K       node K writes a failure line and exits 3; the others wait
  die=K        node K exits 5 without a word; the others wait
  hang         every node says it is loading, then waits
  wait         every node waits (after saying where it is)
  gloo         a torchrun-style rendezvous over gloo: every node joins, all_reduce of its rank + 1,
               node 0 says READY with the sum (torch on the CPU)

Every node also starts a child in a session of its own that sleeps (teardown must find it by
its tag) and writes its pids into $NODESERVER_PIDS/node<K> (if set).
"""

from __future__ import annotations

import os
import subprocess
import sys
import time


def say(text: str) -> None:
    print(text, flush=True)


def main(mode: str) -> None:
    rank, nodes = int(os.environ["NODE_RANK"]), int(os.environ["NNODES"])
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"], start_new_session=True)
    if os.environ.get("NODESERVER_PIDS"):
        with open(os.path.join(os.environ["NODESERVER_PIDS"], f"node{rank}"), "w") as f:
            f.write(f"{os.getpid()} {child.pid}\n")
    where = f"{os.environ['MASTER_ADDR']}:{os.environ['MASTER_PORT']}"
    say(f"node {rank} of {nodes} up, master {where}, gpus {os.environ.get('CUDA_VISIBLE_DEVICES', '')}")
    if os.environ.get("NODESERVER_PIDS"):
        with open(os.path.join(os.environ["NODESERVER_PIDS"], f"up{rank}"), "w") as f:
            f.write("up\n")  # after its line was written
    if mode == "up" and rank == 0:
        everyone_up(nodes)
        say("READY")
    elif mode == f"fail={rank}":
        time.sleep(0.3)
        say("FATAL: node lost its NIC")
        sys.exit(3)
    elif mode == f"die={rank}":
        time.sleep(0.3)
        os._exit(5)
    elif mode == "hang":
        say("loading")
    elif mode == "gloo":
        gloo(rank, nodes)
    while True:
        time.sleep(1)


def everyone_up(nodes: int) -> None:
    """Wait (30 s at most) until every node has said where it is, then a moment for their lines
    to travel to the merged log (each node's output comes through its own stream)."""
    folder = os.environ.get("NODESERVER_PIDS")
    if not folder:
        return
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and not all(os.path.exists(os.path.join(folder, f"up{k}")) for k in range(nodes)):
        time.sleep(0.05)
    time.sleep(0.5)


def gloo(rank: int, nodes: int) -> None:
    import torch
    import torch.distributed as dist

    dist.init_process_group("gloo", init_method="env://", rank=rank, world_size=nodes)
    value = torch.tensor([float(rank + 1)])
    dist.all_reduce(value)
    if rank == 0:
        say(f"READY sum={value.item():g}")


if __name__ == "__main__":
    main(sys.argv[1])
