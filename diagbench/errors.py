"""The errors diagbench raises, kept apart by whose fault they are.

    DiagbenchError           anything diagbench raises on purpose
    └── UserError            the user's input is unusable: exit 2, one message, no traceback
        ├── SpecError        a spec file: "file:line: field.path: expected ..., got ..."
        │   └── SpecErrors   several of them at once, in line order
        ├── RunDirError      a run directory that cannot be used or read back
        │   ├── RecordError  one record (result.json, manifest.json) unreadable: named, never hiding the rest
        │   └── WriteError   a record or log that cannot be written (disk full, read-only): the run stops
        └── LaunchError      a server that could not be started (recorded as the outcome `launch_error`)

Any other exception is diagbench's own failure: exit 3, with its traceback (a bug report).

A server under test that fails is never an exception: it is an `Outcome` in a record.
Foreign errors (yaml, psutil, httpx, OSError) are translated where they are caught.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

__all__ = [
    "DiagbenchError",
    "LaunchError",
    "RecordError",
    "RunDirError",
    "SpecError",
    "SpecErrors",
    "UserError",
    "WriteError",
]


class DiagbenchError(Exception):
    """Base of every error diagbench raises on purpose."""


class UserError(DiagbenchError):
    """The input (spec, command line, run directory) cannot be used as given."""

    def lines(self) -> list[str]:
        """The message, one line per mistake (several for a spec with several)."""
        return str(self).splitlines() or [type(self).__name__]


class SpecError(UserError):
    """A spec mistake, located at a file, a line and a field path."""

    def __init__(self, file: str, line: int | None, path: str, message: str, fix: str = ""):
        self.file, self.line, self.path, self.message, self.fix = file, line, path, message, fix
        where = f"{file}:{line}" if line else file
        field = f" {path}:" if path else ""
        text = f"{where}:{field} {message}"
        super().__init__(f"{text} ({fix})" if fix else text)


class SpecErrors(SpecError):
    """Several spec mistakes, in line order, like a compiler's list (the first 20 shown)."""

    def __init__(self, errors: Sequence[SpecError], shown: int = 20):
        first = errors[0]
        super().__init__(first.file, first.line, first.path, first.message, first.fix)
        self.errors = list(errors)
        lines = [str(e) for e in self.errors[:shown]]
        if len(self.errors) > shown:
            lines.append(f"{first.file}: {len(self.errors) - shown} more mistake(s) not shown (fix these first)")
        self.args = ("\n".join(lines),)

    def __str__(self) -> str:
        return str(self.args[0])


class RunDirError(UserError):
    """A run directory that does not exist or holds no readable records."""


class RecordError(RunDirError):
    """A record that cannot be read: malformed, mistyped, or written by a newer diagbench."""


class WriteError(RunDirError):
    """A file of the run directory could not be written: the run stops launching and exits 2."""

    def __init__(self, path: Path, exc: OSError, fix: str = ""):
        self.path, self.strerror = path, exc.strerror or str(exc)
        text = f"cannot write {path}: {self.strerror}"
        super().__init__(f"{text} ({fix})" if fix else text)


class LaunchError(UserError):
    """A server that could not be started at all: missing program, bad cwd, port taken.

    Raised inside one attempt and recorded there as the outcome `launch_error`; it only
    reaches the user as a message when no attempt could start."""
