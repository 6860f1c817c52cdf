"""`debug.json`: the failure, the debug settings launched for it (each with its source), what
the first launch and the debug launch said, and the sharper line. Typed, versioned, read back
with suspicion."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path

from diagbench.debug.sharper import Sharper
from diagbench.jsonvalue import JSON, JSONObject
from diagbench.records.parts import RootCause
from diagbench.records.typed import Plain, build_versioned, read_document
from diagbench.vocab import ExitCode, Outcome, outcome_label

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
class Setting(Plain):
    """One change of the debug launch: `+ CUDA_LAUNCH_BLOCKING=1`, with its set, why and source."""

    change: str
    source: str
    set: str
    why: str = ""


@dataclass(frozen=True)
class Seen(Plain):
    """What one launch ended with, and the line that decided it."""

    outcome: Outcome
    failure_class: str | None
    line: str | None  # the deciding line (or what decided when no line did)
    line_no: int | None = None
    cause: RootCause | None = None  # the root cause the log reader followed
    attempt: str | None = None
    signature: str | None = None

    @property
    def label(self) -> str:
        return outcome_label(self.outcome, self.failure_class)


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
    sharper: Sharper | None = None
    notes: tuple[str, ...] = field(default=())

    def to_json(self) -> dict[str, JSON]:
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
            "sharper": self.sharper.to_json() if self.sharper else None,
            "notes": list(self.notes),
        }

    @classmethod
    def from_json(cls, data: JSONObject) -> Debug:
        with_class = {**data, "failure_class": data.get("class")}  # `class` in the file
        return build_versioned(cls, with_class, FILENAME, "debug_version", DEBUG_VERSION)


def read_debug(run_dir: Path) -> Debug | None:
    """The run's debug.json, or None when the run made no debug launch."""
    data = read_document(run_dir / FILENAME, _MAX_BYTES)
    return None if data is None else Debug.from_json(data)
