"""Helper programs diagbench runs for itself (an interpreter's probe, nvidia-smi, uv, py-spy,
git): the one way they are started, waited on and stopped.

A helper runs in a session of its own, carrying a tag variable (`DIAGBENCH_HELPER`) that its
descendants inherit, with a deadline. Its output is read as it comes, up to a cap. When its
main process ends, its pipes get DRAIN_S to close; then, or at the deadline, its whole group
and every process with its tag is killed (SIGKILL: a helper holds nothing worth a grace
period) and the pipes are closed without waiting for their end. A helper that started a
daemon (a `python3` wrapper running `setsid sleep 120 &` before it execs Python) holds those
pipes open for as long as the daemon lives: waiting for their end is what made a probe wait
for ever. A helper stuck in the kernel (a D-state nvidia-smi) cannot be killed: it is left
to finish alone, after KILL_CONFIRM_S, and the caller goes on.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import selectors
import signal
import subprocess
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from diagbench.launch.process import die_with_parent, pidfd

__all__ = ["DRAIN_S", "HELPER_VAR", "OUTPUT_LIMIT", "Ran", "run_helper"]

HELPER_VAR = "DIAGBENCH_HELPER"
DRAIN_S = 0.25  # after the main process ended, what its pipes get to close before its leftovers are killed
KILL_CONFIRM_S = 2.0  # after SIGKILL, how long the main process gets to be reaped
POLL_S = 0.05  # how often a stop flag (or, without a pidfd, the process) is looked at
OUTPUT_LIMIT = 16 << 20  # bytes kept of each stream; the rest is read and dropped
_CHUNK = 1 << 16


@dataclass(frozen=True)
class Ran:
    """How a helper went: its exit status (None when it did not end by itself), what it wrote."""

    argv: tuple[str, ...]
    code: int | None  # negative: killed by that signal; None: did not start, or stopped at the deadline
    stdout: bytes
    stderr: bytes
    seconds: float
    timed_out: bool = False
    error: str = ""  # why it could not start
    truncated: bool = False  # a stream wrote more than its cap

    @property
    def ok(self) -> bool:
        return self.code == 0 and not self.timed_out

    def out(self) -> str:
        return self.stdout.decode("utf-8", errors="replace")

    def err(self) -> str:
        return self.stderr.decode("utf-8", errors="replace")

    def failure(self, timeout: float) -> str:
        """Why it did not work, in words: '<program>: not found', 'no answer within 60 s', its last line."""
        if self.error:
            return f"{self.argv[0]}: {self.error}"
        if self.timed_out:
            return f"no answer within {timeout:g} s"
        lines = [line.strip() for line in self.err().splitlines() if line.strip()]
        return lines[-1] if lines else f"exit {self.code}"


def run_helper(
    argv: Sequence[str],
    timeout: float,
    env: Mapping[str, str] | None = None,
    cwd: Path | None = None,
    stdin: bytes | None = None,
    limit: int = OUTPUT_LIMIT,
    stop: threading.Event | None = None,
) -> Ran:
    """Run `argv` (never through a shell) for at most `timeout` seconds, or until `stop` is set
    (Ctrl-C: then it ends as at its deadline); see the module's docstring."""
    tag = f"{os.getpid()}-{secrets.token_hex(8)}"
    started = time.monotonic()
    try:
        child = subprocess.Popen(
            list(argv),
            stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,  # never the user's terminal
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env={**(os.environ if env is None else env), HELPER_VAR: tag},  # its descendants inherit the tag
            cwd=cwd,
            start_new_session=True,  # own group: stopped whole, never our terminal's signals
            close_fds=True,
            preexec_fn=die_with_parent(),  # a SIGKILLed diagbench takes its helper with it
        )
    except OSError as exc:
        return Ran(tuple(argv), None, b"", b"", time.monotonic() - started, error=exc.strerror or str(exc))
    reader = _Reader(child, stdin, limit)
    timed_out, held = True, True
    try:
        timed_out = reader.wait(started + timeout, stop)
        held = timed_out or reader.open_pipes()
    finally:  # an exception (Ctrl-C in the main thread) stops it too
        _stop(child, tag, hunt=held)
        reader.close()
    code = None if timed_out else child.returncode
    out, err = bytes(reader.data[0]), bytes(reader.data[1])
    return Ran(tuple(argv), code, out, err, time.monotonic() - started, timed_out, "", reader.truncated)


class _Reader:
    """Both pipes read into memory (up to the cap) while the main process runs."""

    def __init__(self, child: subprocess.Popen[bytes], stdin: bytes | None, limit: int):
        self.child, self.limit, self.truncated = child, limit, False
        self.data = [bytearray(), bytearray()]
        self.sel = selectors.DefaultSelector()
        for index, pipe in enumerate((child.stdout, child.stderr)):
            assert pipe is not None
            os.set_blocking(pipe.fileno(), False)
            self.sel.register(pipe.fileno(), selectors.EVENT_READ, index)
        self.pending = stdin or b""
        if child.stdin is not None:
            os.set_blocking(child.stdin.fileno(), False)
            self.sel.register(child.stdin.fileno(), selectors.EVENT_WRITE, "in")
        self.exit_fd = pidfd(child.pid)
        if self.exit_fd is not None:
            self.sel.register(self.exit_fd, selectors.EVENT_READ, "exit")

    def wait(self, deadline: float, stop: threading.Event | None) -> bool:
        """Read until the main process ended and its pipes closed (or DRAIN_S after it ended);
        True if the deadline (or `stop`) came first."""
        drain_until: float | None = None
        while True:
            now = time.monotonic()
            if drain_until is None and self._exited():
                drain_until = now + DRAIN_S
            if drain_until is not None and (now >= drain_until or not self.open_pipes()):
                return False
            if now >= deadline or (stop is not None and stop.is_set()):
                return True
            wait = min(deadline, drain_until or deadline) - now
            if self.exit_fd is None or stop is not None:
                wait = min(wait, POLL_S)  # no pidfd, or a stop flag to look at: poll
            for key, _ in self.sel.select(max(wait, 0.0)):
                self._ready(key)

    def _exited(self) -> bool:
        """Whether the main process ended, left unreaped: its group id stays its own until then."""
        try:
            return os.waitid(os.P_PID, self.child.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None
        except ChildProcessError:
            return True

    def open_pipes(self) -> bool:
        return any(isinstance(key.data, int) for key in self.sel.get_map().values())

    def _ready(self, key: selectors.SelectorKey) -> None:
        if key.data == "exit":
            self.sel.unregister(key.fd)
        elif key.data == "in":
            self._write(key.fd)
        else:
            self._read(key.fd, int(key.data))

    def _read(self, fd: int, index: int) -> None:
        try:
            chunk = os.read(fd, _CHUNK)
        except BlockingIOError:
            return
        except OSError:
            chunk = b""
        if not chunk:
            self.sel.unregister(fd)
            return
        room = self.limit - len(self.data[index])
        self.truncated = self.truncated or len(chunk) > room
        self.data[index] += chunk[: max(room, 0)]

    def _write(self, fd: int) -> None:
        try:
            sent = os.write(fd, self.pending[:_CHUNK]) if self.pending else 0
        except BlockingIOError:
            return
        except OSError:  # it closed its input: what it did not read is its business
            self.pending = b""
        self.pending = self.pending[sent:] if self.pending else b""
        if not self.pending:
            self.sel.unregister(fd)
            assert self.child.stdin is not None
            self.child.stdin.close()

    def close(self) -> None:
        self.sel.close()
        for pipe in (self.child.stdin, self.child.stdout, self.child.stderr):
            if pipe is not None:
                with contextlib.suppress(OSError):
                    pipe.close()
        if self.exit_fd is not None:
            os.close(self.exit_fd)


def _stop(child: subprocess.Popen[bytes], tag: str, hunt: bool) -> None:
    """SIGKILL the helper's group (its main process, not reaped yet, keeps the group's id
    from reuse), and, when something still held its pipes or the deadline came (`hunt`),
    every process with its tag (one that left the group with setsid); reap the main process."""
    until = time.monotonic() + KILL_CONFIRM_S
    while True:  # a process may fork while the others die; one SIGKILLed is gone once it is not seen
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(child.pid, signal.SIGKILL)
        tagged = _tagged(tag) if hunt else []
        for pid in tagged:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
        if not tagged or time.monotonic() >= until:
            break
        time.sleep(0.005)
    with contextlib.suppress(subprocess.TimeoutExpired):
        child.wait(timeout=KILL_CONFIRM_S)


def _tagged(tag: str) -> list[int]:
    """Live processes of this user that carry the helper's tag (read from /proc)."""
    marker, uid, me = f"{HELPER_VAR}={tag}\0".encode(), os.getuid(), os.getpid()
    found = []
    with contextlib.suppress(OSError):
        for name in os.listdir("/proc"):
            if not name.isdigit() or int(name) == me:
                continue
            with contextlib.suppress(OSError):
                if os.stat(f"/proc/{name}").st_uid != uid:
                    continue
                with open(f"/proc/{name}/environ", "rb") as handle:
                    if marker in handle.read() + b"\0":
                        found.append(int(name))
    return found
