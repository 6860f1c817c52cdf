"""Files in folders someone else may write (run directories, locks, leases, caches): the one
door they are opened through, and the one way an input file is read.

A folder is walked from a descriptor, each name below the one the user named (whose own
links, like `runs/latest`, are theirs) opened relative to its parent with `O_NOFOLLOW`: a
link planted below is never followed, a folder swapped after its check never reached. A
file is written to a new file (`O_EXCL`) renamed into place; a lock file must be a regular
file of this user with one link. What is read is a regular file (a FIFO never waited on, a
device never opened) of bounded size. `Folder.open(path, owned=True)`: only this user's;
`private_folder`: one diagbench runs programs from (the environment cache), this user's,
writable by nobody else, nor is any folder above it; launch/shared.py builds on these for
the /tmp lease folders. An unfit folder or file is `Unsafe` (an OSError saying why).
"""

from __future__ import annotations

import contextlib
import errno
import io
import os
import pwd
import secrets
import stat
from pathlib import Path

__all__ = [
    "Folder",
    "TooLarge",
    "Unsafe",
    "describe_kind",
    "lock_problem",
    "open_input",
    "open_regular",
    "private_folder",
    "read_head",
    "read_input",
    "read_regular",
    "remove_folder",
    "user_name",
]

MAX_DEPTH = 256  # folders deep that remove_tree goes (a descriptor each)
_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC
_FILE = os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC


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


# -- input files: regular, bounded ----------------------------------------------------------


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


def _open_file(path: Path | str, follow: bool, dir_fd: int | None = None) -> int:
    """A descriptor of a regular file, read-only; never blocks on a FIFO, never opens a device
    (Unsafe for anything else; `follow`: a link to a regular file will do)."""
    flags = _FILE | os.O_RDONLY
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


def _read_fd(fd: int, path: Path | str, limit: int) -> bytes:
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
    return _read_fd(_open_file(path, follow=True), path, limit)


def open_input(path: Path) -> io.BufferedReader:
    """An input file the user named that is read as a stream (a log to classify): a regular
    file (a link to one will do), of any size; Unsafe for anything else."""
    return io.BufferedReader(io.FileIO(_open_file(path, follow=True), "rb"))


def read_head(path: Path, size: int) -> bytes:
    """The first `size` bytes of a regular file the user named (a program, for its shebang)."""
    with io.FileIO(_open_file(path, follow=True), "rb") as handle:
        return handle.read(size)


def open_regular(path: Path) -> io.BufferedReader:
    """A file of a run directory opened for reading: a regular file, not a link (the folders
    above it may be links: `runs/latest` is one diagbench makes)."""
    return io.BufferedReader(io.FileIO(_open_file(path, follow=False), "rb"))


def read_regular(path: Path, limit: int) -> bytes:
    """The whole of a run directory's file (see `open_regular`) of at most `limit` bytes."""
    return _read_fd(_open_file(path, follow=False), path, limit)


# -- folders walked without links -----------------------------------------------------------


class Folder:
    """An open folder: names below it are reached through its descriptor, never through a link."""

    def __init__(self, fd: int, path: Path):
        self.fd, self.path = fd, path

    @classmethod
    def open(cls, path: Path, owned: bool = False) -> Folder:
        """The folder the user named (links in `path` are theirs); `owned`: only this user's."""
        try:
            fd = os.open(path, _DIR)
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
            fd = os.open(name, _DIR | os.O_NOFOLLOW, dir_fd=self.fd)
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
        return _read_fd(self.open_file(name), self.path / name, limit)

    def open_file(self, name: str) -> int:
        """A read-only descriptor of a regular file directly below, not a link (never waits on a FIFO)."""
        try:
            return _open_file(name, follow=False, dir_fd=self.fd)
        except Unsafe as exc:
            raise Unsafe(self.path / name, exc.strerror or "") from None

    def write(self, name: str, data: bytes, mode: int = 0o644) -> None:
        """`name` replaced whole (a reader sees the old file or the new one): written to a new
        file of its own (O_EXCL), then renamed within this folder, so no link is written through."""
        tmp = f".{name}.{os.getpid()}.{secrets.token_hex(4)}.tmp"
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
            fd = os.open(name, _FILE | os.O_RDWR | os.O_CREAT, mode, dir_fd=self.fd)
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


def lock_problem(info: os.stat_result, ours: bool) -> str:
    if not stat.S_ISREG(info.st_mode):
        return f"{describe_kind(info.st_mode)}, not a lock file: remove it"
    if ours and info.st_uid != os.getuid():
        return f"belongs to {user_name(info.st_uid)}, not to you: remove it"
    if info.st_nlink != 1:
        return f"has {info.st_nlink} hard links (a lock file has one): remove it"
    return ""


# -- a folder programs are run from ---------------------------------------------------------


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
    fd, here = os.open("/", _DIR), Path("/")
    try:
        for part in real.parts[1:]:
            _check_above(fd, here)
            try:
                inner = os.open(part, _DIR | os.O_NOFOLLOW, dir_fd=fd)
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


def user_name(uid: int) -> str:
    try:
        return f"{pwd.getpwuid(uid).pw_name} (uid {uid})"
    except KeyError:
        return f"uid {uid}"


def remove_folder(path: Path) -> bool:
    """Remove a folder of this user and all it holds, never through a link; True if it is gone."""
    with contextlib.suppress(OSError), Folder.open(path.parent) as parent:
        with parent.folder(path.name, owned=True):
            pass  # this user's real folder, not a link: what is below it is removed without links
        parent.remove_tree(path.name)
    return not os.path.lexists(path)
