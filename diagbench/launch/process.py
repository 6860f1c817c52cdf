"""The only module that touches processes: spawn a server, watch it exit, stop its tree.

Every server starts in its own session (so a signal to the group reaches its workers)
and carries a tag variable that its descendants inherit, so teardown also finds workers
that double-forked and called setsid to leave the group.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

import psutil

from diagbench.errors import LaunchError
from diagbench.records.record import Killed

TAG_VAR = "DIAGBENCH_ATTEMPT"
KILL_CONFIRM_S = 5.0  # after SIGKILL, how long to wait for the kernel to reap


@dataclass(frozen=True)
class Launch:
    argv: tuple[str, ...]
    env: Mapping[str, str]
    cwd: Path
    shell: bool
    tag: str


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
        self.exit_fd = _pidfd(self.popen.pid)

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


def _pidfd(pid: int) -> int | None:
    """A descriptor that polls readable when `pid` exits (Linux 5.3+); None elsewhere."""
    opener = getattr(os, "pidfd_open", None)
    if opener is None:
        return None
    try:
        return int(opener(pid))
    except OSError:
        return None


# -- teardown ---------------------------------------------------------------------------


@dataclass
class Teardown:
    """What stopping the tree took: who got which signal, and who (if anyone) survived."""

    killed: list[Killed] = field(default_factory=list)
    left_behind: list[int] = field(default_factory=list)
    sigterm_at: float | None = None  # epoch seconds of the first SIGTERM
    seconds: float = 0.0


def stop_tree(server: ServerProcess, grace: float) -> Teardown:
    """SIGTERM the group and every tagged process, wait `grace` on one shared deadline,
    SIGKILL the survivors, and confirm none is left."""
    started = time.monotonic()
    report = Teardown(sigterm_at=time.time())
    _signal_group(server.pid, signal.SIGTERM)  # the group first: that is most of the tree, at once
    procs = _members(server)
    names = {p.pid: _name(p) for p in procs}
    for proc in procs:
        _send(proc, signal.SIGTERM)
    alive = _wait_gone(procs, grace)
    termed = {p.pid for p in procs} - {p.pid for p in alive}
    report.killed.extend(Killed(pid, names[pid], "SIGTERM") for pid in sorted(termed))
    for _round in range(3):  # survivors, and anything they forked while dying
        alive = list({p.pid: p for p in [*alive, *_members(server)]}.values())
        if not alive:
            break
        _signal_group(server.pid, signal.SIGKILL)
        for proc in alive:
            names.setdefault(proc.pid, _name(proc))
            _send(proc, signal.SIGKILL)
        report.killed.extend(Killed(p.pid, names[p.pid], "SIGKILL") for p in alive)
        alive = _wait_gone(alive, KILL_CONFIRM_S)
    with contextlib.suppress(subprocess.TimeoutExpired):
        server.popen.wait(timeout=KILL_CONFIRM_S)  # reap the main process
    report.left_behind = [p.pid for p in _members(server)]
    report.seconds = time.monotonic() - started
    return report


def _wait_gone(procs: list[psutil.Process], timeout: float) -> list[psutil.Process]:
    """Wait until every process has exited (a zombie counts as gone: it runs nothing and
    holds no port), up to `timeout`; returns the ones still running. Processes that are
    not our children cannot be waited on, so this polls, from 5 ms up to 50 ms."""
    deadline = time.monotonic() + timeout
    delay = 0.005
    alive = [p for p in procs if _running(p)]
    while alive and (left := deadline - time.monotonic()) > 0:
        time.sleep(min(delay, left))
        delay = min(delay * 2, 0.05)
        alive = [p for p in alive if _running(p)]
    return alive


def _running(proc: psutil.Process) -> bool:
    try:
        return proc.is_running() and proc.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def _members(server: ServerProcess) -> list[psutil.Process]:
    """The live processes of this launch: the main one, its descendants, its group, its tag."""
    found: dict[int, psutil.Process] = {}
    with contextlib.suppress(psutil.Error):
        main = psutil.Process(server.pid)
        if main.status() != psutil.STATUS_ZOMBIE:
            found[main.pid] = main
        for child in main.children(recursive=True):
            found[child.pid] = child
    marker = _tag_marker(server.launch.tag) + b"\0"
    me = os.getpid()
    for proc in psutil.process_iter():
        if proc.pid in found or proc.pid == me:
            continue
        with contextlib.suppress(psutil.Error, OSError):
            if proc.status() == psutil.STATUS_ZOMBIE:
                continue
            if os.getpgid(proc.pid) == server.pid or marker in _environ_bytes(proc):
                found[proc.pid] = proc
    return list(found.values())


def _tag_marker(tag: str) -> bytes:
    return f"{TAG_VAR}={tag}".encode()


def _environ_bytes(proc: psutil.Process) -> bytes:
    """The process's initial environment, raw (fast path on Linux)."""
    try:
        with open(f"/proc/{proc.pid}/environ", "rb") as handle:
            return handle.read() + b"\0"
    except FileNotFoundError:
        return b"".join(f"{k}={v}".encode() + b"\0" for k, v in proc.environ().items())


def _signal_group(pgid: int, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)


def _send(proc: psutil.Process, sig: signal.Signals) -> None:
    with contextlib.suppress(psutil.Error):
        proc.send_signal(sig)


def _name(proc: psutil.Process) -> str:
    try:
        return proc.name()
    except psutil.Error:
        return "?"


# -- ports ------------------------------------------------------------------------------


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("", 0))
        return int(sock.getsockname()[1])


def port_holder(port: int) -> str | None:
    """None if `port` can be bound; else who holds it, as words for a message."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as servers do: TIME_WAIT is no holder
        try:
            sock.bind(("", port))
            return None
        except OSError:
            pass
    with contextlib.suppress(psutil.Error, OSError):
        for conn in psutil.net_connections(kind="inet"):
            if conn.laddr and conn.laddr.port == port and conn.status == psutil.CONN_LISTEN and conn.pid:
                proc = psutil.Process(conn.pid)
                return f"pid {conn.pid} ({' '.join(proc.cmdline())[:120]})"
    return "another process"


def sweep_tagged(tag_prefix: str) -> list[int]:
    """Pids of any live process whose tag starts with `tag_prefix` (a safety net for tests)."""
    marker = _tag_marker(tag_prefix)
    out = []
    for proc in psutil.process_iter():
        with contextlib.suppress(psutil.Error, OSError):
            if proc.status() != psutil.STATUS_ZOMBIE and marker in _environ_bytes(proc):
                out.append(proc.pid)
    return out
