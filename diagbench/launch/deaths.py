"""Deaths inside the server's tree: which worker a signal ended, while the server lives on.

Servers rarely log that a worker was SIGKILLed. vLLM 0.32 reports an EngineCore killed
during start-up as `Failed core proc(s): {}`: it asks for the exit code before the kernel
has one (vllm/v1/engine/utils.py wait_for_engine_startup). diagbench opens a pidfd for each
descendant it sees; the pidfd turns readable when that process has exited, and while the
parent has not reaped it yet, /proc/<pid>/stat still holds its wait status (field 52,
Linux 3.5+). A death the parent reaped first goes unnamed, never misnamed. The process is
named as it was when it died (field 2): a worker seen at its start as `python3` sets its title
later (vLLM's `VLLM::Worker`, through setproctitle, which sets the kernel's name too).
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
from dataclasses import dataclass

import psutil

from diagbench.safetext import one_line

__all__ = ["REFRESH_S", "Death", "Descendants"]

REFRESH_S = 0.5  # look for new descendants at most this often (only when the server writes)
_EXIT_CODE_FIELD = 52  # /proc/<pid>/stat, 1-based, counting the pid and (comm) as fields 1 and 2


@dataclass(frozen=True)
class Death:
    """A descendant ended by a signal."""

    pid: int
    name: str
    signal: int

    @property
    def words(self) -> str:
        try:
            name = signal.Signals(self.signal).name
        except ValueError:
            name = f"signal {self.signal}"
        return f"{self.name} (pid {self.pid}) was killed by {name}"


class Descendants:
    """Pidfds for the server's descendants (not the main process: its exit is watched apart)."""

    def __init__(self, main_pid: int):
        self.main_pid = main_pid
        self._by_fd: dict[int, tuple[int, str]] = {}
        self._seen: set[int] = set()
        self._last_refresh = float("-inf")

    def refresh(self, now: float | None = None) -> list[int]:
        """Open pidfds for descendants not seen before; returns them (at most every REFRESH_S)."""
        now = time.monotonic() if now is None else now
        if now - self._last_refresh < REFRESH_S or not hasattr(os, "pidfd_open"):
            return []
        self._last_refresh = now
        try:
            children = psutil.Process(self.main_pid).children(recursive=True)
        except psutil.Error:
            return []
        fresh = []
        for child in children:
            if child.pid in self._seen:
                continue
            self._seen.add(child.pid)
            with contextlib.suppress(OSError, psutil.Error):
                name = one_line(child.name())  # a process names itself: shown, never obeyed
                fd = os.pidfd_open(child.pid)
                self._by_fd[fd] = (child.pid, name)
                fresh.append(fd)
        return fresh

    def ended(self, fd: int) -> Death | None:
        """The descendant behind `fd` has exited: its death, if a signal caused it and the
        wait status can still be read. The descriptor is closed."""
        pid, name = self._by_fd.pop(fd)
        os.close(fd)
        found = _zombie(pid)
        if found is None or not os.WIFSIGNALED(found[0]):
            return None
        title = found[1]
        # the kernel keeps 15 bytes of a name: the longer one read while it lived, if it is that one
        return Death(pid, name if name.startswith(title) else title, os.WTERMSIG(found[0]))

    def close(self) -> None:
        for fd in self._by_fd:
            os.close(fd)
        self._by_fd.clear()


def _zombie(pid: int) -> tuple[int, str] | None:
    """The wait status and name of a zombie, or None (still running, already reaped, unreadable)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            data = handle.read()
    except OSError:
        return None
    close = data.rfind(b")")
    fields = data[close + 2 :].split()  # from field 3 on: comm may hold spaces
    if not fields or fields[0] != b"Z" or len(fields) < _EXIT_CODE_FIELD - 2:
        return None
    name = data[data.find(b"(") + 1 : close].decode(errors="replace")
    return int(fields[_EXIT_CODE_FIELD - 3]), name
