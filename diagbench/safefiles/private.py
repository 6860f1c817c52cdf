"""A folder diagbench runs programs from (the environment cache): this user's, writable by
nobody else, nor is any folder above it."""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

from diagbench.safefiles.folder import Folder
from diagbench.safefiles.reading import DIR_FLAGS, Unsafe, user_name

__all__ = ["private_folder"]


def private_folder(path: Path, make: bool = True) -> Folder:
    """A folder diagbench runs programs from (or keeps what decides what to run): made if
    missing (mode 0700), then held only if it and every folder above it (the real ones,
    after the user's links) is this user's or root's, and writable by nobody else but in a
    sticky folder like /tmp. Anyone who could write there could choose what diagbench runs."""
    if make:
        try:
            os.makedirs(path, 0o700, exist_ok=True)
        except FileExistsError:
            pass  # a link to nowhere, or a file: the walk below says which
        except OSError as exc:
            raise Unsafe(path, f"cannot be made ({exc.strerror})") from None
    real = Path(os.path.realpath(path))
    fd, here = os.open("/", DIR_FLAGS), Path("/")
    try:
        for part in real.parts[1:]:
            _check_above(fd, here)
            try:
                inner = os.open(part, DIR_FLAGS | os.O_NOFOLLOW, dir_fd=fd)
            except OSError as exc:
                raise Unsafe(path, _walk_error(here / part, exc)) from None
            os.close(fd)
            fd, here = inner, here / part
        _check_private(fd, path)
    except BaseException:
        os.close(fd)
        raise
    return Folder(fd, path)


def _walk_error(where: Path, exc: OSError) -> str:
    if exc.errno == errno.ENOENT:
        return f"{where}: no such folder"
    if exc.errno in (errno.ENOTDIR, errno.ELOOP):
        return f"{where} is not a folder"
    return f"{where}: {exc.strerror}"


def _check_above(fd: int, here: Path) -> None:
    info = os.fstat(fd)
    if info.st_uid not in (0, os.getuid()):
        raise Unsafe(here, f"belongs to {user_name(info.st_uid)}: they could swap what diagbench runs from below it")
    if stat.S_IMODE(info.st_mode) & 0o022 and not info.st_mode & stat.S_ISVTX:
        raise Unsafe(here, f"is writable by others (mode {stat.S_IMODE(info.st_mode):04o}): chmod go-w it")


def _check_private(fd: int, path: Path) -> None:
    info = os.fstat(fd)
    if info.st_uid != os.getuid():
        raise Unsafe(
            path,
            f"belongs to {user_name(info.st_uid)}, not to you: diagbench runs programs from it (use a folder of yours)",
        )
    if stat.S_IMODE(info.st_mode) & 0o022:
        raise Unsafe(path, f"is writable by others (mode {stat.S_IMODE(info.st_mode):04o}): chmod go-w it")
