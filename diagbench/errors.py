"""The errors diagbench raises, kept apart by whose fault they are.

    DiagbenchError           anything diagbench raises on purpose
    └── UserError            the user's input is unusable: exit 2, one message, no traceback
        ├── SpecError        a spec file: "file:line: field.path: expected ..., got ..."
        ├── RunDirError      a run directory that cannot be used or read back
        │   ├── RecordError  one record (result.json, manifest.json) unreadable: named, never hiding the rest
        │   └── WriteError   a record or log that cannot be written (disk full, read-only): the run stops
        └── LaunchError      a server that could not be started (recorded as the outcome `launch_error`)

Any other exception is diagbench's own failure: exit 3, with its traceback (a bug report).

A server under test that fails is never an exception: it is an `Outcome` in a record.
Foreign errors (yaml, psutil, httpx, OSError) are translated where they are caught.
"""

from __future__ import annotations

from pathlib import Path


class DiagbenchError(Exception):
    """Base of every error diagbench raises on purpose."""


class UserError(DiagbenchError):
    """The input (spec, command line, run directory) cannot be used as given."""


class SpecError(UserError):
    """A spec mistake, located at a file, a line and a field path."""

    def __init__(self, file: str, line: int | None, path: str, message: str, fix: str = ""):
        self.file, self.line, self.path, self.message, self.fix = file, line, path, message, fix
        where = f"{file}:{line}" if line else file
        field = f" {path}:" if path else ""
        text = f"{where}:{field} {message}"
        super().__init__(f"{text} ({fix})" if fix else text)


class RunDirError(UserError):
    """A run directory that does not exist or holds no readable records."""


class RecordError(RunDirError):
    """A record that cannot be read: malformed, mistyped, or written by a newer diagbench."""


class WriteError(RunDirError):
    """A file of the run directory could not be written: the run stops launching and exits 2."""

    def __init__(self, path: Path, exc: OSError):
        self.path, self.strerror = path, exc.strerror or str(exc)
        super().__init__(f"cannot write {path}: {self.strerror}")


class LaunchError(UserError):
    """A server that could not be started at all: missing program, bad cwd, port taken.

    Raised inside one attempt and recorded there as the outcome `launch_error`; it only
    reaches the user as a message when no attempt could start."""
