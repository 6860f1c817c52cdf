"""Input files and a run directory's files read: a regular file (a FIFO never waited on, a
device never opened) of bounded size; `Unsafe` says why a file or folder is unfit."""

from __future__ import annotations

import errno
import io
import os
import pwd
import stat
from pathlib import Path

__all__ = [
    "DIR_FLAGS",
    "FILE_FLAGS",
    "TooLarge",
    "Unsafe",
    "describe_kind",
    "open_fd",
    "open_input",
    "open_regular",
    "read_fd",
    "read_head",
    "read_input",
    "read_regular",
    "user_name",
]

DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC
FILE_FLAGS = os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC


class Unsafe(OSError):
    """A folder or file diagbench will not use as it is; `strerror` says why and what to do."""

    def __init__(self, path: Path | str, why: str):
        super().__init__(errno.EPERM, why, str(path))

    def __str__(self) -> str:
        return f"{self.filename}: {self.strerror}"


class TooLarge(Unsafe):
    """A file larger than what such a file may hold (`size` None: it grew while read, or a
    special file that says nothing of its size)."""

    def __init__(self, path: Path | str, size: int | None, limit: int):
        self.size, self.limit = size, limit
        shown = f"{size:,} bytes" if size is not None else "more bytes than it said"
        super().__init__(path, f"{shown}, more than the {limit:,} such a file may hold")


def describe_kind(mode: int) -> str:
    """What a file that is not a regular one is, in words."""
    for test, word in (
        (stat.S_ISDIR, "a directory"),
        (stat.S_ISFIFO, "a named pipe (FIFO)"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
        (stat.S_ISSOCK, "a socket"),
        (stat.S_ISLNK, "a symbolic link"),
    ):
        if test(mode):
            return word
    return "not a regular file"


def open_fd(path: Path | str, follow: bool, dir_fd: int | None = None) -> int:
    """A descriptor of a regular file, read-only; never blocks on a FIFO, never opens a device
    (Unsafe for anything else; `follow`: a link to a regular file will do)."""
    flags = FILE_FLAGS | os.O_RDONLY
    try:
        before = os.stat(path, dir_fd=dir_fd, follow_symlinks=follow)  # a device is never even opened
        if not stat.S_ISREG(before.st_mode):
            raise Unsafe(path, f"{describe_kind(before.st_mode)}, not a regular file")
        fd = os.open(path, flags if not follow else flags & ~os.O_NOFOLLOW, dir_fd=dir_fd)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise Unsafe(path, "a symbolic link, not a regular file: diagbench reads no link here") from None
        raise
    mode = os.fstat(fd).st_mode
    if not stat.S_ISREG(mode):
        os.close(fd)
        raise Unsafe(path, f"{describe_kind(mode)}, not a regular file")
    os.set_blocking(fd, True)
    return fd


def read_fd(fd: int, path: Path | str, limit: int) -> bytes:
    with io.FileIO(fd, "rb") as handle:
        size = os.fstat(fd).st_size
        if size > limit:
            raise TooLarge(path, size, limit)
        data = handle.read(limit + 1)
    if len(data) > limit:  # a file that grew while it was read
        raise TooLarge(path, None, limit)
    return data


def read_input(path: Path, limit: int) -> bytes:
    """An input file the user named (a spec, a pack, a remedies or requirements file): a
    regular file (a link to one is the user's to make) of at most `limit` bytes."""
    return read_fd(open_fd(path, follow=True), path, limit)


def open_input(path: Path) -> io.BufferedReader:
    """An input file the user named that is read as a stream (a log to classify): a regular
    file (a link to one will do), of any size; Unsafe for anything else."""
    return io.BufferedReader(io.FileIO(open_fd(path, follow=True), "rb"))


def read_head(path: Path, size: int) -> bytes:
    """The first `size` bytes of a regular file the user named (a program, for its shebang)."""
    with io.FileIO(open_fd(path, follow=True), "rb") as handle:
        return handle.read(size)


def open_regular(path: Path) -> io.BufferedReader:
    """A file of a run directory opened for reading: a regular file, not a link (the folders
    above it may be links: `runs/latest` is one diagbench makes)."""
    return io.BufferedReader(io.FileIO(open_fd(path, follow=False), "rb"))


def read_regular(path: Path, limit: int) -> bytes:
    """The whole of a run directory's file (see `open_regular`) of at most `limit` bytes."""
    return read_fd(open_fd(path, follow=False), path, limit)


def user_name(uid: int) -> str:
    try:
        return f"{pwd.getpwuid(uid).pw_name} (uid {uid})"
    except KeyError:
        return f"uid {uid}"
