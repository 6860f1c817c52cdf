"""`triage.json`: the failure triaged, each remedy launched with its outcome and price, and
the recommendation (the cheapest that works). Typed, versioned, read back with suspicion."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path

from diagbench.jsonvalue import JSONObject
from diagbench.records.parts import Price, RootCause
from diagbench.records.typed import Plain, build_versioned, plain, read_document
from diagbench.vocab import Evidence, ExitCode, Outcome, outcome_label

__all__ = ["FILENAME", "TRIAGE_VERSION", "Recommendation", "Status", "Target", "Triage", "Tried", "read_triage"]

FILENAME = "triage.json"
TRIAGE_VERSION = 1


class Status(str, Enum):
    COMES_UP = "comes_up"  # the command itself came up: nothing to triage
    FOUND = "found"  # a remedy (or two) made it come up
    NONE_WORKED = "none_worked"  # remedies were tried; none came up
    NO_REMEDY = "no_remedy"  # no remedy is known for this server and failure
    INTERRUPTED = "interrupted"

    @property
    def exit_code(self) -> int:
        if self is Status.INTERRUPTED:
            return int(ExitCode.INTERRUPTED)
        return 0 if self in (Status.COMES_UP, Status.FOUND) else 1


@dataclass(frozen=True)
class Target(Plain):
    """What the command did: outcome, class, the signature and line that decided, the cause."""

    outcome: Outcome
    failure_class: str | None
    cause: RootCause | None = None  # the root cause the log reader followed, where it followed one
    signature: str | None = None
    evidence: Evidence | None = None
    attempts: tuple[str, ...] = ()
    flaky: str | None = None  # `2 of 3 launches failed:oom`

    @property
    def label(self) -> str:
        return outcome_label(self.outcome, self.failure_class)


@dataclass(frozen=True)
class Tried(Plain):
    """One remedy (or a combination of two) as launched."""

    id: str
    change: tuple[str, ...]  # the minimal diff against the command
    source: str
    gives_up: str
    cost: int
    command: str
    outcome: Outcome | None = None  # of its launches, the commonest (None: not launched)
    failure_class: str | None = None
    works: bool = False  # every launch came up
    startup_s: float | None = None  # launch -> ready, median of the launches that came up
    price: Price | None = None  # the pricing load's figures (--price)
    attempts: tuple[str, ...] = ()
    outcomes: tuple[str, ...] = ()
    skipped: str | None = None  # why it was not launched


@dataclass(frozen=True)
class Recommendation(Plain):
    remedy: str
    command: str
    changes: tuple[str, ...]
    why: str


@dataclass(frozen=True)
class Triage:
    status: Status
    reason: str
    command: str
    server: str | None
    target: Target | None
    remedies: tuple[Tried, ...] = ()
    recommendation: Recommendation | None = None
    notes: tuple[str, ...] = field(default=())

    def to_json(self) -> JSONObject:
        return {"triage_version": TRIAGE_VERSION, **plain(self)}

    @classmethod
    def from_json(cls, data: Mapping[str, object]) -> Triage:
        return build_versioned(cls, data, FILENAME, "triage_version", TRIAGE_VERSION)


def read_triage(run_dir: Path) -> Triage | None:
    """The run's triage.json, or None when the run is no triage."""
    data = read_document(run_dir / FILENAME)
    return None if data is None else Triage.from_json(data)
