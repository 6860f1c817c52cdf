"""The record of one attempt (result.json), as data: written by `store`, read by everyone."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields
from typing import Any

SCHEMA_VERSION = 1


@dataclass(frozen=True)
class AttemptRecord:
    """One launch of one cell (design.md 3.3 `result.json`)."""

    cell_id: str
    repeat: int
    attempt: str  # the folder under cells/
    params: dict[str, str]
    command: list[str]
    env_changes: dict[str, str | None]
    outcome: str
    reason: str = ""
    failure_class: str | None = None
    secondary_classes: list[str] = field(default_factory=list)
    signature: str | None = None
    evidence: dict[str, Any] | None = None  # {line_no, text}
    exit_code: int | None = None
    signal: int | None = None
    phase: str | None = None
    time_to_outcome_s: float | None = None
    duration_s: float | None = None
    started_at: str | None = None
    ended_at: str | None = None
    log_bytes: int = 0
    log_lines: int = 0
    killed: list[dict[str, Any]] = field(default_factory=list)  # [{pid, name, signal}]
    left_behind: list[int] = field(default_factory=list)  # pids that survived SIGKILL (should be empty)
    teardown_s: float | None = None
    sigterm_at: float | None = None  # epoch seconds teardown began (for latency figures)
    gpu: dict[str, Any] | None = None
    schema_version: int = SCHEMA_VERSION

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> AttemptRecord:
        """Read a record, tolerating fields from newer or older versions."""
        known = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in known})
