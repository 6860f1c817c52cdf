"""Judging: hypotheses and expectations against records alone (pure).

The rule: a hypothesis is refuted if any deciding cell matches `refuted_if`; supported if
every deciding cell ran and every attempt (repeats too) matches `supported_if`; else
inconclusive, with the reason. Cancelled, skipped and internal-error attempts did not run.

Repeats: a cell matches `refuted_if` when one of its attempts does and none matches
`supported_if`. A cell that disagrees with itself (`ready 2/3 · failed:cuda_graph_capture
1/3` against `supported_if: ready, refuted_if: failed`) decides nothing: the hypothesis is
inconclusive with the reason `<cell> flaky (2/3 ready)`, unless another cell refutes it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from diagbench.jsonvalue import JSON
from diagbench.records.record import AttemptRecord
from diagbench.spec.hypotheses import Expectation, Hypothesis
from diagbench.spec.matrix import CellRef, selects
from diagbench.vocab import Evidence, Match, Outcome, VerdictWord, outcome_label

__all__ = [
    "DecidingAttempt",
    "Verdict",
    "VerdictEvidence",
    "Violation",
    "cell_refutes",
    "check_expectations",
    "judge",
    "match",
]

_UNDECIDED = {
    Outcome.TIMEOUT: "timed out",
    Outcome.LAUNCH_ERROR: "launch error",
}


@dataclass(frozen=True)
class DecidingAttempt:
    cell_id: str
    attempt: str | None
    repeat: int | None
    outcome: Outcome | None  # None: not run
    failure_class: str | None
    evidence: Evidence | None
    matched: Match

    @property
    def label(self) -> str:
        return outcome_label(self.outcome, self.failure_class) if self.outcome else "not run"

    def to_json(self) -> dict[str, JSON]:
        return {
            "cell_id": self.cell_id,
            "attempt": self.attempt,
            "repeat": self.repeat,
            "outcome": self.outcome.value if self.outcome else None,
            "failure_class": self.failure_class,
            "evidence": self.evidence.to_json() if self.evidence else None,
            "matched": self.matched.value,
        }


@dataclass(frozen=True)
class VerdictEvidence:
    """The line that decided a verdict, and the attempt it came from."""

    cell_id: str
    attempt: str | None
    line_no: int
    text: str

    def to_json(self) -> dict[str, JSON]:
        return {"cell_id": self.cell_id, "attempt": self.attempt, "line_no": self.line_no, "text": self.text}


@dataclass(frozen=True)
class Verdict:
    id: str
    claim: str
    verdict: VerdictWord
    reason: str
    meaning: str | None
    deciding: tuple[DecidingAttempt, ...]

    @property
    def evidence(self) -> VerdictEvidence | None:
        """The deciding line: of the first attempt that matched the verdict."""
        rows = _refuting_cell(self.deciding) if self.verdict is VerdictWord.REFUTED else self.deciding
        for row in rows:
            if row.matched.value == self.verdict.value and row.evidence:
                return VerdictEvidence(row.cell_id, row.attempt, row.evidence.line_no, row.evidence.text)
        return None

    @property
    def flaky(self) -> str | None:
        """`<cell> 2/3 ready`: the first deciding cell whose repeats disagreed on `supported_if`."""
        for cell_id in dict.fromkeys(row.cell_id for row in self.deciding):
            counts = _flaky([row for row in self.deciding if row.cell_id == cell_id])
            if counts:
                return f"{cell_id} {counts}"
        return None

    def to_json(self) -> dict[str, JSON]:
        evidence = self.evidence
        return {
            "id": self.id,
            "claim": self.claim,
            "verdict": self.verdict.value,
            "reason": self.reason,
            "meaning": self.meaning,
            "deciding_cells": [row.to_json() for row in self.deciding],
            "evidence": evidence.to_json() if evidence else None,
            "flaky": self.flaky,
        }


def judge(hypothesis: Hypothesis, cells: Sequence[CellRef], records: Sequence[AttemptRecord]) -> Verdict:
    """One hypothesis against the records of its deciding cells."""
    rows: list[DecidingAttempt] = []
    for cell in cells:
        if not selects(hypothesis.when, cell.params):
            continue
        attempts = [r for r in records if r.cell_id == cell.id and r.outcome.ran]
        if not attempts:
            rows.append(DecidingAttempt(cell.id, None, None, None, None, None, Match.NOT_RUN))
        for r in attempts:
            rows.append(
                DecidingAttempt(
                    cell.id, r.attempt, r.repeat, r.outcome, r.failure_class, r.evidence, match(hypothesis, r)
                )
            )
    verdict, reason = _rule(rows)
    return Verdict(hypothesis.id, hypothesis.claim, verdict, reason, hypothesis.meaning.get(verdict.value), tuple(rows))


def match(hypothesis: Hypothesis, record: AttemptRecord) -> Match:
    if any(c.holds(record) for c in hypothesis.refuted_if):
        return Match.REFUTED
    if any(c.holds(record) for c in hypothesis.supported_if):
        return Match.SUPPORTED
    return Match.NEITHER


def _refuting_cell(rows: Sequence[DecidingAttempt]) -> list[DecidingAttempt]:
    """The attempts of the first deciding cell that matches `refuted_if` (some attempt
    refutes and none supports), or none."""
    for cell_id in dict.fromkeys(r.cell_id for r in rows):
        own = [r for r in rows if r.cell_id == cell_id]
        if cell_refutes([r.matched for r in own]):
            return own
    return []


def cell_refutes(matched: Sequence[Match]) -> bool:
    """One cell's attempts refute: one matches `refuted_if` and none `supported_if` (else,
    with both, the cell disagrees with itself: flaky)."""
    return Match.REFUTED in matched and Match.SUPPORTED not in matched


def _rule(rows: Sequence[DecidingAttempt]) -> tuple[VerdictWord, str]:
    if own := _refuting_cell(rows):
        refuting = [r for r in own if r.matched is Match.REFUTED]
        more = f" ({len(refuting)}/{len(own)})" if len(own) > 1 else ""
        return VerdictWord.REFUTED, f"{refuting[0].cell_id} {refuting[0].label}{more}"
    if not rows:
        return VerdictWord.INCONCLUSIVE, "no deciding cell"
    if all(r.matched is Match.SUPPORTED for r in rows):
        return VerdictWord.SUPPORTED, f"all {len(rows)} deciding attempt(s) matched"
    missing: list[str] = []
    for cell_id in dict.fromkeys(r.cell_id for r in rows):
        own = [r for r in rows if r.cell_id == cell_id]
        flaky = _flaky(own)
        if flaky:
            missing.append(f"{cell_id} flaky ({flaky})")
        else:
            missing += [f"{cell_id} {_undecided(r)}" for r in own if r.matched is not Match.SUPPORTED]
    return VerdictWord.INCONCLUSIVE, "; ".join(missing)


def _flaky(own: Sequence[DecidingAttempt]) -> str | None:
    """`2/3 ready` where a cell's attempts partly match `supported_if`, else None."""
    supporting = [r.label for r in own if r.matched is Match.SUPPORTED]
    if not supporting or len(supporting) == len(own):
        return None
    common = max(dict.fromkeys(supporting), key=supporting.count)
    return f"{len(supporting)}/{len(own)} {common}"


def _undecided(row: DecidingAttempt) -> str:
    if row.outcome is None:
        return "not run"
    return _UNDECIDED.get(row.outcome, f"matched neither ({row.label})")


@dataclass(frozen=True)
class Violation:
    expectation: int
    cell_id: str
    attempt: str
    wanted: str
    got: str

    def to_json(self) -> dict[str, JSON]:
        return {
            "expectation": self.expectation,
            "cell_id": self.cell_id,
            "attempt": self.attempt,
            "wanted": self.wanted,
            "got": self.got,
        }


def check_expectations(expectations: Sequence[Expectation], records: Sequence[AttemptRecord]) -> list[Violation]:
    """Every attempt that ran and that a `when` selects must match one of its outcomes."""
    out = []
    for exp in expectations:
        for r in records:
            if not r.outcome.ran or not selects(exp.when, r.params):
                continue
            if not any(c.holds(r) for c in exp.outcome):
                out.append(Violation(exp.index, r.cell_id, r.attempt, " or ".join(map(str, exp.outcome)), r.label))
    return out
