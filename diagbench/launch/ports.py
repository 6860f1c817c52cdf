"""Ports for servers: one per attempt that no other live attempt on this host holds.

Asking the kernel for a free port (bind to port 0) and handing the number to a server
leaves a window: the socket is closed before the server binds, and another attempt, of
this diagbench or of another one, can be handed the same number. So a port is *leased*
until its attempt has ended: in this process through a registry, across processes
through a lock file per port under `/tmp/diagbench-ports/`, held with `flock`. The
kernel drops the lock when its holder dies, so a lease never outlives its diagbench.

A foreign program can still take the port between the check and the server's bind;
that stays visible as it always was: `launch_error` (port already in use, holder named)
or the server's own `failed:port_in_use`.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import socket
import stat
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import psutil

from diagbench.errors import LaunchError
from diagbench.launch.shared import Unusable, open_folder, open_lock
from diagbench.safetext import one_line

__all__ = ["AUTO_TRIES", "LEASE_DIR", "Lease", "free_port", "lease_port", "port_holder", "remove_stale_leases"]

# Ports are the host's, so every diagbench on it must find the same folder, whatever its
# TMPDIR (a batch job's, a CI job's, macOS's per-user one) or its user: /tmp is that place
# on every Unix. XDG_RUNTIME_DIR is per user, and /dev/shm is not on every system.
LEASE_DIR = Path("/tmp") / "diagbench-ports"
AUTO_TRIES = 100  # the kernel hands out ports at random; a hundred held ones in a row is a full host

_registry: set[int] = set()  # ports leased by this process
_registry_lock = threading.Lock()


@dataclass(frozen=True)
class Lease:
    """A port for one attempt; `holder` names who has it when it could not be had."""

    port: int
    holder: str | None = None
    fd: int | None = None  # the lock file, held until release


@contextlib.contextmanager
def lease_port(port: int | None, label: str) -> Iterator[Lease]:
    """A leased port (a free one if `port` is None) for as long as the block runs."""
    lease = _lease_auto(label) if port is None else _lease_fixed(port, label)
    try:
        yield lease
    finally:
        if lease.holder is None:
            _release(lease)


def _lease_fixed(port: int, label: str) -> Lease:
    held = _hold(port, label)
    if isinstance(held, str):
        return Lease(port, held)
    holder = port_holder(port)
    if holder is not None:
        _release(Lease(port, None, held))
        return Lease(port, holder)
    return Lease(port, None, held)


def _lease_auto(label: str) -> Lease:
    for _ in range(AUTO_TRIES):
        port = free_port()
        held = _hold(port, label)
        if isinstance(held, str):
            continue  # another attempt's: its server may not have bound it yet
        if port_holder(port) is None:
            return Lease(port, None, held)
        _release(Lease(port, None, held))
    raise LaunchError(f"no free port found in {AUTO_TRIES} tries (is this host out of ports?)")


def _hold(port: int, label: str) -> int | str | None:
    """Take the port's lease: the lock file's descriptor (None where no lock file can be
    made: then the registry alone guards this process), or the holder's name."""
    with _registry_lock:
        if port in _registry:
            return "another attempt of this diagbench"
        _registry.add(port)
    try:
        fd = _lock_file(port, label)
    except _Held as held:
        with _registry_lock:
            _registry.discard(port)
        return str(held)
    return fd


class _Held(Exception):
    """The port's lock file is locked by another diagbench."""


def _lock_file(port: int, label: str) -> int | None:
    folder = _lease_dir()
    if folder is None:
        return None
    try:
        return _locked(folder, f"{port}.lock", label)
    finally:
        os.close(folder)


def _locked(folder: int, name: str, label: str) -> int | None:
    for _ in range(3):  # the file may be unlinked by its last holder between our open and lock
        try:
            fd = open_lock(folder, name)
        except OSError:
            return None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 300, 0).decode("utf-8", errors="replace").strip()
            os.close(fd)
            raise _Held(f"diagbench {holder}" if holder else "another diagbench") from None
        except OSError:  # a file system without locks: the registry alone guards this process
            os.close(fd)
            return None
        if _same_file(fd, folder, name):
            with contextlib.suppress(OSError):  # another user's file, opened read-only: the lock holds
                os.ftruncate(fd, 0)
                os.pwrite(fd, f"pid {os.getpid()} ({label})\n".encode(), 0)
            return fd
        os.close(fd)
    return None


def _same_file(fd: int, folder: int, name: str) -> bool:
    try:
        return os.fstat(fd).st_ino == os.stat(name, dir_fd=folder, follow_symlinks=False).st_ino
    except OSError:
        return False


_warned: list[str] = []  # the folder's problem, said once per process


def _lease_dir() -> int | None:
    """The shared folder of port locks, opened safely (see launch/shared.py); None, said
    once on standard error, where it is unusable: the registry alone guards this process."""
    try:
        return open_folder(LEASE_DIR)
    except Unusable as why:
        if not _warned:
            _warned.append(str(why))
            sys.stderr.write(
                f"diagbench: warning: port leases off: {why}; two diagbench runs may pick one port until it is fixed\n"
            )
        return None


def _release(lease: Lease) -> None:
    if lease.fd is not None:
        folder = _lease_dir()
        name = f"{lease.port}.lock"
        if folder is not None:
            if _same_file(lease.fd, folder, name):
                with contextlib.suppress(OSError):
                    os.unlink(name, dir_fd=folder)  # under the lock: nobody holds a stale copy
            os.close(folder)
        os.close(lease.fd)
    with _registry_lock:
        _registry.discard(lease.port)


def remove_stale_leases() -> int:
    """Lock files that no live diagbench holds (their holder was killed before it could
    remove them): removed under their own lock, so a lease taken meanwhile is never lost."""
    folder = _lease_dir()
    if folder is None:
        return 0
    removed = 0
    try:
        for name in os.listdir(folder):
            if name.endswith(".lock"):
                removed += _remove_if_free(folder, name)
    finally:
        os.close(folder)
    return removed


def _remove_if_free(folder: int, name: str) -> int:
    try:
        fd = os.open(name, os.O_RDWR | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK, dir_fd=folder)
    except OSError:
        return 0
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        if stat.S_ISREG(os.fstat(fd).st_mode) and _same_file(fd, folder, name):
            os.unlink(name, dir_fd=folder)
            return 1
    except OSError:
        pass  # held: a live attempt's lease
    finally:
        os.close(fd)
    return 0


def free_port() -> int:
    """A port nothing listens on now (the kernel's choice)."""
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
                return f"pid {conn.pid} ({one_line(' '.join(proc.cmdline()))[:120]})"
    return "another process"
