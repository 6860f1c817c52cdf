"""What a watch decides and what it is told to wait for: the decision of one launch, the
phases it entered, and the rule for ready."""

from __future__ import annotations

from dataclasses import dataclass

from diagbench.vocab import Evidence, Outcome

__all__ = ["Decision", "PhaseChange", "ReadyRule"]


@dataclass(frozen=True)
class Decision:
    """The outcome of one launch, and what decided it."""

    outcome: Outcome
    reason: str
    at: float
    failure_class: str | None = None
    secondary_classes: tuple[str, ...] = ()
    signature: str | None = None
    evidence: Evidence | None = None
    exit_code: int | None = None
    signal: int | None = None


@dataclass(frozen=True)
class PhaseChange:
    """A start-up phase the server entered (`load`, `capture bs=32`), `at_s` seconds after the
    launch (the watch's `started`): the record's timeline, and what the live view is told."""

    name: str
    at_s: float


@dataclass(frozen=True)
class ReadyRule:
    """What 'ready' takes: a ready line, an HTTP 200, or both."""

    log: bool = True
    http: bool = False
    http_path: str = ""
    request: str = ""  # the ready request ("POST /v1/completions") that must succeed last; "" for none
