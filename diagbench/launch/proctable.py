"""Reading processes from /proc: a tree with its names, a process's environment and tag, and
every tagged process of this user. Reads only: signals are process.py's."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path

import psutil

from diagbench.launch.tags import TAG_VAR, Tag
from diagbench.safetext import one_line

__all__ = [
    "TREE_LIMIT",
    "environ_bytes",
    "process_group",
    "process_name",
    "sweep_tagged",
    "tag_marker",
    "tagged_processes",
    "tree_names",
]

TREE_LIMIT = 4096  # processes named before the first signal, at most


def tree_names(pid: int) -> dict[int, str]:
    """The process and its descendants with their names, from /proc alone: its `stat` and
    the kernel's per-thread `children` lists, a few raw reads per member (no psutil, no scan
    of the host), since this runs between a decision and its SIGTERM. A zombie died before:
    not this teardown's (its children are still looked at)."""
    out: dict[int, str] = {}
    todo = [pid]
    while todo and len(out) < TREE_LIMIT:
        current = todo.pop()
        stat = _read_proc(f"/proc/{current}/stat")
        close = stat.rfind(b")")
        if close > 0 and stat[close + 2 : close + 3] not in (b"Z", b""):
            out[current] = _stat_name(current, stat[stat.find(b"(") + 1 : close])
        with contextlib.suppress(OSError):
            for task in os.listdir(f"/proc/{current}/task"):
                todo.extend(int(child) for child in _read_proc(f"/proc/{current}/task/{task}/children").split())
    return out


def _read_proc(path: str) -> bytes:
    """A small /proc file's bytes (b"" once its process is gone)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return b""
    try:
        return os.read(fd, 4096)
    except OSError:
        return b""
    finally:
        os.close(fd)


def _stat_name(pid: int, comm: bytes) -> str:
    """The name `_name` gives: the kernel keeps 15 bytes of it, so a name that long is asked
    of psutil, which completes it from the command line."""
    if len(comm) < 15:
        return one_line(comm.decode("utf-8", errors="replace"))
    try:
        return process_name(psutil.Process(pid))
    except psutil.Error:
        return one_line(comm.decode("utf-8", errors="replace"))


def process_name(proc: psutil.Process) -> str:
    try:
        return one_line(proc.name())  # a process names itself (prctl): its escapes are shown, never obeyed
    except psutil.Error:
        return "?"


def tag_marker(tag: str) -> bytes:
    return f"{TAG_VAR}={tag}".encode()


def environ_bytes(proc: psutil.Process) -> bytes:
    """The process's initial environment, raw (fast path on Linux)."""
    try:
        with open(f"/proc/{proc.pid}/environ", "rb") as handle:
            return handle.read() + b"\0"
    except FileNotFoundError:
        return b"".join(f"{k}={v}".encode() + b"\0" for k, v in proc.environ().items())


# -- tagged processes, whoever launched them ----------------------------------------------


def tagged_processes() -> Iterator[tuple[psutil.Process, Tag]]:
    """Every live process of this user that carries a diagbench tag (of any invocation),
    with its tag. Other users' processes are never listed, even for root: a tag is only
    an environment variable, which anyone can set."""
    me, uid = os.getpid(), os.getuid()
    for proc in psutil.process_iter():
        if proc.pid == me:
            continue
        with contextlib.suppress(psutil.Error, OSError):
            raw = environ_bytes(proc)
            if tag_marker("") not in raw or proc.uids().real != uid or proc.status() == psutil.STATUS_ZOMBIE:
                continue
            tag = Tag.from_env(_diagbench_vars(raw))
            if tag is not None:
                yield proc, tag


def _diagbench_vars(raw: bytes) -> dict[str, str]:
    found = {}
    for item in raw.split(b"\0"):
        if item.startswith(b"DIAGBENCH_"):
            name, _, value = item.partition(b"=")
            found[name.decode()] = value.decode("utf-8", errors="surrogateescape")
    return found


def process_group(proc: psutil.Process) -> int | None:
    try:
        return os.getpgid(proc.pid)
    except OSError:
        return None


def sweep_tagged(run: str | Path) -> list[int]:
    """Pids of live processes launched for the run directory `run` (a path), or for any run
    directory named `run` (a run id): a safety net for tests."""
    if isinstance(run, Path) or "/" in str(run):
        path = Path(run).resolve()
        return [p.pid for p, tag in tagged_processes() if tag.run_dir == path]
    return [p.pid for p, tag in tagged_processes() if tag.run_dir.name == run]
