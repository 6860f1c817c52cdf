"""A launch of ranks without torch: the parent starts WORLD children with RANK and WORLD_SIZE
set (as torchrun does) and waits on them; each child waits on a lock it already holds (its
stand-in for a collective), but rank ODD, which sleeps: it never gets there.

    rankfake.py WORLD ODD
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time


def collective(rank: int) -> None:
    lock = threading.Lock()
    lock.acquire()
    print(f"[rank{rank}]: entering the collective", flush=True)
    lock.acquire()  # the collective that never completes


def main() -> None:
    world, odd = int(sys.argv[1]), int(sys.argv[2])
    rank = os.environ.get("RANK")
    if rank is None:
        children = [
            subprocess.Popen(
                [sys.executable, __file__, *sys.argv[1:]], env={**os.environ, "RANK": str(r), "WORLD_SIZE": str(world)}
            )
            for r in range(world)
        ]
        for child in children:
            child.wait()
        return
    if int(rank) == odd:
        print(f"[rank{rank}]: busy elsewhere", flush=True)
        time.sleep(3600)  # never gets to the collective
    collective(int(rank))


if __name__ == "__main__":
    main()
