"""The record of one attempt (`result.json`), as typed data: written by `store`, read by everyone.

Reading is suspicious: a record written by a newer diagbench is refused with that reason,
and a missing or mistyped field names itself instead of surfacing later as a traceback.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Protocol

from diagbench.errors import RecordError
from diagbench.logs.decision import PhaseChange
from diagbench.records.parts import GpuSettle, Hang, NodeExit, Placement, Price, RootCause
from diagbench.records.typed import OMIT_NONE, Plain, build
from diagbench.vocab import Evidence, Outcome, outcome_label

__all__ = ["SCHEMA_VERSION", "AttemptRecord", "Killed", "PhaseChange", "Planned", "not_launched"]

SCHEMA_VERSION = 1


@dataclass(frozen=True)
class Killed:
    """One process teardown signalled, and with what."""

    pid: int
    name: str
    signal: str  # SIGTERM | SIGKILL


@dataclass(frozen=True)
class AttemptRecord(Plain):
    """One launch of one cell (the README's `result.json` table)."""

    cell_id: str
    repeat: int
    attempt: str  # the folder under cells/
    params: dict[str, str]
    command: list[str]
    env_changes: dict[str, str | None]
    outcome: Outcome
    reason: str = ""
    failure_class: str | None = None
    secondary_classes: list[str] = field(default_factory=list)
    signature: str | None = None
    evidence: Evidence | None = None
    exit_code: int | None = None
    signal: int | None = None
    phase: str | None = None
    time_to_outcome_s: float | None = None
    duration_s: float | None = None
    started_at: str | None = None
    ended_at: str | None = None
    log_bytes: int = 0  # what the server wrote
    log_lines: int = 0
    log_truncated: bool = False  # server.max_log was passed: server.log has the head and the last part
    log_kept_bytes: int = 0  # bytes in server.log (marker lines included)
    log_dropped_bytes: int = 0
    killed: list[Killed] = field(default_factory=list)
    left_behind: list[int] = field(default_factory=list)  # pids that survived SIGKILL (should be empty)
    teardown_s: float | None = None
    sigterm_at: float | None = None  # epoch seconds teardown began (for latency figures)
    gpu: GpuSettle | None = None  # memory hygiene around it
    gpus: list[str] = field(default_factory=list)  # the GPU ids it was given (its CUDA_VISIBLE_DEVICES)
    phases: list[PhaseChange] = field(default_factory=list)  # every phase change, in order (the timeline)
    executor: Placement | None = None  # where it ran
    cause: RootCause | None = None  # the root cause the log reader followed
    first_failed_rank: int | None = None  # a launch of many ranks: the rank that failed first (logs/firstrank.py)
    stalled: bool = False  # ended early by server.stall: no log line and no work for that long
    stalled_after_s: float | None = None  # the quiet seconds when the stall was decided
    hang: Hang | None = None  # where the tree waited; None unless stacks were taken
    price: Price | None = field(default=None, metadata=OMIT_NONE)  # a pricing load's figures (triage --price)
    nodes: tuple[NodeExit, ...] | None = field(default=None, metadata=OMIT_NONE)  # an attempt spanning nodes
    schema_version: int = SCHEMA_VERSION

    def __post_init__(self) -> None:
        # records made in code may name the outcome and evidence in their JSON words
        if not isinstance(self.outcome, Outcome):
            object.__setattr__(self, "outcome", Outcome(self.outcome))
        if isinstance(self.evidence, Mapping):
            object.__setattr__(self, "evidence", Evidence(**self.evidence))
        if any(isinstance(p, Mapping) for p in self.phases):
            object.__setattr__(self, "phases", [PhaseChange(**p) if isinstance(p, Mapping) else p for p in self.phases])

    @property
    def label(self) -> str:
        """`failed:oom`, or the outcome alone."""
        return outcome_label(self.outcome, self.failure_class)

    @classmethod
    def from_json(cls, data: Mapping[str, object]) -> AttemptRecord:
        """Read a record: fields of newer minor additions are ignored, a newer schema is refused,
        a mistyped field is named (records/typed.py)."""
        version = data.get("schema_version", SCHEMA_VERSION)
        if not isinstance(version, int) or version > SCHEMA_VERSION:
            raise RecordError(
                f"schema_version {version!r}: written by a newer diagbench (this one reads {SCHEMA_VERSION})"
            )
        for name, kind in _REQUIRED.items():
            if not isinstance(data.get(name), kind):
                raise RecordError(f"field '{name}': expected {_KIND_WORDS[kind]}, got {data.get(name)!r}")
        if data["outcome"] not in {o.value for o in Outcome}:
            raise RecordError(f"field 'outcome': unknown outcome {data['outcome']!r}")
        try:
            return build(cls, data)
        except TypeError as exc:
            raise RecordError(f"malformed record: {exc}") from None


class Planned(Protocol):
    """An attempt as planned (a manifest entry, a plan's attempt, a job file): what its record names."""

    @property
    def attempt(self) -> str: ...

    @property
    def cell_id(self) -> str: ...

    @property
    def repeat(self) -> int: ...

    @property
    def params(self) -> Mapping[str, str] | None: ...


def not_launched(
    planned: Planned,
    outcome: Outcome,
    reason: str,
    *,
    ended_at: str | None = None,
    log_bytes: int = 0,
    killed: Sequence[Killed] = (),
    left_behind: Sequence[int] = (),
    teardown_s: float | None = None,
    sigterm_at: float | None = None,
) -> AttemptRecord:
    """The one record of an attempt that launched no server of its own: skipped, cancelled
    before it started, refused by a queue, a diagbench bug, or lost with its diagbench (then
    what a sweep stopped of it). It ran no command and changed no env."""
    return AttemptRecord(
        cell_id=planned.cell_id,
        repeat=planned.repeat,
        attempt=planned.attempt,
        params=dict(planned.params or {}),
        command=[],
        env_changes={},
        outcome=outcome,
        reason=reason,
        ended_at=ended_at or datetime.now(timezone.utc).isoformat(timespec="milliseconds"),
        log_bytes=log_bytes,
        killed=list(killed),
        left_behind=list(left_behind),
        teardown_s=teardown_s,
        sigterm_at=sigterm_at,
    )


_REQUIRED: dict[str, type] = {"cell_id": str, "repeat": int, "attempt": str, "params": dict, "outcome": str}
_KIND_WORDS = {str: "a string", int: "an integer", dict: "a mapping"}
