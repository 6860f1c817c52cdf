"""Folders walked without links: each name below the folder the user named opened relative
to its parent with `O_NOFOLLOW`; files replaced whole through a new file renamed into place;
lock files regular, this user's, with one link; trees removed without following a link."""

from __future__ import annotations

import contextlib
import errno
import io
import os
import stat
from pathlib import Path

from diagbench.safefiles.reading import (
    DIR_FLAGS,
    FILE_FLAGS,
    Unsafe,
    describe_kind,
    open_fd,
    read_fd,
    user_name,
)

__all__ = ["MAX_DEPTH", "Folder", "lock_problem", "remove_folder", "write_file"]

MAX_DEPTH = 256  # folders deep that remove_tree goes (a descriptor each)


class Folder:
    """An open folder: names below it are reached through its descriptor, never through a link."""

    def __init__(self, fd: int, path: Path):
        self.fd, self.path = fd, path

    @classmethod
    def open(cls, path: Path, owned: bool = False) -> Folder:
        """The folder the user named (links in `path` are theirs); `owned`: only this user's."""
        try:
            fd = os.open(path, DIR_FLAGS)
        except NotADirectoryError:
            raise Unsafe(path, "not a folder") from None
        folder = cls(fd, path)
        if owned:
            folder.check_owned()
        return folder

    def __enter__(self) -> Folder:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1

    def check_owned(self) -> None:
        info = os.fstat(self.fd)
        if info.st_uid != os.getuid():
            self.close()
            raise Unsafe(self.path, f"belongs to {user_name(info.st_uid)}, not to you: diagbench writes only its own")

    def folder(self, name: str, make: bool = False, owned: bool = False) -> Folder:
        """The folder `name` directly below (made if `make`), never through a link."""
        if make:
            with contextlib.suppress(FileExistsError):
                os.mkdir(name, 0o755, dir_fd=self.fd)
        try:
            fd = os.open(name, DIR_FLAGS | os.O_NOFOLLOW, dir_fd=self.fd)
        except OSError as exc:
            raise self._why(name, exc) from None
        below = Folder(fd, self.path / name)
        if owned:
            below.check_owned()
        return below

    def walk(self, parts: tuple[str, ...], make: bool = False) -> Folder:
        """The folder `parts` below, each step without a link (a new descriptor: close it)."""
        here = Folder(os.dup(self.fd), self.path)
        for part in parts:
            with here:
                here = here.folder(part, make)
        return here

    def _why(self, name: str, exc: OSError) -> OSError:
        if exc.errno in (errno.ELOOP, errno.ENOTDIR):
            info = self.lstat(name)
            kind = describe_kind(info.st_mode) if info is not None else "not a folder"
            return Unsafe(self.path / name, f"{kind}, not a folder: diagbench follows no link here")
        return exc

    def lstat(self, name: str) -> os.stat_result | None:
        try:
            return os.stat(name, dir_fd=self.fd, follow_symlinks=False)
        except OSError:
            return None

    def names(self) -> list[str]:
        """What the folder holds, sorted (an unreadable folder holds nothing)."""
        try:
            return sorted(os.listdir(self.fd))
        except OSError:
            return []

    def read(self, name: str, limit: int) -> bytes:
        """A regular file directly below, not a link, of at most `limit` bytes."""
        return read_fd(self.open_file(name), self.path / name, limit)

    def open_file(self, name: str) -> int:
        """A read-only descriptor of a regular file directly below, not a link (never waits on a FIFO)."""
        try:
            return open_fd(name, follow=False, dir_fd=self.fd)
        except Unsafe as exc:
            raise Unsafe(self.path / name, exc.strerror or "") from None

    def write(self, name: str, data: bytes, mode: int = 0o644) -> None:
        """`name` replaced whole (a reader sees the old file or the new one): written to a new
        file of its own (O_EXCL), then renamed within this folder, so no link is written through."""
        tmp = f".{name}.{os.getpid()}.{os.urandom(4).hex()}.tmp"  # not `secrets`: it loads OpenSSL at start-up
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, mode, dir_fd=self.fd)
        try:
            with io.FileIO(fd, "wb", closefd=True) as handle:
                view = memoryview(data)
                while view:
                    view = view[handle.write(view) or 0 :]
                os.fsync(fd)
            os.replace(tmp, name, src_dir_fd=self.fd, dst_dir_fd=self.fd)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp, dir_fd=self.fd)
            raise

    def lock_file(self, name: str, mode: int = 0o644) -> int:
        """A lock file directly below, made if missing, opened read-write: a regular file of this
        user with one link, never a link (so truncating it or writing a pid in it touches
        nothing else)."""
        try:
            fd = os.open(name, FILE_FLAGS | os.O_RDWR | os.O_CREAT, mode, dir_fd=self.fd)
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                raise Unsafe(self.path / name, "a symbolic link, not a lock file: remove it") from None
            raise
        problem = lock_problem(os.fstat(fd), ours=True)
        if problem:
            os.close(fd)
            raise Unsafe(self.path / name, problem)
        return fd

    def remove_tree(self, name: str) -> None:
        """`name` below and all it holds, never following a link (a link is removed itself).
        Iterative, holding one descriptor per level down to MAX_DEPTH: what lies deeper (a
        server may nest its cache folders thousands deep) is left, and so are its parents."""
        stack: list[tuple[Folder, list[str]]] = []
        try:
            self._remove_below(name, stack)
        finally:
            for folder, _names in stack:
                folder.close()

    def _remove_below(self, name: str, stack: list[tuple[Folder, list[str]]]) -> None:
        info = self.lstat(name)
        if info is None or not stat.S_ISDIR(info.st_mode):
            if info is not None:
                os.unlink(name, dir_fd=self.fd)
            return
        top = self.folder(name)
        stack.append((top, top.names()))
        while stack:
            folder, names = stack[-1]
            if not names:
                stack.pop()
                folder.close()
                parent = stack[-1][0] if stack else self
                with contextlib.suppress(OSError):  # not empty: something deeper was left
                    os.rmdir(folder.path.name, dir_fd=parent.fd)
                continue
            entry = names.pop()
            kind = folder.lstat(entry)
            if kind is not None and stat.S_ISDIR(kind.st_mode):
                if len(stack) < MAX_DEPTH:
                    inner = folder.folder(entry)
                    stack.append((inner, inner.names()))
            elif kind is not None:
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(entry, dir_fd=folder.fd)

    def unlink(self, name: str) -> None:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(name, dir_fd=self.fd)


def lock_problem(info: os.stat_result, ours: bool, what: str = "a lock file") -> str:
    """Why a file is unfit to be written in place (a lock file, a log appended to); "" if fit."""
    if not stat.S_ISREG(info.st_mode):
        return f"{describe_kind(info.st_mode)}, not {what}: remove it"
    if ours and info.st_uid != os.getuid():
        return f"belongs to {user_name(info.st_uid)}, not to you: remove it"
    if info.st_nlink != 1:
        return f"has {info.st_nlink} hard links ({what} has one): remove it"
    return ""


def remove_folder(path: Path) -> bool:
    """Remove a folder of this user and all it holds, never through a link; True if it is gone."""
    with contextlib.suppress(OSError), Folder.open(path.parent) as parent:
        with parent.folder(path.name, owned=True):
            pass  # this user's real folder, not a link: what is below it is removed without links
        parent.remove_tree(path.name)
    return not os.path.lexists(path)


def write_file(path: Path, data: bytes, append: bool = False, follow: bool = False) -> None:
    """A file written where a path names it (report.html, a copy of a script, a fake log).
    Unless `follow`: never through a link, nothing truncated: replaced whole (a new file
    renamed into place in the folder above), or appended to only if a regular file of this
    user with one link. `follow`, a path the user named (`--junit /dev/stderr` too): opened
    as named, emptied first only if it is a regular file (a FIFO never waited on to open)."""
    if not follow and not append:
        with Folder.open(path.parent) as folder:
            folder.write(path.name, data)
        return
    flags = os.O_WRONLY | os.O_CREAT | os.O_CLOEXEC | (os.O_APPEND if append else 0)
    try:
        fd = os.open(path, flags | (0 if follow else os.O_NOFOLLOW | os.O_NONBLOCK), 0o644)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise Unsafe(path, "a symbolic link: diagbench writes through no link here") from None
        raise
    with io.FileIO(fd, "wb", closefd=True) as handle:
        info = os.fstat(fd)
        problem = "" if follow else lock_problem(info, ours=True, what="a file diagbench appends to")
        if problem:
            raise Unsafe(path, problem)
        os.set_blocking(fd, True)
        if not append and stat.S_ISREG(info.st_mode):
            os.ftruncate(fd, 0)  # after the check: nothing but a regular file is emptied
        view = memoryview(data)
        while view:
            view = view[handle.write(view) or 0 :]
