"""Hypotheses and expectations: parsed from the spec, judged from records alone (pure)."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from diagbench.matrix import Axis, Cell, parse_selector, selects
from diagbench.outcomes import FAILURE_CLASSES, OUTCOMES, Outcome
from diagbench.records import AttemptRecord
from diagbench.yamlsrc import Src, suggest

VERDICTS = ("supported", "refuted", "inconclusive")
_HYPOTHESIS_KEYS = ("id", "claim", "when", "supported_if", "refuted_if", "meaning")
_UNDECIDED = {
    Outcome.TIMEOUT.value: "timed out",
    Outcome.LAUNCH_ERROR.value: "launch error",
    Outcome.CANCELLED.value: "cancelled",
}


@dataclass(frozen=True)
class Condition:
    """An outcome, optionally narrowed to a failure class: `failed:oom`."""

    outcome: str
    failure_class: str | None = None

    def holds(self, record: AttemptRecord) -> bool:
        if record.outcome != self.outcome:
            return False
        return self.failure_class is None or self.failure_class == record.failure_class

    def __str__(self) -> str:
        return f"{self.outcome}:{self.failure_class}" if self.failure_class else self.outcome


@dataclass(frozen=True)
class Hypothesis:
    id: str
    claim: str
    when: Mapping[str, tuple[str, ...]]
    supported_if: tuple[Condition, ...]
    refuted_if: tuple[Condition, ...]
    meaning: Mapping[str, str]

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "claim": self.claim,
            "when": {k: list(v) for k, v in self.when.items()},
            "supported_if": [str(c) for c in self.supported_if],
            "refuted_if": [str(c) for c in self.refuted_if],
            "meaning": dict(self.meaning),
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Hypothesis:
        return cls(
            id=data["id"],
            claim=data.get("claim", ""),
            when={k: tuple(v) for k, v in data.get("when", {}).items()},
            supported_if=tuple(_condition_of(c) for c in data.get("supported_if", [])),
            refuted_if=tuple(_condition_of(c) for c in data.get("refuted_if", [])),
            meaning=dict(data.get("meaning", {})),
        )


@dataclass(frozen=True)
class Expectation:
    index: int
    when: Mapping[str, tuple[str, ...]]
    outcome: tuple[Condition, ...]

    def to_json(self) -> dict[str, Any]:
        return {"when": {k: list(v) for k, v in self.when.items()}, "outcome": [str(c) for c in self.outcome]}

    @classmethod
    def from_json(cls, index: int, data: Mapping[str, Any]) -> Expectation:
        return cls(
            index,
            {k: tuple(v) for k, v in data.get("when", {}).items()},
            tuple(_condition_of(c) for c in data.get("outcome", [])),
        )


def _condition_of(text: str) -> Condition:
    outcome, _, cls = text.partition(":")
    return Condition(outcome, cls or None)


def hypotheses_sha256(hypotheses: Sequence[Hypothesis]) -> str:
    canonical = json.dumps([h.to_json() for h in hypotheses], sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()


# -- parsing ----------------------------------------------------------------------------


def parse_conditions(src: Src) -> tuple[Condition, ...]:
    out = []
    for item in src.items_or_one():
        text = item.string("an outcome")
        outcome, _, cls = text.partition(":")
        if outcome not in OUTCOMES:
            raise item.error(f"unknown outcome '{outcome}'", suggest(outcome, OUTCOMES))
        if cls and cls not in FAILURE_CLASSES:
            raise item.error(f"unknown failure class '{cls}'", suggest(cls, FAILURE_CLASSES))
        if cls and outcome != Outcome.FAILED.value:
            raise item.error(f"a failure class only narrows 'failed', got '{text}'", f"write failed:{cls}")
        out.append(Condition(outcome, cls or None))
    return tuple(out)


def _selecting(src: Src, axes: Sequence[Axis], cells: Sequence[Cell]) -> dict[str, tuple[str, ...]]:
    selector = parse_selector(src, axes)
    if not any(cell.matches(selector) for cell in cells):
        raise src.error("selects no cell of the matrix", "check it against `diagbench plan` and the exclude list")
    return selector


def parse_hypotheses(src: Src, axes: Sequence[Axis], cells: Sequence[Cell]) -> tuple[Hypothesis, ...]:
    out: list[Hypothesis] = []
    for item in src.items():
        keys = item.mapping(_HYPOTHESIS_KEYS)
        for need in ("id", "when", "supported_if", "refuted_if"):
            if need not in keys:
                raise item.error(f"missing key '{need}'")
        hid = keys["id"].string()
        if hid in [h.id for h in out]:
            raise keys["id"].error(f"duplicate hypothesis id '{hid}'", "give each hypothesis its own id")
        meaning = {k: v.string() for k, v in keys["meaning"].mapping(VERDICTS).items()} if "meaning" in keys else {}
        out.append(
            Hypothesis(
                id=hid,
                claim=keys["claim"].string() if "claim" in keys else "",
                when=_selecting(keys["when"], axes, cells),
                supported_if=parse_conditions(keys["supported_if"]),
                refuted_if=parse_conditions(keys["refuted_if"]),
                meaning=meaning,
            )
        )
    return tuple(out)


def parse_expectations(src: Src, axes: Sequence[Axis], cells: Sequence[Cell]) -> tuple[Expectation, ...]:
    out = []
    for index, item in enumerate(src.items()):
        keys = item.mapping(("when", "outcome"))
        if "outcome" not in keys:
            raise item.error("missing key 'outcome'", "e.g. {when: {compile: off}, outcome: ready}")
        when = _selecting(keys["when"], axes, cells) if "when" in keys else {}
        out.append(Expectation(index, when, parse_conditions(keys["outcome"])))
    return tuple(out)


# -- judging ----------------------------------------------------------------------------


@dataclass(frozen=True)
class DecidingAttempt:
    cell_id: str
    attempt: str | None
    repeat: int | None
    outcome: str | None  # None: not run
    failure_class: str | None
    evidence: Mapping[str, Any] | None
    matched: str  # supported | refuted | neither | not run


@dataclass(frozen=True)
class Verdict:
    id: str
    claim: str
    verdict: str
    reason: str
    meaning: str | None
    deciding: tuple[DecidingAttempt, ...]

    @property
    def evidence(self) -> dict[str, Any] | None:
        """The deciding line: of the first attempt that matched the verdict."""
        for row in self.deciding:
            if row.matched == self.verdict and row.evidence:
                return {"cell_id": row.cell_id, "attempt": row.attempt, **row.evidence}
        return None

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["deciding_cells"] = data.pop("deciding")
        data["evidence"] = self.evidence
        return data


def judge(
    hypothesis: Hypothesis, planned: Sequence[Cell | Mapping[str, Any]], records: Sequence[AttemptRecord]
) -> Verdict:
    """The design.md 3.2 rule: refuted if any deciding attempt matches refuted_if;
    supported if every deciding cell ran and every attempt matches supported_if."""
    deciding = [_cell_id(c) for c in planned if _params(c) and selects(hypothesis.when, _params(c))]
    rows: list[DecidingAttempt] = []
    for cell_id in deciding:
        attempts = [r for r in records if r.cell_id == cell_id and r.outcome != Outcome.CANCELLED.value]
        if not attempts:
            rows.append(DecidingAttempt(cell_id, None, None, None, None, None, "not run"))
        for r in attempts:
            matched = (
                "refuted"
                if any(c.holds(r) for c in hypothesis.refuted_if)
                else "supported"
                if any(c.holds(r) for c in hypothesis.supported_if)
                else "neither"
            )
            rows.append(DecidingAttempt(cell_id, r.attempt, r.repeat, r.outcome, r.failure_class, r.evidence, matched))
    verdict, reason = _rule(rows)
    return Verdict(hypothesis.id, hypothesis.claim, verdict, reason, hypothesis.meaning.get(verdict), tuple(rows))


def _rule(rows: Sequence[DecidingAttempt]) -> tuple[str, str]:
    refuting = [r for r in rows if r.matched == "refuted"]
    if refuting:
        first = refuting[0]
        return "refuted", f"{first.cell_id} {_describe(first)}"
    if not rows:
        return "inconclusive", "no deciding cell"
    if all(r.matched == "supported" for r in rows):
        return "supported", f"all {len(rows)} deciding attempt(s) matched"
    missing = [f"{r.cell_id} {_undecided(r)}" for r in rows if r.matched != "supported"]
    return "inconclusive", "; ".join(missing)


def _describe(row: DecidingAttempt) -> str:
    return f"{row.outcome}:{row.failure_class}" if row.failure_class else str(row.outcome)


def _undecided(row: DecidingAttempt) -> str:
    if row.outcome is None:
        return "not run"
    return _UNDECIDED.get(row.outcome, f"matched neither ({_describe(row)})")


def _cell_id(cell: Cell | Mapping[str, Any]) -> str:
    return cell.id if isinstance(cell, Cell) else str(cell["cell_id"])


def _params(cell: Cell | Mapping[str, Any]) -> Mapping[str, str]:
    return cell.params if isinstance(cell, Cell) else cell["params"]


@dataclass(frozen=True)
class Violation:
    expectation: int
    cell_id: str
    attempt: str
    wanted: str
    got: str


def check_expectations(expectations: Sequence[Expectation], records: Sequence[AttemptRecord]) -> list[Violation]:
    """Every finished attempt a `when` selects must match one of its outcomes."""
    out = []
    for exp in expectations:
        for r in records:
            if r.outcome == Outcome.CANCELLED.value or not selects(exp.when, r.params):
                continue
            if not any(c.holds(r) for c in exp.outcome):
                got = f"{r.outcome}:{r.failure_class}" if r.failure_class else r.outcome
                out.append(Violation(exp.index, r.cell_id, r.attempt, " or ".join(map(str, exp.outcome)), got))
    return out
