"""Stacks of every process of a hung attempt's tree, taken before teardown.

For each process: its command line, each thread's kernel state, `wchan` and kernel stack
(/proc/N/task/T, where readable), what NVML says it holds on the GPUs, and, for a Python
process, `py-spy dump --native` (all threads; without --native where that fails), else the
stacks it wrote itself on SIGUSR2 (`server.stacks: faulthandler`, see faulthandler_site/).
Whatever cannot be read (ptrace refused, py-spy missing) is a note in the file, never an error.
Everything written passes through the run's redactor (argv and frames can carry secrets).
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import psutil

from diagbench import safetext
from diagbench.launch import gpu
from diagbench.launch.helpers import run_helper
from diagbench.launch.ranks import ProcessInfo, Rank, assign_ranks, read_env_rank
from diagbench.records import sink
from diagbench.records.redact import Redactor
from diagbench.safefiles import Folder, open_regular
from diagbench.safetext import one_line

__all__ = [
    "FAULTHANDLER_SIGNAL",
    "FAULTHANDLER_WAIT_S",
    "KERNEL_STACK_LINES",
    "PARALLEL_DUMPS",
    "PYSPY_TIMEOUT_S",
    "ProcessStacks",
    "Thread",
    "parse_faulthandler",
    "parse_pyspy",
    "pyspy_path",
    "sample_threads",
    "take_stacks",
]

PYSPY_TIMEOUT_S = 10.0  # a dump of a big process takes about a second; a stuck py-spy is cut
FAULTHANDLER_WAIT_S = 1.0  # how long a process gets to write its own stacks after SIGUSR2
FAULTHANDLER_SIGNAL = signal.SIGUSR2
FAULTHANDLER_MAX_BYTES = 16 << 20  # one dump of every thread: kilobytes
KERNEL_STACK_LINES = 16
PARALLEL_DUMPS = 8


@dataclass(frozen=True)
class Thread:
    """One thread as read: its name and frames innermost first (Python and native, or kernel)."""

    tid: int
    name: str
    state: str
    frames: tuple[str, ...]
    source: str  # py-spy | faulthandler | kernel


@dataclass
class ProcessStacks:
    pid: int
    name: str
    text: str
    threads: list[Thread] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    ppid: int = 0
    started: float = 0.0
    argv: tuple[str, ...] = ()
    env_rank: Rank | None = None  # what its environment says (launch/ranks.py)
    rank: Rank | None = None  # its rank in the launch: the environment's, or spawn order


def take_stacks(
    procs: list[psutil.Process], folder: Path, redactor: Redactor, faulthandler_dir: Path | None = None
) -> list[ProcessStacks]:
    """Dump every process in `procs` to `folder/<pid>.txt` (the attempt's `stacks`, made there
    and written through the files door: a planted link is never written through); return
    what was read."""
    usage = gpu.process_usage()
    ordered = sorted(procs, key=lambda p: p.pid)
    # one py-spy per process at once: a tensor-parallel tree of 8+ workers would otherwise
    # hold its GPUs a second or two per process longer before teardown
    with ThreadPoolExecutor(max_workers=PARALLEL_DUMPS) as pool:
        found = list(pool.map(lambda p: _one(p, redactor, faulthandler_dir, usage), ordered))
    taken = [stacks for stacks in found if stacks is not None]
    infos = [ProcessInfo(s.pid, s.ppid, s.started, s.argv, s.env_rank) for s in taken]
    ranks = assign_ranks(infos)
    for stacks in taken:
        stacks.rank = ranks.get(stacks.pid)
        if stacks.rank is not None:
            where = f"rank {stacks.rank.rank}" + (f" of {stacks.rank.world}" if stacks.rank.world else "")
            stacks.text = stacks.text.replace("\n", f"\n{where} (from {stacks.rank.source})\n", 1)
    # a sink: blanked, a renamed process's control characters shown as escapes, and written
    # through the files door (a stacks folder or file planted as a link is never written through)
    with Folder.open(folder.parent) as attempt, attempt.folder(folder.name, make=True) as stacks_folder:
        for stacks in taken:
            stacks_folder.write(f"{stacks.pid}.txt", sink.document(safetext.terminal(stacks.text)).encode("utf-8"))
    return taken


def _one(
    proc: psutil.Process, redactor: Redactor, fh_dir: Path | None, usage: dict[int, list[str]] | None
) -> ProcessStacks | None:
    try:
        name, argv, ppid, started = proc.name(), proc.cmdline(), proc.ppid(), proc.create_time()
    except psutil.Error:
        return None  # gone since the tree was listed
    stacks = ProcessStacks(proc.pid, one_line(name), "", ppid=ppid, started=started, argv=tuple(argv))
    stacks.env_rank = read_env_rank(proc)
    # a process names itself (prctl) and writes its own argv: their escapes are shown, never obeyed
    command = " ".join(one_line(word) for word in redactor.argv(argv))
    lines = [f"pid {proc.pid} ({one_line(name)}), parent {ppid}", f"command: {command}"]
    if usage is None:
        lines.append("gpu: NVML not available")
    else:
        lines.append("gpu: " + ("; ".join(usage.get(proc.pid, [])) or "none held"))
    kernel = _kernel_threads(proc.pid)
    lines += ["", "== threads (kernel view: state, wchan, kernel stack) =="]
    for thread in kernel:
        lines.append(f"thread {thread.tid} {one_line(thread.name)!r}: state {one_line(thread.state)}")
        lines += [f"    {frame}" for frame in thread.frames]
    if _is_python(name, argv):
        python = _python_threads(proc.pid, fh_dir, stacks.notes, redactor)
        stacks.threads = python or kernel
    else:
        stacks.threads = kernel
    for note in stacks.notes:
        lines.insert(3, f"note: {note}")
    stacks.text = redactor.log("\n".join(lines) + "\n" + _python_text(stacks))
    return stacks


def _python_text(stacks: ProcessStacks) -> str:
    python = [t for t in stacks.threads if t.source != "kernel"]
    if not python:
        return ""
    out = ["", f"== Python stacks ({python[0].source}), innermost first =="]
    for thread in python:
        out.append(f"Thread {thread.tid} ({one_line(thread.state)}): {one_line(thread.name)!r}")
        out += [f"    {one_line(frame)}" for frame in thread.frames]
    return "\n".join(out) + "\n"


def _is_python(name: str, argv: list[str]) -> bool:
    first = os.path.basename(argv[0]) if argv else ""
    return any(word.startswith("python") for word in (name, first))


# -- kernel view ----------------------------------------------------------------------------


def _kernel_threads(pid: int) -> list[Thread]:
    threads = []
    with contextlib.suppress(OSError):
        for tid in sorted(int(t) for t in os.listdir(f"/proc/{pid}/task")):
            base = f"/proc/{pid}/task/{tid}"
            comm = _read(f"{base}/comm").strip()
            stat = _read(f"{base}/stat")
            state = stat.rpartition(")")[2].split()[0] if ")" in stat else "?"
            wchan = _read(f"{base}/wchan").strip() or "?"
            frames = [f"wchan: {wchan if wchan != '0' else '(running or hidden)'}"]
            kstack = _read(f"{base}/stack")
            if kstack:
                frames += [line.split("] ", 1)[-1] for line in kstack.splitlines()[:KERNEL_STACK_LINES]]
            else:
                frames.append("kernel stack: not readable (needs root)")
            threads.append(Thread(tid, comm, state, tuple(frames), "kernel"))
    return threads


def _read(path: str) -> str:
    try:
        with open(path, encoding="utf-8", errors="replace") as handle:
            return handle.read()
    except OSError:
        return ""


# -- Python view ----------------------------------------------------------------------------


def _python_threads(pid: int, fh_dir: Path | None, notes: list[str], redactor: Redactor) -> list[Thread]:
    """py-spy first; the process's own faulthandler dump where py-spy cannot attach."""
    threads = _pyspy(pid, notes, redactor)
    if not threads and fh_dir is not None:
        threads = _faulthandler(pid, fh_dir, notes)
    return threads


def pyspy_path() -> str | None:
    """py-spy on PATH, or installed beside this interpreter (a venv's bin/)."""
    beside = Path(sys.executable).parent / "py-spy"
    return shutil.which("py-spy") or (str(beside) if beside.is_file() else None)


def _pyspy(pid: int, notes: list[str], redactor: Redactor) -> list[Thread]:
    exe = pyspy_path()
    if exe is None:
        notes.append("py-spy is not installed: no Python frames from it (pip install py-spy)")
        return []
    why = ""
    for args in (["--native"], []):
        ran = run_helper([exe, "dump", "--pid", str(pid), *args], PYSPY_TIMEOUT_S)  # a stuck py-spy is cut
        if ran.ok:
            return parse_pyspy(ran.out())
        why = ran.failure(PYSPY_TIMEOUT_S) if ran.error or ran.timed_out else _first_error(ran.err() or ran.out())
    notes.append(f"py-spy could not read this process ({redactor.log(why)}); ptrace refused? using what is readable")
    return []


def sample_threads(pid: int, timeout_s: float = PYSPY_TIMEOUT_S) -> list[Thread]:
    """One process's threads as `py-spy dump --native` reads them now, nothing written
    (the spin rule's samples); [] where py-spy is missing or cannot attach."""
    exe = pyspy_path()
    if exe is None:
        return []
    ran = run_helper([exe, "dump", "--pid", str(pid), "--native"], timeout_s)
    return parse_pyspy(ran.out()) if ran.ok else []


def _first_error(text: str) -> str:
    for line in text.splitlines():
        if line.strip() and not line.startswith(("Stack backtrace", " ")):
            return line.strip()
    return "no output"


def parse_pyspy(text: str) -> list[Thread]:
    """`py-spy dump` output: `Thread 123 (idle): "MainThread"` then indented frames."""
    threads: list[Thread] = []
    head: tuple[int, str, str] | None = None
    frames: list[str] = []
    for line in [*text.splitlines(), "Thread end"]:
        if line.startswith("Thread "):
            if head is not None:
                threads.append(Thread(head[0], head[2], head[1], tuple(frames), "py-spy"))
            head, frames = _thread_head(line), []
        elif head is not None and line.startswith("    ") and line.strip():
            frames.append(line.strip())
    return threads


def _thread_head(line: str) -> tuple[int, str, str] | None:
    words = line.split(None, 3)  # Thread 0x7F12 (idle): "MainThread"
    if len(words) < 2:
        return None
    tid = int(words[1], 16) if words[1].startswith("0x") else int(words[1]) if words[1].isdigit() else 0
    state = words[2].strip("():") if len(words) > 2 else ""
    name = words[3].strip().strip('"') if len(words) > 3 else ""
    return tid, state, name


def _faulthandler(pid: int, fh_dir: Path, notes: list[str]) -> list[Thread]:
    """Ask a process that registered a handler (its file exists) to write its own stacks."""
    path = fh_dir / f"{pid}.txt"
    if not path.is_file() or path.is_symlink():
        notes.append("no faulthandler registered in this process (not started through its sitecustomize)")
        return []
    size = path.stat().st_size
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.kill(pid, FAULTHANDLER_SIGNAL)
    end = time.monotonic() + FAULTHANDLER_WAIT_S
    while time.monotonic() < end and path.stat().st_size == size:
        time.sleep(0.02)  # the process writes its dump from a signal handler: nothing to wait on
    time.sleep(0.05)  # let the last thread's lines land
    try:
        with open_regular(path) as handle:  # never a link's target
            handle.seek(size)
            return parse_faulthandler(handle.read(FAULTHANDLER_MAX_BYTES).decode("utf-8", errors="replace"))
    except OSError:
        return []


def parse_faulthandler(text: str) -> list[Thread]:
    """faulthandler's dump: `Thread 0x7f.. (most recent call first):` (or `Current thread`),
    then `  File "x.py", line N in f` per frame."""
    threads: list[Thread] = []
    for line in text.splitlines():
        head = _FH_HEAD.match(line)
        if head:
            current = "current" if head["current"] else ""
            threads.append(Thread(int(head["tid"], 16), current, "", (), "faulthandler"))
        elif threads and line.strip().startswith("File "):
            last = threads[-1]
            threads[-1] = Thread(last.tid, last.name, last.state, (*last.frames, _fh_frame(line)), last.source)
    return threads


_FH_HEAD = re.compile(r"^(?P<current>Current thread|Thread) 0x(?P<tid>[0-9a-fA-F]+)")


def _fh_frame(line: str) -> str:
    """`File "/a/b/x.py", line 12 in take` -> `take (x.py:12)`, as py-spy writes a frame."""
    path, _, rest = line.strip().removeprefix("File ").partition(", line ")
    number, _, func = rest.partition(" in ")
    return f"{func.strip()} ({os.path.basename(path.strip(chr(34)))}:{number.strip()})"
