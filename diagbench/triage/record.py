"""`triage.json`: the failure triaged, each remedy launched with its outcome and price, and
the recommendation (the cheapest that works). Typed, versioned, read back with suspicion."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path
from typing import Any

from diagbench.errors import RecordError
from diagbench.vocab import ExitCode

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
class Target:
    """What the command did: outcome, class, the signature and line that decided, the cause."""

    outcome: str
    failure_class: str | None
    signature: str | None = None
    evidence: Mapping[str, Any] | None = None  # {line_no, text}
    cause: Mapping[str, Any] | None = None  # result.json's `cause`, where the log reader followed one
    attempts: tuple[str, ...] = ()
    flaky: str | None = None  # `2 of 3 launches failed:oom`

    def to_json(self) -> dict[str, Any]:
        return {
            "outcome": self.outcome,
            "failure_class": self.failure_class,
            "cause": dict(self.cause) if self.cause else None,
            "signature": self.signature,
            "evidence": dict(self.evidence) if self.evidence else None,
            "attempts": list(self.attempts),
            "flaky": self.flaky,
        }


@dataclass(frozen=True)
class Tried:
    """One remedy (or a combination of two) as launched."""

    id: str
    change: tuple[str, ...]  # the minimal diff against the command
    source: str
    gives_up: str
    cost: int
    command: str
    outcome: str | None = None  # of its launches, the commonest (None: not launched)
    failure_class: str | None = None
    works: bool = False  # every launch came up
    startup_s: float | None = None  # launch -> ready, median of the launches that came up
    price: Mapping[str, Any] | None = None  # the pricing load's figures (--price)
    attempts: tuple[str, ...] = ()
    outcomes: tuple[str, ...] = ()
    skipped: str | None = None  # why it was not launched

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "change": list(self.change),
            "source": self.source,
            "gives_up": self.gives_up,
            "cost": self.cost,
            "command": self.command,
            "outcome": self.outcome,
            "failure_class": self.failure_class,
            "works": self.works,
            "startup_s": self.startup_s,
            "price": dict(self.price) if self.price else None,
            "attempts": list(self.attempts),
            "outcomes": list(self.outcomes),
            "skipped": self.skipped,
        }


@dataclass(frozen=True)
class Recommendation:
    remedy: str
    command: str
    changes: tuple[str, ...]
    why: str

    def to_json(self) -> dict[str, Any]:
        return {"remedy": self.remedy, "command": self.command, "changes": list(self.changes), "why": self.why}


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

    def to_json(self) -> dict[str, Any]:
        return {
            "triage_version": TRIAGE_VERSION,
            "status": self.status.value,
            "reason": self.reason,
            "command": self.command,
            "server": self.server,
            "target": self.target.to_json() if self.target else None,
            "remedies": [r.to_json() for r in self.remedies],
            "recommendation": self.recommendation.to_json() if self.recommendation else None,
            "notes": list(self.notes),
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Triage:
        version = data.get("triage_version")
        if not isinstance(version, int) or version > TRIAGE_VERSION:
            raise RecordError(f"triage.json: triage_version {version!r}: written by a newer diagbench")
        try:
            target = data.get("target")
            rec = data.get("recommendation")
            return cls(
                status=Status(data["status"]),
                reason=str(data.get("reason", "")),
                command=str(data["command"]),
                server=data.get("server"),
                target=_target(target) if target else None,
                remedies=tuple(_tried(r) for r in data.get("remedies", [])),
                recommendation=Recommendation(rec["remedy"], rec["command"], tuple(rec["changes"]), rec["why"])
                if rec
                else None,
                notes=tuple(data.get("notes", [])),
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise RecordError(f"triage.json: malformed: {exc!r}") from None


def _target(data: Mapping[str, Any]) -> Target:
    return Target(
        data["outcome"],
        data.get("failure_class"),
        data.get("signature"),
        data.get("evidence"),
        data.get("cause"),
        tuple(data.get("attempts", [])),
        data.get("flaky"),
    )


def _tried(data: Mapping[str, Any]) -> Tried:
    return Tried(
        id=data["id"],
        change=tuple(data["change"]),
        source=data["source"],
        gives_up=data.get("gives_up", ""),
        cost=int(data.get("cost", 3)),
        command=data["command"],
        outcome=data.get("outcome"),
        failure_class=data.get("failure_class"),
        works=bool(data.get("works")),
        startup_s=data.get("startup_s"),
        price=data.get("price"),
        attempts=tuple(data.get("attempts", [])),
        outcomes=tuple(data.get("outcomes", [])),
        skipped=data.get("skipped"),
    )


def read_triage(run_dir: Path) -> Triage | None:
    """The run's triage.json, or None when the run is no triage."""
    path = run_dir / FILENAME
    if not path.is_file():
        return None
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise RecordError(f"{path}: unreadable: {exc}") from None
    if not isinstance(data, dict):
        raise RecordError(f"{path}: expected a JSON object")
    return Triage.from_json(data)
