"""Files read back from a run directory: regular files only, never through a link.

A run directory can be handed over (a CI artifact, a colleague's tarball, a shared folder),
so what is in it is not trusted: `result.json` may be a symbolic link to /etc/shadow,
`server.log` a link whose target would end up in report.html, or a FIFO that blocks the
reader for ever. diagbench writes none of these, so it reads none of them.
"""

from __future__ import annotations

import errno
import io
import os
import stat
from pathlib import Path


def open_regular(path: Path) -> io.BufferedReader:
    """`path` opened for reading, only if it is a regular file and not a symbolic link
    (OSError otherwise; a FIFO is never waited on). The folders above it may be links:
    `runs/latest` is one diagbench makes."""
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError(errno.EINVAL, "not a regular file", str(path))
        os.set_blocking(fd, True)
        return io.BufferedReader(io.FileIO(fd, "rb"))
    except BaseException:
        os.close(fd)
        raise


def read_regular(path: Path, limit: int) -> bytes:
    """The whole of a regular file of at most `limit` bytes (OSError or ValueError otherwise)."""
    with open_regular(path) as handle:
        size = os.fstat(handle.fileno()).st_size
        if size > limit:
            raise ValueError(f"{size} bytes: too large")
        return handle.read(limit + 1)
