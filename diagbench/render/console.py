"""The two consoles every command writes to: results on stdout, messages on stderr.

Both write through a `SafeStream`, the terminal's sink: what it writes is blanked there
(`records.sink.document`: every secret this process knows, and the shapes), whichever
renderer made it. A terminal that goes away (`| head -1` closing the pipe,
an SSH connection dropping a pty) ends what diagbench shows, never what it does. The run
goes on to write its records, verdicts and report.html, and exits with its own code.
"""

from __future__ import annotations

import contextlib
import errno
import os
import sys
import threading
from typing import TYPE_CHECKING, Any, TextIO, TypeVar, cast

if TYPE_CHECKING:
    from rich.console import Console

__all__ = [
    "SafeStream",
    "cut_output",
    "drain",
    "lazy_console",
    "mark_cut",
    "quiet_console",
    "stderr_console",
    "stdout_console",
    "write_document",
]

# what writing to a stream that is gone raises: OSError (EPIPE, EIO), ValueError (closed),
# AttributeError (None: Python started with that descriptor closed, `diagbench run >&-`)
_GONE = (OSError, ValueError, AttributeError)
_CUT: dict[str, OSError] = {}  # stream name -> the write error that was no closed reader (a full disk)


def cut_output(name: str = "stdout") -> OSError | None:
    """The error that cut what was written to `name`, where it was not a reader that went
    away (EPIPE: `| head`, EIO: a lost terminal) but a file that could not take it all."""
    return _CUT.get(name)


def mark_cut(name: str, exc: BaseException) -> None:
    """Note a failed write: a closed pipe or a lost terminal (EPIPE, EIO) is no failure of the
    output, a file that cannot take it (a full disk, a quota, a size limit) is."""
    if isinstance(exc, OSError) and exc.errno in (errno.ENOSPC, errno.EDQUOT, errno.EFBIG):
        _CUT.setdefault(name, exc)


class SafeStream:
    """sys.stdout or sys.stderr (whichever it is at each write, so redirection still works)
    that never raises: after the first failed write (EPIPE, EIO, a closed file) it drops
    everything, and points its file descriptor at /dev/null so that Python's own flush at
    exit cannot fail either (that would exit 120, and rich would exit 1 from a thread)."""

    def __init__(self, name: str):
        self.name = name  # "stdout" or "stderr"
        self.lost = False
        self._lock = threading.Lock()

    def _target(self) -> TextIO:
        stream: TextIO = getattr(sys, self.name)
        real: TextIO = getattr(stream, "rich_proxied_file", stream)  # under rich's Live, the real stream
        return real

    def write(self, text: str) -> int:
        from diagbench.records import sink  # here: a command that prints nothing never loads it

        if not self.lost:
            try:
                self._target().write(sink.document(text))
            except _GONE as exc:
                mark_cut(self.name, exc)
                self._lost()
        return len(text)

    def flush(self) -> None:
        if not self.lost:
            try:
                self._target().flush()
            except _GONE as exc:
                mark_cut(self.name, exc)
                self._lost()

    def isatty(self) -> bool:
        try:
            return self._target().isatty()
        except _GONE:
            return False

    def fileno(self) -> int:
        return self._target().fileno()

    @property
    def encoding(self) -> str:
        return getattr(self._target(), "encoding", None) or "utf-8"

    def _lost(self) -> None:
        with self._lock:
            if self.lost:
                return
            self.lost = True
            drain(self._target())


def write_document(text: str) -> None:
    """A document on standard output, blanked (`records.sink`): a reader that went away
    (`| head`) ends it quietly; a file that cannot take it whole (a full disk) is marked, and
    `main` exits 2 saying so."""
    from diagbench.records import sink

    try:
        sys.stdout.write(sink.document(text))
        sys.stdout.flush()
    except (OSError, ValueError) as exc:
        mark_cut("stdout", exc)
        drain(sys.stdout)


def drain(target: TextIO) -> None:
    """Point the stream's descriptor at /dev/null: what is still buffered drains into nothing."""
    with contextlib.suppress(*_GONE):
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, target.fileno())
        os.close(devnull)


def stdout_console() -> Console:
    """Results. Off a terminal (a CI log) tables are wide so lines stay unbroken."""
    from rich.console import Console

    console = Console(file=SafeStream("stdout"), highlight=False, emoji=False)  # type: ignore[arg-type]  # a text stream
    if not console.is_terminal and not os.environ.get("COLUMNS"):  # unset or empty
        return Console(file=SafeStream("stdout"), highlight=False, emoji=False, width=160)  # type: ignore[arg-type]
    return console


def stderr_console() -> Console:
    """Messages: one message, one line."""
    from rich.console import Console

    return Console(file=SafeStream("stderr"), highlight=False, emoji=False, soft_wrap=True)  # type: ignore[arg-type]


class _Lazy:
    """A console made on first use: rich costs start-up time that `classify --json` and
    `--help` never need."""

    def __init__(self, stream: str):
        self._stream = stream
        self._console: Console | None = None

    def __getattr__(self, name: str) -> Any:
        return getattr(self._made(), name)

    # `with console:` (rich's Live, each refresh) looks these up on the type, never through __getattr__
    def __enter__(self) -> Console:
        return self._made().__enter__()

    def __exit__(self, *exc: Any) -> None:
        self._made().__exit__(*exc)

    def _made(self) -> Console:
        if self._console is None:
            self._console = stdout_console() if self._stream == "stdout" else stderr_console()
        return self._console


def lazy_console(stream: str) -> Console:
    """`stdout_console()` or `stderr_console()`, made when first used."""
    return _Lazy(stream)  # type: ignore[return-value]  # a Console in all but its making


C = TypeVar("C")


def quiet_console(console: C, quiet: bool) -> C:
    """`console`, or where `quiet` (--quiet) one that prints nothing, in its place."""
    from rich.console import Console

    return cast("C", Console(quiet=True)) if quiet else console
