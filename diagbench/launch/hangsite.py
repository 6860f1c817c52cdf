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
from collections.abc import Sequence

from diagbench.launch.stacks import ProcessStacks, Thread
from diagbench.records.parts import Hang

__all__ = ["BLOCKED", "CHILDREN", "GPU", "SLEEP", "TOP_FRAMES", "UNKNOWN", "summarise", "thread_site", "waiting_frame"]

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
_FRAME = re.compile(r"^(?P<func>.+?) \((?P<file>[^():]+?)(?::(?P<line>\d+))?\)$")
_STDLIB = {file for _, file in _PYTHON_WAITS} | {"popen_fork.py", "synchronize.py", "ssl.py"}


def summarise(taken: Sequence[ProcessStacks], folder_name: str = "stacks") -> Hang | None:
    """result.json's `hang`: the thread that waits on the most telling thing, and its site."""
    if not taken:
        return None
    best: tuple[int, int, ProcessStacks, Thread, str | None] | None = None
    for order, stacks in enumerate(taken):
        for thread in stacks.threads:
            rank, site = thread_site(thread.frames)
            if best is None or rank < best[0]:
                best = (rank, order, stacks, thread, site)
    notes = tuple(f"pid {s.pid}: {note}" for s in taken for note in s.notes)
    files = tuple(f"{folder_name}/{s.pid}.txt" for s in taken)
    if best is None:
        return Hang(taken[0].pid, taken[0].name, None, (), None, files=files, notes=notes)
    _, _, stacks, thread, site = best
    frames = tuple(thread.frames[:TOP_FRAMES])
    thread_name = f"{thread.name or '?'} ({thread.tid})"
    return Hang(stacks.pid, stacks.name, thread_name, frames, site, waiting_frame(thread.frames), files, notes)


def thread_site(frames: Sequence[str]) -> tuple[int, str | None]:
    """(rank, site) of one thread's frames, innermost first; rank UNKNOWN when nothing waits."""
    rank, site, _ = _walk(frames)
    return rank, site


def waiting_frame(frames: Sequence[str]) -> str | None:
    """The frame whose words name the wait (a report marks it), or None."""
    return _walk(frames)[2]


def _walk(frames: Sequence[str]) -> tuple[int, str | None, str | None]:
    rank, words, named = UNKNOWN, None, None
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
        if parsed and parsed["line"] and file.endswith(".py") and base not in _STDLIB:
            if words:
                return rank, f"{words} in {file}:{func}", named
            return UNKNOWN, f"{func} ({file}:{parsed['line']})", frame
    return rank, words or (frames[0] if frames else None), named or (frames[0] if frames else None)


def _native(symbol: str) -> tuple[int, str] | None:
    for pattern, rank, words in _NATIVE_WAITS:
        found = pattern.match(symbol)
        if found:
            return rank, words or found.group(0)
    return None
