"""`limit.json`: the option or variable varied, the range, the limit found, the value past
it, whether the values that come up lie on one side, and every value launched. Typed,
versioned, read back with suspicion."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path

from diagbench.jsonvalue import JSON, JSONObject
from diagbench.records.parts import Price
from diagbench.records.typed import build_versioned, read_document
from diagbench.vocab import ExitCode, Outcome, outcome_label

__all__ = ["FILENAME", "LIMIT_VERSION", "Limit", "Role", "Status", "Step", "read_limit"]

FILENAME = "limit.json"
LIMIT_VERSION = 1
_MAX_BYTES = 16 << 20


class Status(str, Enum):
    FOUND = "found"  # a value came up: the limit
    NONE_UP = "none_up"  # nothing launched in the range came up
    UNRESOLVED = "unresolved"  # a launch that decided nothing (it did not start) stopped the search
    INTERRUPTED = "interrupted"
    WRITE_FAILED = "write_failed"  # a record or log could not be written (a full disk)

    @property
    def exit_code(self) -> int:
        codes = {
            Status.FOUND: ExitCode.OK,
            Status.INTERRUPTED: ExitCode.INTERRUPTED,
            Status.WRITE_FAILED: ExitCode.USAGE,
        }
        return int(codes.get(self, ExitCode.EXPECT_VIOLATED))


class Role(str, Enum):
    SEARCH = "search"  # a launch of the bisection
    CHECK = "check"  # a launch that checks that the values that come up lie on one side


@dataclass(frozen=True)
class Step:
    """One value's launches: what they did, and what the search took from them."""

    value: int
    role: Role
    verdict: str  # ok, bad, flaky, unresolved (search.Verdict)
    outcome: Outcome  # of its launches, the commonest (`failed:oom` is outcome failed, class oom)
    failure_class: str | None
    outcomes: tuple[str, ...]  # every launch's label
    attempts: tuple[str, ...]
    line: str | None = None  # the deciding line (or what decided when no line did)
    line_no: int | None = None
    startup_s: float | None = None  # launch -> ready, of the first launch that came up
    price: Price | None = None  # --price: the first launch that came up's figures

    @property
    def label(self) -> str:
        return outcome_label(self.outcome, self.failure_class)

    def to_json(self) -> dict[str, JSON]:
        return {
            "value": self.value,
            "role": self.role.value,
            "verdict": self.verdict,
            "outcome": self.outcome.value,
            "failure_class": self.failure_class,
            "outcomes": list(self.outcomes),
            "attempts": list(self.attempts),
            "line": self.line,
            "line_no": self.line_no,
            "startup_s": self.startup_s,
            "price": self.price.to_json() if self.price else None,
        }


@dataclass(frozen=True)
class Limit:
    status: Status
    reason: str
    command: str  # with {value} where the value goes, secrets blanked
    option: str  # the option (`--cuda-graph-max-bs`) or variable varied
    env: bool  # a variable (--vary-env), not an option
    smallest: bool  # the smallest value that comes up was looked for
    lo: int
    hi: int
    largest_ok: int | None = None  # the largest value that came up (--smallest: null)
    smallest_bad: int | None = None  # the value above it that did not (null: HI came up)
    smallest_ok: int | None = None  # --smallest: the smallest value that came up
    largest_bad: int | None = None  # --smallest: the value below it that did not (null: LO came up)
    monotone: bool | None = None  # null: not checked
    against: int | None = None  # a value on the wrong side of the limit (monotone false)
    flaky: tuple[int, ...] = ()
    launches: int = 0
    budget: int = 0  # launches the search may take: (ceil(log2(HI - LO)) + 2) x --repeat
    repeat: int = 1
    steps: tuple[Step, ...] = ()
    server: str | None = None
    notes: tuple[str, ...] = field(default=())

    @property
    def limit(self) -> int | None:
        return self.smallest_ok if self.smallest else self.largest_ok

    @property
    def beyond(self) -> int | None:
        return self.largest_bad if self.smallest else self.smallest_bad

    def step(self, value: int | None) -> Step | None:
        return next((s for s in self.steps if s.value == value), None)

    def to_json(self) -> dict[str, JSON]:
        return {
            "limit_version": LIMIT_VERSION,
            "status": self.status.value,
            "reason": self.reason,
            "command": self.command,
            "server": self.server,
            "option": self.option,
            "env": self.env,
            "smallest": self.smallest,
            "lo": self.lo,
            "hi": self.hi,
            "largest_ok": self.largest_ok,
            "smallest_bad": self.smallest_bad,
            "smallest_ok": self.smallest_ok,
            "largest_bad": self.largest_bad,
            "launches": self.launches,
            "budget": self.budget,
            "repeat": self.repeat,
            "monotone": self.monotone,
            "against": self.against,
            "flaky": list(self.flaky),
            "steps": [s.to_json() for s in self.steps],
            "notes": list(self.notes),
        }

    @classmethod
    def from_json(cls, data: JSONObject) -> Limit:
        return build_versioned(cls, data, FILENAME, "limit_version", LIMIT_VERSION)


def read_limit(run_dir: Path) -> Limit | None:
    """The run's limit.json, or None when the run is no limit search."""
    data = read_document(run_dir / FILENAME, _MAX_BYTES)
    return None if data is None else Limit.from_json(data)
