"""The only module that touches processes: spawn a server, watch it exit, stop its tree.

Every server starts in its own session (so a signal to the group reaches its workers)
and carries a tag variable that its descendants inherit, so teardown also finds workers
that double-forked and called setsid to leave the group. On Linux the server also dies
with the thread that launched it (a parent-death signal), so a diagbench killed with
SIGKILL leaves no main process behind; what its workers leave, `reaper` finds by tag.
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

import psutil

from diagbench.errors import LaunchError
from diagbench.launch.proctable import (
    environ_bytes,
    process_group,
    process_name,
    sweep_tagged,
    tag_marker,
    tagged_processes,
    tree_names,
)
from diagbench.launch.tags import Tag
from diagbench.records.record import Killed

__all__ = [
    "KILL_CONFIRM_S",
    "Launch",
    "ServerProcess",
    "Teardown",
    "die_with_parent",
    "members",
    "pidfd",
    "process_group",
    "stop_processes",
    "stop_tree",
    "sweep_tagged",
    "tagged_processes",
]

KILL_CONFIRM_S = 5.0  # after SIGKILL, how long to wait for the kernel to reap
_PR_SET_PDEATHSIG = 1  # <linux/prctl.h>
_PR_SET_CHILD_SUBREAPER = 36  # kept across exec: the server's orphaned descendants become its children
_SIGKILL = int(signal.SIGKILL)


@dataclass(frozen=True)
class Launch:
    argv: tuple[str, ...]
    env: Mapping[str, str]
    cwd: Path
    shell: bool
    tag: Tag


class ServerProcess:
    """A started server: its output pipe, and a descriptor that is readable once it exits."""

    def __init__(self, launch: Launch):
        self.launch = launch
        if not launch.cwd.is_dir():
            raise LaunchError(f"working directory {launch.cwd} does not exist (fix server.cwd)")
        argv = ["/bin/sh", "-c", launch.argv[0]] if launch.shell else list(launch.argv)
        if not launch.shell and shutil.which(argv[0], path=launch.env.get("PATH")) is None and "/" not in argv[0]:
            raise LaunchError(f"executable '{argv[0]}' not found on PATH (install it or give its full path)")
        try:
            self.popen = subprocess.Popen(
                argv,
                stdin=subprocess.DEVNULL,  # a server that reads stdin must not hang on ours
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,  # one pipe keeps stdout and stderr in the order written
                env=dict(launch.env),
                cwd=launch.cwd,
                start_new_session=True,  # own session and group: a signal to the group stops the tree
                close_fds=True,
                preexec_fn=die_with_parent(),  # a SIGKILLed diagbench takes its server with it
            )
        except FileNotFoundError:
            raise LaunchError(f"executable '{argv[0]}' not found (install it or fix server.command)") from None
        except PermissionError:
            raise LaunchError(
                f"'{argv[0]}' is not executable (chmod +x it or run it through its interpreter)"
            ) from None
        except OSError as exc:
            raise LaunchError(f"cannot start '{argv[0]}': {exc.strerror}") from None
        assert self.popen.stdout is not None
        self.pipe = self.popen.stdout.fileno()
        os.set_blocking(self.pipe, False)
        self.exit_fd = pidfd(self.popen.pid)

    @property
    def pid(self) -> int:
        return self.popen.pid

    def read(self, size: int = 1 << 16) -> bytes | None:
        """Whatever is in the pipe now: b"" if nothing, None at end of stream."""
        try:
            data = os.read(self.pipe, size)
        except BlockingIOError:
            return b""
        return data or None

    def exit_code(self) -> int | None:
        """The main process's return code (negative: killed by that signal), or None if running."""
        return self.popen.poll()

    def close(self) -> None:
        if self.exit_fd is not None:
            os.close(self.exit_fd)
            self.exit_fd = None
        if self.popen.stdout:
            self.popen.stdout.close()


def _load_prctl() -> Callable[..., int] | None:
    """libc's prctl, looked up once, before any fork (Linux only)."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None
    prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong]
    prctl.restype = ctypes.c_int
    return prctl


_PRCTL = _load_prctl()


def die_with_parent() -> Callable[[], None] | None:
    """What the child runs between fork and exec: ask for SIGKILL when its parent goes.

    It runs in a copy of a threaded process, so it stays trivial: one system call through
    a function looked up before the fork, one more to catch a parent already gone. Linux
    sends the signal when the *thread* that forked exits, so attempts launch from a worker
    that outlives its server (the scheduler's)."""
    prctl, parent = _PRCTL, os.getpid()
    if prctl is None:
        return None

    def child() -> None:
        prctl(_PR_SET_PDEATHSIG, _SIGKILL, 0, 0, 0)
        # a descendant that double-forks, leaves the group and drops the tag variables is
        # reparented to the server's main process, not to init: still its descendant, found
        prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
        if os.getppid() != parent:  # diagbench died between fork and prctl
            os._exit(1)

    return child


def pidfd(pid: int) -> int | None:
    """A descriptor that polls readable when `pid` exits (Linux 5.3+); None elsewhere (then polled)."""
    opener = getattr(os, "pidfd_open", None)
    if opener is None:
        return None
    try:
        return int(opener(pid))
    except OSError:
        return None


# -- teardown ---------------------------------------------------------------------------

FIRST_WAIT_S = 0.05  # how long the tree has to die of its SIGTERM before the host is scanned for tags


@dataclass
class Teardown:
    """What stopping the tree took: who got which signal, and who (if anyone) survived."""

    killed: list[Killed] = field(default_factory=list)
    left_behind: list[int] = field(default_factory=list)
    sigterm_at: float | None = None  # epoch seconds of the first SIGTERM
    seconds: float = 0.0


def stop_tree(server: ServerProcess, grace: float, hurry: threading.Event | None = None) -> Teardown:
    """SIGTERM the group and every tagged process, wait `grace` on one shared deadline
    (cut short when `hurry` is set), SIGKILL the survivors, and confirm none is left."""
    tree = functools.partial(tree_names, server.pid)  # named before the first signal
    report = stop_processes(lambda: members(server), lambda: [server.pid], grace, hurry, tree)
    with contextlib.suppress(subprocess.TimeoutExpired):
        server.popen.wait(timeout=KILL_CONFIRM_S)  # reap the main process
    return report


def stop_processes(
    find: Callable[[], list[psutil.Process]],
    groups: Callable[[], Iterable[int]],
    grace: float,
    hurry: threading.Event | None = None,
    first: Callable[[], dict[int, str]] | None = None,
) -> Teardown:
    """Teardown of whatever `find` returns and the process `groups`: SIGTERM, one shared
    grace deadline, SIGKILL for survivors and anything they forked while dying.

    `first`, when given, names the tree cheaply before the first signal (pid -> name, so what
    dies of it at once is still named in `killed`); its psutil handles are made after the
    group's SIGTERM, and the full `find`, a scan of every process of the host for the tag,
    runs after that, so the server hears it without waiting for either (a scan first made a
    decision's SIGTERM ~3 ms later; psutil handles and names first, ~0.4 ms)."""
    started = time.monotonic()
    report = Teardown(sigterm_at=time.time())
    if first is not None:
        names = first()  # before the first signal
    else:
        procs = find()
        names = {p.pid: process_name(p) for p in procs}
    for pgid in groups():  # the group first: that is most of the tree, at once
        _signal_group(pgid, signal.SIGTERM)
    if first is not None:
        procs = _attach(names)  # one already gone died of the signal: still named, counted below
        _wait_gone(procs, min(grace, FIRST_WAIT_S), hurry)  # the CPU to the dying tree before the scan
        found = {p.pid: p for p in procs}
        procs = list({**found, **{p.pid: p for p in find() if p.pid not in found}}.values())
        names.update({p.pid: process_name(p) for p in procs if p.pid not in names})
    for proc in procs:
        _send(proc, signal.SIGTERM)
    alive = _wait_gone(procs, grace, hurry)
    termed = set(names) - {p.pid for p in alive}  # every process named holds a handle in `procs` or was gone
    report.killed.extend(Killed(pid, names[pid], "SIGTERM") for pid in sorted(termed))
    confirmed = False  # a scan just found none left: it is the confirmation
    for _round in range(3):  # survivors, and anything they forked while dying
        alive = list({p.pid: p for p in [*alive, *find()]}.values())
        if not alive:
            confirmed = True
            break
        for pgid in groups():
            _signal_group(pgid, signal.SIGKILL)
        for proc in alive:
            names.setdefault(proc.pid, process_name(proc))
            _send(proc, signal.SIGKILL)
        report.killed.extend(Killed(p.pid, names[p.pid], "SIGKILL") for p in alive)
        alive = _wait_gone(alive, KILL_CONFIRM_S)
    report.left_behind = [] if confirmed else [p.pid for p in find()]  # a scan of the host is ~10s of ms
    report.seconds = time.monotonic() - started
    return report


def _wait_gone(
    procs: list[psutil.Process], timeout: float, hurry: threading.Event | None = None
) -> list[psutil.Process]:
    """Wait until every process has exited (a zombie counts as gone: it runs nothing and
    holds no port), up to `timeout` or until `hurry` is set; returns the ones still running.
    Processes that are not our children cannot be waited on, so this polls, 5 ms to 50 ms."""
    deadline = time.monotonic() + timeout
    delay = 0.005
    alive = [p for p in procs if _running(p)]
    while alive and (left := deadline - time.monotonic()) > 0 and not (hurry and hurry.is_set()):
        time.sleep(min(delay, left))
        delay = min(delay * 2, 0.05)
        alive = [p for p in alive if _running(p)]
    return alive


def _running(proc: psutil.Process) -> bool:
    try:
        return proc.is_running() and proc.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def members(server: ServerProcess) -> list[psutil.Process]:
    """The live processes of this launch: the main one, its descendants, its group, its tag."""
    found: dict[int, psutil.Process] = {}
    with contextlib.suppress(psutil.Error):
        main = psutil.Process(server.pid)
        if main.status() != psutil.STATUS_ZOMBIE:
            found[main.pid] = main
        for child in main.children(recursive=True):
            if _running(child):  # a zombie runs and holds nothing; it waits for a parent we stop anyway
                found[child.pid] = child
    marker = tag_marker(server.launch.tag.value) + b"\0"
    me = os.getpid()
    for proc in psutil.process_iter():
        if proc.pid in found or proc.pid == me:
            continue
        with contextlib.suppress(psutil.Error, OSError):
            if proc.status() == psutil.STATUS_ZOMBIE:
                continue
            if os.getpgid(proc.pid) == server.pid or marker in environ_bytes(proc):
                found[proc.pid] = proc
    return list(found.values())


def _attach(names: dict[int, str]) -> list[psutil.Process]:
    """psutil handles for the processes named, leaving out those already gone."""
    procs = []
    for pid in names:
        with contextlib.suppress(psutil.Error):
            procs.append(psutil.Process(pid))
    return procs


def _signal_group(pgid: int, sig: signal.Signals) -> None:
    if pgid <= 1 or pgid == os.getpgrp():  # never our own group, whatever a tag claims
        return
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)


def _send(proc: psutil.Process, sig: signal.Signals) -> None:
    with contextlib.suppress(psutil.Error):
        proc.send_signal(sig)
