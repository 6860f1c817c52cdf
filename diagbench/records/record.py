"""The record of one attempt (`result.json`), as typed data: written by `store`, read by everyone.

Reading is suspicious: a record written by a newer diagbench is refused with that reason,
and a missing or mistyped field names itself instead of surfacing later as a traceback.
"""

from __future__ import annotations

import json
import types
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field, fields, is_dataclass
from datetime import datetime, timezone
from typing import Any, Protocol, Union, get_args, get_origin, get_type_hints

from diagbench.errors import RecordError
from diagbench.vocab import Evidence, Outcome, outcome_label

SCHEMA_VERSION = 1


@dataclass(frozen=True)
class Killed:
    """One process teardown signalled, and with what."""

    pid: int
    name: str
    signal: str  # SIGTERM | SIGKILL


@dataclass(frozen=True)
class PhaseChange:
    """A start-up phase the server entered (`load`, `capture bs=32`), seconds after launch."""

    name: str
    at_s: float


@dataclass(frozen=True)
class AttemptRecord:
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
    gpu: dict[str, Any] | None = None  # memory hygiene: {baseline_mib, before_mib, settle_wait_s, after_mib}
    gpus: list[str] = field(default_factory=list)  # the GPU ids it was given (its CUDA_VISIBLE_DEVICES)
    phases: list[PhaseChange] = field(default_factory=list)  # every phase change, in order (the timeline)
    executor: dict[str, Any] | None = None  # where it ran: {kind, job_id, node}; a cluster job's gpus, queued_s
    cause: dict[str, Any] | None = None  # the root cause the log reader followed: {type, message, line_no}
    stalled: bool = False  # ended early by server.stall: no log line and no work for that long
    stalled_after_s: float | None = None  # the quiet seconds when the stall was decided
    hang: dict[str, Any] | None = None  # {pid, name, thread, frames, site, files, notes}; null unless stacks were taken
    price: dict[str, Any] | None = None  # a pricing load's figures, once ready (triage --price); see launch/load.py
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

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["outcome"] = self.outcome.value
        if data["price"] is None:  # only a priced launch (triage --price) has one
            del data["price"]
        return data

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> AttemptRecord:
        """Read a record: fields of newer minor additions are ignored, a newer schema is refused."""
        version = data.get("schema_version", SCHEMA_VERSION)
        if not isinstance(version, int) or version > SCHEMA_VERSION:
            raise RecordError(
                f"schema_version {version!r}: written by a newer diagbench (this one reads {SCHEMA_VERSION})"
            )
        for name, kind in _REQUIRED.items():
            if not isinstance(data.get(name), kind):
                raise RecordError(f"field '{name}': expected {_KIND_WORDS[kind]}, got {data.get(name)!r}")
        try:
            outcome = Outcome(data["outcome"])
        except ValueError:
            raise RecordError(f"field 'outcome': unknown outcome {data['outcome']!r}") from None
        known = {f.name for f in fields(cls)}
        values = {k: v for k, v in data.items() if k in known}
        for name, value in values.items():
            _check_field(name, value)
        try:
            values["evidence"] = _known(Evidence, data["evidence"]) if data.get("evidence") else None
            values["killed"] = [_known(Killed, k) for k in data.get("killed") or []]
            values["phases"] = [_known(PhaseChange, p) for p in data.get("phases") or []]  # absent before phases
            return cls(**{**values, "outcome": outcome})
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


def _known(kind: Any, data: Mapping[str, Any]) -> Any:
    """A nested record from its JSON, fields added by a newer minor version left out."""
    return kind(**{f.name: data[f.name] for f in fields(kind)})


def _check_field(name: str, value: Any) -> None:
    """A field's value against its annotation, so a mistyped one is named here, not in a report."""
    hint = _HINTS[name]
    if name != "outcome" and not _conforms(value, hint):
        raise RecordError(f"field '{name}': expected {_words(hint)}, got {_shown(value)}")


def _conforms(value: Any, hint: Any) -> bool:
    origin, args = get_origin(hint), get_args(hint)
    if hint is Any:
        return True
    if origin in (Union, types.UnionType):
        return any(_conforms(value, arg) for arg in args)
    if hint is type(None):
        return value is None
    if hint is float:
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if hint in (int, str, bool):
        return isinstance(value, hint) and (hint is bool or not isinstance(value, bool))
    if origin is list:
        return isinstance(value, list) and all(_conforms(v, args[0]) for v in value)
    if origin is dict:
        return isinstance(value, dict) and all(_conforms(v, args[1]) for v in value.values())
    if is_dataclass(hint):  # Evidence, Killed: a JSON object with exactly their fields
        hints = get_type_hints(hint)
        return isinstance(value, dict) and all(k in value and _conforms(value[k], h) for k, h in hints.items())
    return isinstance(value, hint)


def _words(hint: Any, many: bool = False) -> str:
    """How a type is named in a message: "a string or null", "a list of integers"."""
    origin, args = get_origin(hint), get_args(hint)
    if origin in (Union, types.UnionType):
        return " or ".join(_words(arg, many) for arg in args)
    if origin in (list, dict):
        kind = ("lists" if many else "a list") if origin is list else ("mappings" if many else "a mapping")
        return kind if args[-1] is Any else f"{kind} of {_words(args[-1], True)}"
    if is_dataclass(hint):
        return "{" + ", ".join(f.name for f in fields(hint)) + "}" + (" objects" if many else "")
    return _TYPE_WORDS.get(hint, ("", str(hint)))[many]


def _shown(value: Any) -> str:
    text = json.dumps(value)
    return text if len(text) <= 60 else text[:59] + "…"


_TYPE_WORDS: dict[Any, tuple[str, str]] = {
    str: ("a string", "strings"),
    int: ("an integer", "integers"),
    float: ("a number", "numbers"),
    bool: ("true or false", "true or false"),
    type(None): ("null", "nulls"),
    Any: ("anything", "anything"),
}
_HINTS = get_type_hints(AttemptRecord)
_REQUIRED: dict[str, type] = {"cell_id": str, "repeat": int, "attempt": str, "params": dict, "outcome": str}
_KIND_WORDS = {str: "a string", int: "an integer", dict: "a mapping"}
