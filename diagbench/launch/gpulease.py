"""GPU leases: one attempt at a time on a GPU, across every diagbench on the host.

Slots keep one diagbench's attempts apart, but two diagbench processes (two nightly jobs,
two `run --gpus 0,1` in two terminals) each split the same GPUs into slots of their own.
So an attempt holds a lease on each of its GPUs from before its launch until its process
tree is gone: an `flock` on `<gpu>.lock` in one folder that every diagbench on the host
agrees on, `/tmp/diagbench-gpus/`. It is not under TMPDIR, which differs between users and
jobs of one host; DIAGBENCH_GPU_LOCKS names another folder (containers of one host with
private /tmp share one through a mount). An attempt whose GPU is held waits for it. The
kernel drops a lock when its holder dies, so a lease never outlives its diagbench; the
files stay (one per GPU, empty while free), so no lock is ever taken on a file about to be
unlinked.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path

from diagbench.launch.shared import Unusable, open_folder, open_lock

__all__ = ["FIRST_POLL_S", "LAST_POLL_S", "LOCKS_VAR", "LOCK_DIR", "Waiting", "check_leases", "hold_gpus", "lock_dir"]

LOCK_DIR = Path("/tmp/diagbench-gpus")  # fixed on purpose, not tempfile's: every diagbench of the host must agree
LOCKS_VAR = "DIAGBENCH_GPU_LOCKS"
FIRST_POLL_S = 0.05
LAST_POLL_S = 0.5

Waiting = Callable[[str], None]  # told `waiting for GPU 0 (held by diagbench pid 961)` each time the holder changes


class _Stopped(Exception):
    """The run stopped while an attempt waited for a GPU."""


@contextlib.contextmanager
def hold_gpus(
    gpus: Sequence[str],
    host_index: Mapping[str, int],
    label: str,
    stop: threading.Event,
    waiting: Waiting,
) -> Iterator[bool]:
    """Hold the lease of each GPU in `gpus` while the block runs, first waiting for any that
    another attempt holds. Yields False, holding none, if `stop` is set while it waits.
    `host_index` maps an id to the host's index, so `0` and GPU 0's UUID are one lease."""
    keys = {_key(gpu, host_index): gpu for gpu in gpus}
    held: list[int] = []
    try:
        for key in sorted(keys, key=_in_order):  # one order for everyone: two wide slots never deadlock
            if (fd := _take(key, keys[key], label, stop, waiting)) is not None:
                held.append(fd)
    except _Stopped:
        _release(held)
        yield False
        return
    except BaseException:
        _release(held)
        raise
    try:
        yield True
    finally:
        _release(held)


def _release(held: list[int]) -> None:
    """Drop each lock, its holder's name blanked first (while still held: no one else's is lost)."""
    for fd in held:
        with contextlib.suppress(OSError):
            os.ftruncate(fd, 0)
        os.close(fd)


def lock_dir(environ: Mapping[str, str] = os.environ) -> Path:
    """The folder of GPU lock files every diagbench on this host uses."""
    return Path(environ.get(LOCKS_VAR) or LOCK_DIR)


def _key(gpu: str, host_index: Mapping[str, int]) -> str:
    """The lock file's name: the host's index where known (an index and a UUID of one GPU
    are one lease), else the id as given (a `/` of a MIG id made harmless)."""
    return str(host_index[gpu]) if gpu in host_index else gpu.replace("/", "_")


def _in_order(key: str) -> tuple[int, int, str]:
    return (0, int(key), "") if key.isdigit() else (1, 0, key)


def _take(key: str, shown: str, label: str, stop: threading.Event, waiting: Waiting) -> int | None:
    """The lock of one GPU, once it is free; None where no lock file can be had (then the
    slots alone keep this diagbench's attempts apart)."""
    fd = _open(key)
    if fd is None:
        return None
    delay, told = FIRST_POLL_S, None
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _holder(fd)
            if holder != told:
                waiting(f"waiting for GPU {shown} (held by {holder})")
                told = holder
        except OSError:  # a file system without locks
            os.close(fd)
            return None
        else:
            _sign(fd, label)
            return fd
        # flock has no wait with a timeout, and a blocked flock cannot be woken by Ctrl-C
        # from another thread: so the wait polls, and the stop flag ends it at once
        if stop.wait(delay):
            os.close(fd)
            raise _Stopped
        delay = min(delay * 2, LAST_POLL_S)


def _open(key: str) -> int | None:
    """The GPU's lock file; None where the shared folder or the file is unusable (then the
    slots alone keep this diagbench's attempts apart: `check_leases` said so before the run)."""
    try:
        folder = open_folder(lock_dir(), parents=True)
    except Unusable:
        return None
    try:
        return open_lock(folder, f"{key}.lock")
    except OSError:
        return None
    finally:
        os.close(folder)


def check_leases(
    gpus: Sequence[str], host_index: Mapping[str, int], environ: Mapping[str, str] = os.environ
) -> str | None:
    """Why GPU leases cannot be held on this host (a planted link, a foreign folder, an
    unusable lock file), or None when every GPU in `gpus` can be leased."""
    try:
        folder = open_folder(lock_dir(environ), parents=True)
    except Unusable as why:
        return f"GPU leases: {why}"
    try:
        for key in sorted({_key(gpu, host_index) for gpu in gpus}):
            try:
                os.close(open_lock(folder, f"{key}.lock"))
            except OSError as exc:
                return f"GPU leases: {lock_dir(environ) / (key + '.lock')}: {exc.strerror or exc}: remove it"
    finally:
        os.close(folder)
    return None


def _sign(fd: int, label: str) -> None:
    """Write who holds the lock into it, for the message of whoever waits next."""
    with contextlib.suppress(OSError):  # opened read-only: the lock holds, the name is missing
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"pid {os.getpid()}\n{label}\n".encode(), 0)


def _holder(fd: int) -> str:
    """Who holds the lock, in words: `diagbench pid 961`."""
    try:
        first = os.pread(fd, 200, 0).decode("utf-8", errors="replace").partition("\n")[0].strip()
    except OSError:
        first = ""
    return f"diagbench {first}" if first.startswith("pid ") else "another diagbench"
