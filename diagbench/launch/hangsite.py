"""Where a hung tree waits: the thread, and the innermost frame that says what it waits for.

Each thread's frames (innermost first) are walked outwards; a frame that names a wait (a
lock, a queue, a pipe read, NCCL, a CUDA synchronize, a child to join) gives the wait's
words, an outer standard-library wait replacing an inner one (queue.Queue.get rather than
the lock under it), until the first frame of the program's own code, which says where
(`threading.Lock.acquire in scheduler.py:event_loop`). Of all threads, the one whose wait
says most wins: GPU and NCCL waits, then locks, queues and reads, then waits on children
(whose own stacks say more), then sleeps.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Sequence
from dataclasses import dataclass

from diagbench.launch.stacks import ProcessStacks, Thread
from diagbench.records.parts import Hang

__all__ = [
    "BLOCKED",
    "CHILDREN",
    "GPU",
    "LIBRARIES",
    "SLEEP",
    "TOP_FRAMES",
    "UNKNOWN",
    "Where",
    "summarise",
    "thread_site",
    "waiting_frame",
    "where",
]

TOP_FRAMES = 8
GPU, BLOCKED, CHILDREN, SLEEP, UNKNOWN = 0, 1, 2, 3, 9

# (function, file) of standard-library waits, as py-spy and faulthandler name frames
_PYTHON_WAITS: dict[tuple[str, str], tuple[int, str]] = {
    ("get", "queue.py"): (BLOCKED, "queue.Queue.get"),
    ("put", "queue.py"): (BLOCKED, "queue.Queue.put"),
    ("wait", "threading.py"): (BLOCKED, "threading.Condition.wait"),
    ("join", "threading.py"): (CHILDREN, "threading.Thread.join"),
    ("_wait_for_tstate_lock", "threading.py"): (CHILDREN, "threading.Thread.join"),
    ("wait", "subprocess.py"): (CHILDREN, "subprocess.wait"),
    ("_wait", "subprocess.py"): (CHILDREN, "subprocess.wait"),
    ("_try_wait", "subprocess.py"): (CHILDREN, "subprocess.wait"),
    ("communicate", "subprocess.py"): (CHILDREN, "subprocess.communicate"),
    ("join", "process.py"): (CHILDREN, "multiprocessing.Process.join"),
    ("wait", "popen_fork.py"): (CHILDREN, "multiprocessing.Process.join"),
    ("recv", "connection.py"): (BLOCKED, "multiprocessing.Connection.recv"),
    ("recv_bytes", "connection.py"): (BLOCKED, "multiprocessing.Connection.recv"),
    ("accept", "socket.py"): (BLOCKED, "socket.accept"),
    ("readinto", "socket.py"): (BLOCKED, "socket read"),
    ("select", "selectors.py"): (CHILDREN, "selectors.select"),
}
# native symbols (py-spy --native) and kernel symbols (/proc/N/task/T/stack, wchan)
_NATIVE_WAITS: tuple[tuple[re.Pattern[str], int, str | None], ...] = (
    (re.compile(r"^nccl\w+"), GPU, None),  # None: the symbol itself is the words
    (re.compile(r"^cu\w*Synchronize\w*"), GPU, None),
    (re.compile(r"^(lock_PyThread_acquire_lock|acquire_timed)$"), BLOCKED, "threading.Lock.acquire"),
    (re.compile(r"^rlock_acquire$"), BLOCKED, "threading.RLock.acquire"),
    (re.compile(r"^(os_read\w*|_Py_read)$"), BLOCKED, "os.read"),
    (re.compile(r"^sock_recv\w*$"), BLOCKED, "socket read"),
    (re.compile(r"^(pipe_read|pipe_wait\w*)$"), BLOCKED, "read on a pipe (kernel: pipe_read)"),
    (re.compile(r"^(unix_stream_read\w*|sk_wait_data|tcp_recvmsg\w*)$"), BLOCKED, "socket read (kernel)"),
    (re.compile(r"^inet_csk_accept$"), BLOCKED, "socket accept (kernel)"),
    (re.compile(r"^(os_waitpid\w*|do_wait|kernel_wait4)$"), CHILDREN, "waitpid"),
    (re.compile(r"^(futex_wait\w*|futex_do_wait)$"), CHILDREN, "futex wait (kernel)"),
    (re.compile(r"^(ep_poll|do_select|do_sys_poll)$"), CHILDREN, "poll (kernel)"),
    (re.compile(r"^(time_sleep|pysleep|hrtimer_nanosleep|do_nanosleep|clock_nanosleep)$"), SLEEP, "time.sleep"),
)
# c10d's Work::wait under a collective (py-spy --native: `c10d::Work::wait (libtorch_cpu.so)`)
_C10D_WAIT = re.compile(r"^c10d::\w+::wait\w*$")
_C10D_WORDS = "c10d::Work::wait"
# packages whose frames are never the program's own line: a wait inside them is named by the
# outermost of their public calls (`all_reduce` in torch/distributed/distributed_c10d.py)
LIBRARIES = frozenset({"torch", "torchgen", "triton", "numpy", "gloo", "pybind11", "<frozen"})
_COLLECTIVE_FILES = ("torch/distributed/distributed_c10d.py", "torch/distributed/c10d_logger.py")
_FRAME = re.compile(r"^(?P<func>.+?) \((?P<file>[^():]+?)(?::(?P<line>\d+))?\)$")
_STDLIB = {file for _, file in _PYTHON_WAITS} | {"popen_fork.py", "synchronize.py", "ssl.py"}


@dataclass(frozen=True)
class Where:
    """One thread's wait: its class (GPU..UNKNOWN), the site (`threading.Lock.acquire in
    x.py:f`), the frame that names the wait, the wait's short words and the program's line."""

    rank: int
    site: str | None
    named: str | None
    wait: str | None = None  # `all_reduce`, `time.sleep`, `threading.Lock.acquire`
    at: str | None = None  # `worker.py:22`: the innermost frame of the program's own code


def summarise(taken: Sequence[ProcessStacks], folder_name: str = "stacks") -> Hang | None:
    """result.json's `hang`: the thread that waits on the most telling thing, and its site.
    A process waiting on its children (spawn's join, the elastic agent's sleep loop, a
    shell's wait) loses to any child that waits on something known; ties go to the deepest."""
    if not taken:
        return None
    parents = {s.ppid for s in taken}
    depth = _depths(taken)
    best: tuple[tuple[int, int, int, int], ProcessStacks, Thread, Where] | None = None
    for order, stacks in enumerate(taken):
        for thread in _own_threads(stacks):
            found = where(thread.frames)
            waits_on_children = stacks.pid in parents and found.rank != UNKNOWN
            key = (UNKNOWN - 1 if waits_on_children else found.rank, -depth.get(stacks.pid, 0), order, 0)
            if best is None or key < best[0]:
                best = (key, stacks, thread, found)
    notes = tuple(f"pid {s.pid}: {note}" for s in taken for note in s.notes)
    files = tuple(f"{folder_name}/{s.pid}.txt" for s in taken)
    if best is None:
        return Hang(taken[0].pid, taken[0].name, None, (), None, files=files, notes=notes)
    _, stacks, thread, found = best
    return _hang_of(stacks, thread, found, files, notes)


def _hang_of(
    stacks: ProcessStacks, thread: Thread, found: Where, files: tuple[str, ...], notes: tuple[str, ...]
) -> Hang:
    frames = tuple(thread.frames[:TOP_FRAMES])
    thread_name = f"{thread.name or '?'} ({thread.tid})"
    return Hang(stacks.pid, stacks.name, thread_name, frames, found.site, found.named, files, notes)


def _own_threads(stacks: ProcessStacks) -> list[Thread]:
    """A process's threads but diagbench's own (the flight recorder's dump thread)."""
    return [t for t in stacks.threads if not t.name.startswith("diagbench-")]


def _depths(taken: Sequence[ProcessStacks]) -> dict[int, int]:
    parent = {s.pid: s.ppid for s in taken}
    out: dict[int, int] = {}
    for pid in parent:
        depth, seen, current = 0, {pid}, parent[pid]
        while current in parent and current not in seen:
            seen.add(current)
            depth, current = depth + 1, parent[current]
        out[pid] = depth
    return out


def thread_site(frames: Sequence[str]) -> tuple[int, str | None]:
    """(rank, site) of one thread's frames, innermost first; rank UNKNOWN when nothing waits."""
    found = where(frames)
    return found.rank, found.site


def waiting_frame(frames: Sequence[str]) -> str | None:
    """The frame whose words name the wait (a report marks it), or None."""
    return where(frames).named


def where(frames: Sequence[str]) -> Where:
    """One thread's wait, walked from its innermost frame outwards to the program's own code."""
    rank, words, named = UNKNOWN, None, None
    fallback: tuple[str, str, str, str] | None = None  # the first library frame: the site where no program frame is
    for frame in frames:
        symbol = frame.removeprefix("wchan: ").split("+0x")[0].strip()
        parsed = _FRAME.match(frame)
        func, file = (parsed["func"], parsed["file"]) if parsed else (symbol, "")
        base = file.rsplit("/", 1)[-1]
        method = func.rsplit(".", 1)[-1]  # py-spy 0.4 writes `Queue.get`, faulthandler and older ones `get`
        known = _PYTHON_WAITS.get((method, base)) if file.endswith(".py") else _native(func)
        if known is not None and (words is None or base in _STDLIB):
            rank, words, named = (*known, frame)  # an outer standard-library wait says more than the lock under it
            continue
        code = bool(parsed and parsed["line"] and file.endswith(".py") and base not in _STDLIB)
        if code and fallback is None:
            fallback = (frame, func, file, f"{base}:{parsed['line'] if parsed else ''}")
        if file.endswith(_COLLECTIVE_FILES) and words in (None, _C10D_WORDS) and _public(func):
            rank, words, named = min(rank, BLOCKED), func, frame  # the collective called: `all_reduce`
            continue
        if code and not _library(file):
            return _found(rank, words, named, frame, func, file, f"{base}:{parsed['line'] if parsed else ''}")
    if fallback is not None:
        return _found(rank, words, named, *fallback)
    first = frames[0] if frames else None
    return Where(rank, words or first, named or first, words)


def _found(rank: int, words: str | None, named: str | None, frame: str, func: str, file: str, at: str) -> Where:
    if words:
        return Where(rank, f"{words} in {file}:{func}", named, words, at)
    return Where(UNKNOWN, f"{func} ({file}:{at.rsplit(':', 1)[-1]})", frame, None, at)


def _public(func: str) -> bool:
    return not func.startswith("_") and "<locals>" not in func and "wrapper" not in func


def _library(file: str) -> bool:
    """A frame of the standard library or of torch: never the program's own line."""
    top = file.split("/", 1)[0].removesuffix(".py")
    return top in LIBRARIES or ("/" in file and top in sys.stdlib_module_names)


def _native(symbol: str) -> tuple[int, str] | None:
    if _C10D_WAIT.match(symbol):
        return BLOCKED, _C10D_WORDS
    for pattern, rank, words in _NATIVE_WAITS:
        found = pattern.match(symbol)
        if found:
            return rank, words or found.group(0)
    return None
