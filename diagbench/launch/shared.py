"""Folders that every diagbench of a host shares under /tmp (port and GPU leases), opened
through the files door (safefiles.py) without trusting what is already there.

A name in /tmp is anyone's to choose: another user may have planted a symbolic link, a
regular file, a folder of their own, or one nobody can write. So the folder is made with
`mkdir` (only what this call made is ever chmod'ed, through its descriptor), then opened
with `O_NOFOLLOW | O_DIRECTORY` and judged on what `fstat` says of that very folder: a
folder of this user that it can use, or one sticky and writable by all like /tmp itself.
Lock files are opened relative to that descriptor, so a folder swapped after the check is
never followed either. Anything else is `Unusable`, with the reason and the fix in words.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
from pathlib import Path

from diagbench.safefiles import Unsafe, lock_problem, user_name

__all__ = ["SHARED_MODE", "Unusable", "folder_problem", "open_folder", "open_lock"]

SHARED_MODE = 0o1777  # sticky and writable by all, like /tmp: each user may remove only their own files
_FLAGS = os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK


class Unusable(Exception):
    """The shared folder cannot be trusted or used; the message says why and what to do."""


def open_folder(path: Path, parents: bool = False) -> int:
    """A descriptor of the shared folder at `path` (made if missing), or `Unusable`."""
    made = _make(path, parents)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError as exc:
        raise Unusable(_why_not_opened(path, exc)) from None
    try:
        info = os.fstat(fd)
        if made and info.st_uid == os.getuid():
            os.fchmod(fd, SHARED_MODE)  # mkdir's mode was cut by the umask; this folder is ours, just made
            info = os.fstat(fd)
        problem = folder_problem(info)
    except OSError as exc:
        os.close(fd)
        raise Unusable(f"{path}: {exc.strerror}") from None
    if problem is not None:
        os.close(fd)
        raise Unusable(f"{path} {problem}")
    return fd


def _make(path: Path, parents: bool) -> bool:
    """True if this call made the folder (then, and only then, it may be chmod'ed)."""
    if parents:
        with contextlib.suppress(OSError):
            path.parent.mkdir(parents=True, exist_ok=True)
    try:
        os.mkdir(path, SHARED_MODE)
    except OSError:
        return False  # there already, or the open below says why
    return True


def _why_not_opened(path: Path, exc: OSError) -> str:
    try:
        info = os.lstat(path)
    except OSError:
        return f"{path} cannot be made or opened ({exc.strerror})"
    if stat.S_ISLNK(info.st_mode):
        return f"{path} is a symbolic link (owned by {user_name(info.st_uid)}), not a folder: remove it"
    if not stat.S_ISDIR(info.st_mode):
        return f"{path} is not a folder (owned by {user_name(info.st_uid)}): remove it"
    return f"{path} cannot be opened ({exc.strerror})"


def folder_problem(info: os.stat_result) -> str | None:
    """What makes a folder (as fstat saw it) unfit to hold shared locks, or None."""
    mode = stat.S_IMODE(info.st_mode)
    shown = f"mode {mode:04o}, owned by {user_name(info.st_uid)}"
    if mode & 0o022 and not mode & stat.S_ISVTX:
        return f"is writable by others without the sticky bit ({shown}): anyone could remove a lease; remove it"
    if info.st_uid == os.getuid():
        if mode & 0o700 != 0o700:
            return f"cannot be used ({shown}): chmod 1777 it or remove it"
        return None
    if mode & SHARED_MODE != SHARED_MODE:
        return f"belongs to another user and is not shared ({shown}): ask them to remove it, or chmod 1777 it"
    return None


def open_lock(folder: int, name: str) -> int:
    """A lock file in the folder, made if missing: a regular file with one link, never a link
    (OSError else); another user's is opened read-only (a lock needs no write access)."""
    try:
        fd = os.open(name, _FLAGS | os.O_RDWR | os.O_CREAT, 0o666, dir_fd=folder)
    except PermissionError:  # another user's file: a lock needs no write access, only the holder's name does
        fd = os.open(name, _FLAGS | os.O_RDONLY, dir_fd=folder)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise Unsafe(name, "a symbolic link, not a lock file: remove it") from None
        raise
    info = os.fstat(fd)
    problem = lock_problem(info, ours=False)
    if problem:
        os.close(fd)
        raise Unsafe(name, problem)
    if info.st_uid == os.getuid() and stat.S_IMODE(info.st_mode) != 0o666:
        with contextlib.suppress(OSError):
            os.fchmod(fd, 0o666)  # ours, one link, no link: every user's diagbench must be able to lock it
    return fd
