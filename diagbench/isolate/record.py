"""`isolation.json`: what an isolation found, beside the attempts of its run directory.

Read with the same suspicion as result.json: a newer version is refused with that reason.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import Enum
from pathlib import Path
from typing import Any

from diagbench.errors import RecordError
from diagbench.isolate.factors import Factor, FactorKind
from diagbench.isolate.search import Result, Target
from diagbench.jsonvalue import JSON
from diagbench.records.typed import check_version, read_document
from diagbench.vocab import Evidence, ExitCode, Outcome, outcome_label

__all__ = ["FILENAME", "ISOLATION_VERSION", "NOT_ISOLABLE_EXIT", "Isolation", "Status", "Step", "read_isolation"]

ISOLATION_VERSION = 1
FILENAME = "isolation.json"
NOT_ISOLABLE_EXIT = 1


class Status(str, Enum):
    FOUND = "found"  # a 1-minimal culprit
    NOT_ISOLABLE = "not_isolable"  # unresolved or flaky probes hide it
    BAD_BASELINE = "bad_baseline"  # good did not come up, or bad did
    INTERRUPTED = "interrupted"
    WRITE_FAILED = "write_failed"  # a record or log could not be written (a full disk): stopped, exit 2

    def __str__(self) -> str:
        return self.value

    @property
    def exit_code(self) -> int:
        """0 culprit found, 1 not isolable, 2 a baseline that does not behave or a write that
        failed (a full disk), 130 interrupted."""
        return {
            Status.FOUND: ExitCode.OK,
            Status.NOT_ISOLABLE: NOT_ISOLABLE_EXIT,
            Status.BAD_BASELINE: ExitCode.USAGE,
            Status.INTERRUPTED: ExitCode.INTERRUPTED,
            Status.WRITE_FAILED: ExitCode.USAGE,
        }[self]


@dataclass(frozen=True)
class Step:
    """One configuration launched (repeat times): which factors it applied and what it did."""

    applied: tuple[str, ...]
    outcome: Outcome
    failure_class: str | None
    result: Result
    flaky: bool = False
    outcomes: tuple[str, ...] = ()  # each launch's outcome:class
    attempts: tuple[str, ...] = ()  # their folders under cells/
    evidence: Evidence | None = None  # the deciding line of the first launch that ended as `outcome`
    baseline: str | None = None  # "good" or "bad" for the two launches the isolation starts from
    reason: str = ""  # that launch's reason, what decided it when no log line did (HTTP ready, a timeout)

    @property
    def label(self) -> str:
        return outcome_label(self.outcome, self.failure_class)

    def to_json(self) -> dict[str, JSON]:
        return {
            "applied": list(self.applied),
            "outcome": self.outcome.value,
            "failure_class": self.failure_class,
            "result": self.result.value,
            "flaky": self.flaky,
            "outcomes": list(self.outcomes),
            "attempts": list(self.attempts),
            "evidence": self.evidence.to_json() if self.evidence else None,
            "baseline": self.baseline,
            "reason": self.reason,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Step:
        return cls(
            applied=tuple(data["applied"]),
            outcome=Outcome(data["outcome"]),
            failure_class=data.get("failure_class"),
            result=Result(data["result"]),
            flaky=bool(data.get("flaky", False)),
            outcomes=tuple(data.get("outcomes", ())),
            attempts=tuple(data.get("attempts", ())),
            evidence=Evidence(**data["evidence"]) if data.get("evidence") else None,
            baseline=data.get("baseline"),
            reason=str(data.get("reason") or ""),
        )


@dataclass(frozen=True)
class Isolation:
    """The whole answer (isolation.json), plus why, the suspects of an unfinished one, and the commands."""

    status: Status
    reason: str
    target: Target  # what the bad launch did
    factors: tuple[Factor, ...]
    culprit: tuple[str, ...]
    launches: int
    steps: tuple[Step, ...]
    repeat: int = 1
    suspects: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()
    commands: Mapping[str, str] | None = None  # good, bad: as one pasteable line each
    together: tuple[str, ...] = ()  # culprit packages that only install together, in words
    bisected: bool = False  # `--between`: one package's versions, in order
    first_bad: str | None = None
    last_good: str | None = None

    def factor(self, name: str) -> Factor:
        return next(f for f in self.factors if f.name == name)

    def to_json(self) -> dict[str, JSON]:
        return {
            "isolation_version": ISOLATION_VERSION,
            "status": self.status.value,
            "reason": self.reason,
            "target": {"outcome": self.target.outcome.value, "failure_class": self.target.failure_class},
            "factors": [f.to_json() for f in self.factors],
            "culprit": list(self.culprit),
            "launches": self.launches,
            "repeat": self.repeat,
            "steps": [s.to_json() for s in self.steps],
            "suspects": list(self.suspects),
            "notes": list(self.notes),
            "commands": dict(self.commands or {}),
            "together": list(self.together),
            **({"first_bad": self.first_bad, "last_good": self.last_good} if self.bisected else {}),
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Isolation:
        check_version(data, FILENAME, "isolation_version", ISOLATION_VERSION)
        try:
            target = data["target"]
            return cls(
                status=Status(data["status"]),
                reason=str(data.get("reason", "")),
                target=Target(Outcome(target["outcome"]), target.get("failure_class")),
                factors=tuple(_factor(f) for f in data["factors"]),
                culprit=tuple(data["culprit"]),
                launches=int(data["launches"]),
                steps=tuple(Step.from_json(s) for s in data["steps"]),
                repeat=int(data.get("repeat", 1)),
                suspects=tuple(data.get("suspects", ())),
                notes=tuple(data.get("notes", ())),
                commands=dict(data.get("commands") or {}),
                together=tuple(data.get("together") or ()),
                bisected="first_bad" in data,
                first_bad=data.get("first_bad"),
                last_good=data.get("last_good"),
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise RecordError(f"malformed isolation record: {type(exc).__name__}: {exc}") from None


def _factor(data: Mapping[str, Any]) -> Factor:
    unset = data.get("unset") or ()  # written since env -u was read; absent before
    return Factor(
        data["name"], FactorKind(data["kind"]), data.get("good"), data.get("bad"), "good" in unset, "bad" in unset
    )


def read_isolation(run_dir: Path) -> Isolation | None:
    """The isolation of a run directory, or None when it is a matrix run."""
    data = read_document(run_dir / FILENAME, 64 << 20)
    return None if data is None else Isolation.from_json(data)
