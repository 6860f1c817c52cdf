"""A watchdog for one process on a Ray node (a job's worker, a node's process keeper): once that
process is gone, however it died (Ray's SIGKILL, the OOM killer), the tagged processes it owned
on this node are stopped as teardown would have (their groups and every tagged process,
SIGTERM, grace, SIGKILL). It runs outside the job's process tree (double-forked), so Ray's
kill of the job's tree does not take it along.

    python -m diagbench.execute.ray.watchdog OWNER      (pid@start@namespace, launch/tags.py)
"""

from __future__ import annotations

import os
import subprocess
import sys
import time

from diagbench.launch.reaper import find_strays, stop_stray
from diagbench.launch.tags import Owner, me

__all__ = ["start_watchdog"]

LOOK_EVERY_S = 0.5
GRACE_S = 5.0
_SPAWN = "import os, subprocess, sys; subprocess.Popen(sys.argv[1:], start_new_session=True); os._exit(0)"


def start_watchdog() -> None:
    """Start the watchdog of this process, double-forked: its parent exits at once, so it belongs
    to no job's process tree (and to no Ray worker's group)."""
    argv = [sys.executable, "-c", _SPAWN, sys.executable, "-m", "diagbench.execute.ray.watchdog", str(me())]
    # stdio to /dev/null: the watchdog outlives the job's log pipes; a deadline: it returns at once
    subprocess.run(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=30)


def watch(owner: Owner) -> int:
    """Wait for `owner` to end, then stop what it left; the number of attempts stopped."""
    while not owner.gone():
        time.sleep(LOOK_EVERY_S)
    strays = [s for s in find_strays() if s.tag.owner == owner]
    for stray in strays:
        stop_stray(stray, GRACE_S)
    return len(strays)


if __name__ == "__main__":
    owner = Owner.parse(sys.argv[1]) if len(sys.argv) == 2 else None
    if owner is None:
        sys.exit("usage: python -m diagbench.execute.ray.watchdog PID@START@NAMESPACE")
    os.nice(5)  # it only waits; the servers come first
    watch(owner)
