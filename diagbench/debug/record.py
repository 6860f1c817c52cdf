"""`debug.json`: the failure, the debug settings launched for it (each with its source), what
the first launch and the debug launch said, and the sharper line. Typed, versioned, read back
with suspicion."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path
from typing import Any

from diagbench.errors import RecordError
from diagbench.records.files import read_regular
from diagbench.records.parts import RootCause
from diagbench.records.typed import build
from diagbench.vocab import ExitCode

__all__ = ["DEBUG_VERSION", "FILENAME", "Debug", "Seen", "Setting", "Status", "read_debug"]

FILENAME = "debug.json"
DEBUG_VERSION = 1
_MAX_BYTES = 16 << 20


class Status(str, Enum):
    SHARPER = "sharper"  # the debug launch failed, and said more
    SAME = "same"  # the debug launch failed, and said nothing more (does the server read the settings?)
    UNDECIDED = "undecided"  # the debug launch decided no failure line (it came up, hung, did not start)
    COMES_UP = "comes_up"  # the command came up: nothing to debug
    NO_SETTINGS = "no_settings"  # no debug setting is known for this failure (or each is set already)
    INTERRUPTED = "interrupted"
    WRITE_FAILED = "write_failed"

    @property
    def exit_code(self) -> int:
        if self is Status.INTERRUPTED:
            return int(ExitCode.INTERRUPTED)
        if self is Status.WRITE_FAILED:
            return int(ExitCode.USAGE)
        return int(ExitCode.OK) if self in (Status.SHARPER, Status.SAME) else int(ExitCode.EXPECT_VIOLATED)


@dataclass(frozen=True)
class Setting:
    """One change of the debug launch: `+ CUDA_LAUNCH_BLOCKING=1`, with its set, why and source."""

    change: str
    source: str
    set: str
    why: str = ""

    def to_json(self) -> dict[str, Any]:
        return {"change": self.change, "source": self.source, "set": self.set, "why": self.why}


@dataclass(frozen=True)
class Seen:
    """What one launch ended with, and the line that decided it."""

    outcome: str
    failure_class: str | None
    line: str | None  # the deciding line (or what decided when no line did)
    line_no: int | None = None
    cause: RootCause | None = None  # the root cause the log reader followed
    attempt: str | None = None
    signature: str | None = None

    @property
    def label(self) -> str:
        return self.outcome + (f":{self.failure_class}" if self.failure_class else "")

    def to_json(self) -> dict[str, Any]:
        return {
            "outcome": self.outcome,
            "failure_class": self.failure_class,
            "line": self.line,
            "line_no": self.line_no,
            "cause": self.cause.to_json() if self.cause else None,
            "attempt": self.attempt,
            "signature": self.signature,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Seen:
        cause = data.get("cause")
        return cls(
            outcome=str(data["outcome"]),
            failure_class=data.get("failure_class"),
            line=data.get("line"),
            line_no=data.get("line_no"),
            cause=build(RootCause, cause, "cause.") if isinstance(cause, dict) else None,
            attempt=data.get("attempt"),
            signature=data.get("signature"),
        )


@dataclass(frozen=True)
class Debug:
    status: Status
    reason: str
    command: str  # as given, secrets blanked
    debug_command: str | None  # the debug launch's (null: none was made)
    server: str | None
    failure_class: str | None  # the class (or outcome) whose settings were chosen (the contract's `class`)
    settings: tuple[Setting, ...] = ()
    before: Seen | None = None
    after: Seen | None = None
    sharper: Mapping[str, Any] | None = None  # {line_no, text, kind, set, why}
    notes: tuple[str, ...] = field(default=())

    def to_json(self) -> dict[str, Any]:
        return {
            "debug_version": DEBUG_VERSION,
            "status": self.status.value,
            "reason": self.reason,
            "command": self.command,
            "debug_command": self.debug_command,
            "server": self.server,
            "class": self.failure_class,
            "settings": [s.to_json() for s in self.settings],
            "before": self.before.to_json() if self.before else None,
            "after": self.after.to_json() if self.after else None,
            "sharper": dict(self.sharper) if self.sharper else None,
            "notes": list(self.notes),
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Debug:
        version = data.get("debug_version")
        if not isinstance(version, int) or version > DEBUG_VERSION:
            raise RecordError(f"debug.json: debug_version {version!r}: written by a newer diagbench")
        try:
            before, after, sharper = data.get("before"), data.get("after"), data.get("sharper")
            return cls(
                status=Status(data["status"]),
                reason=str(data.get("reason", "")),
                command=str(data["command"]),
                debug_command=data.get("debug_command"),
                server=data.get("server"),
                failure_class=data.get("class"),
                settings=tuple(
                    Setting(str(s["change"]), str(s["source"]), str(s.get("set", "")), str(s.get("why", "")))
                    for s in data.get("settings", [])
                ),
                before=Seen.from_json(before) if before else None,
                after=Seen.from_json(after) if after else None,
                sharper=sharper if isinstance(sharper, dict) else None,
                notes=tuple(str(n) for n in data.get("notes", [])),
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise RecordError(f"debug.json: malformed: {exc!r}") from None


def read_debug(run_dir: Path) -> Debug | None:
    """The run's debug.json, or None when the run made no debug launch."""
    path = run_dir / FILENAME
    if not path.exists() and not path.is_symlink():
        return None
    try:
        data = json.loads(read_regular(path, _MAX_BYTES).decode("utf-8"))  # never through a link, nor a FIFO
    except (OSError, ValueError) as exc:
        raise RecordError(f"{path}: unreadable: {exc}") from None
    if not isinstance(data, dict):
        raise RecordError(f"{path}: expected a JSON object")
    return Debug.from_json(data)
