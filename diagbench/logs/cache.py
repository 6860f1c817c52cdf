"""diagbench's on-disk cache: parsed signature packs and compiled hyperscan databases.

Both are pure functions of their inputs, so a stale entry is never read: packs are keyed
by each file's path, size and modification time (and diagbench's version), databases by
their patterns. An entry's file name is a checksum of that key and the file starts with the
key itself, checked on reading (zlib's checksums, not hashlib: loading OpenSSL alone
costs more start-up time than the whole cache saves). Everything here is best effort: a
read-only or missing cache only costs the work again. `XDG_CACHE_HOME` moves it; the
newest few entries of each kind are kept.

What is read here decides how logs are read (a pack's signatures, a compiled database), so
the folder goes through the files door as a private one (safefiles.py): this user's,
writable by nobody else, nor is any folder above it; an XDG_CACHE_HOME that another user
could write to is no cache at all. Entries are written to a new file and renamed in place.
"""

from __future__ import annotations

import contextlib
import json
import os
import zlib
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from diagbench import __version__
from diagbench.safefiles import Folder, private_folder

__all__ = ["KEEP", "cache_dir", "cached_packs", "entry", "read_entry", "store", "store_packs", "write_entry"]

KEEP = 16
MAX_ENTRY_BYTES = 256 << 20  # a compiled database of every pack is megabytes
_PACKS_FORMAT = 3  # bumped when Signature gains a field: an entry without it would read as its default


def cache_dir() -> Path:
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "diagbench"


def _folder(make: bool) -> Folder | None:
    try:
        return private_folder(cache_dir(), make=make)
    except OSError:  # missing, unwritable, or someone else's: the work is done again
        return None


def store(path: Path, data: bytes, keep: int = KEEP) -> None:
    """Write atomically, then drop all but the newest `keep` entries of the same kind."""
    folder = _folder(make=True)
    if folder is None:
        return
    with contextlib.suppress(OSError), folder:
        folder.write(path.name, data)
        kind = path.name.split("-", 1)[0]
        entries = [n for n in folder.names() if n.startswith(f"{kind}-") and n.endswith(path.suffix)]
        newest = sorted(entries, key=lambda n: _mtime(folder, n), reverse=True)
        for old in newest[keep:]:
            folder.unlink(old)


def _mtime(folder: Folder, name: str) -> int:
    info = folder.lstat(name)
    return info.st_mtime_ns if info is not None else 0


def entry(kind: str, key: bytes, suffix: str) -> Path:
    """The cache file for `key`, named by two checksums of it."""
    return cache_dir() / f"{kind}-{zlib.crc32(key):08x}{zlib.adler32(key):08x}{len(key):x}{suffix}"


def read_entry(path: Path, key: bytes) -> bytes | None:
    """The data stored under `key`, or None (missing, unreadable, or another key's)."""
    folder = _folder(make=False)
    if folder is None:
        return None
    try:
        with folder:
            data = folder.read(path.name, MAX_ENTRY_BYTES)
    except OSError:
        return None
    head = len(key).to_bytes(4, "big") + key
    return data[len(head) :] if data.startswith(head) else None


def write_entry(path: Path, key: bytes, data: bytes) -> None:
    store(path, len(key).to_bytes(4, "big") + key + data)


def _packs_key(paths: Sequence[Path]) -> bytes | None:
    stamps: list[Any] = [__version__, _PACKS_FORMAT]
    try:
        for path in paths:
            stat = path.stat()
            stamps.append((str(path.resolve()), stat.st_size, stat.st_mtime_ns))
    except OSError:
        return None  # the parser will say what is wrong with the file
    return repr(stamps).encode()


def cached_packs(paths: Sequence[Path]) -> list[dict[str, Any]] | None:
    """The signatures parsed from these pack files before, if nothing has changed since."""
    key = _packs_key(paths)
    data = read_entry(entry("packs", key, ".json"), key) if key is not None else None
    if data is None:
        return None
    try:
        parsed = json.loads(data)
    except ValueError:
        return None
    return parsed if isinstance(parsed, list) else None


def store_packs(paths: Sequence[Path], signatures: list[dict[str, Any]]) -> None:
    if (key := _packs_key(paths)) is not None:
        write_entry(entry("packs", key, ".json"), key, json.dumps(signatures).encode())
