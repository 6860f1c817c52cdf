"""Which attempts can still change a verdict or an expect (pure), for `--stop-when-decided`
and `--fail-fast`, and the order that decides verdicts soonest.

An attempt may be skipped only when the records so far already fix everything it could
change, whatever it and every other unfinished attempt would end as:

- a hypothesis is fixed once a deciding cell matches `refuted_if` and has no repeat left
  to run (a later repeat that came up would make the cell flaky, not refuting). Supported
  is never fixed early: it needs every deciding attempt, repeats included, so those always
  run; nor is inconclusive, since a later attempt could refute;
- an expect is fixed once it is violated (the run exits 1 whatever follows);
- a cell that no hypothesis and no expect selects can change nothing.

So the verdicts are those of a full run that ended the same way; what can differ is which
deciding cell a refuted verdict names (the first refuting one that ran).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from diagbench.judge.verdicts import cell_refutes, check_expectations, match
from diagbench.records.record import AttemptRecord
from diagbench.spec.hypotheses import Expectation, Hypothesis
from diagbench.spec.matrix import selects
from diagbench.spec.plan import PlannedAttempt
from diagbench.vocab import Match

__all__ = ["NOTHING_TO_DECIDE", "Decider", "decision_order", "expectation_fixed", "hypothesis_fixed"]

NOTHING_TO_DECIDE = "decides no hypothesis and no expect"


def hypothesis_fixed(hypothesis: Hypothesis, records: Sequence[AttemptRecord], repeat: int = 1) -> str | None:
    """Why no further attempt can change this hypothesis's verdict, or None while one can:
    a deciding cell refutes it, and every one of that cell's `repeat` attempts has ended."""
    deciding = [r for r in records if selects(hypothesis.when, r.params)]
    for cell_id in dict.fromkeys(r.cell_id for r in deciding):
        own = [r for r in deciding if r.cell_id == cell_id]
        matched = [match(hypothesis, r) for r in own if r.outcome.ran]
        if cell_refutes(matched) and len(own) >= repeat:
            first = next(r for r in own if r.outcome.ran and match(hypothesis, r) is Match.REFUTED)
            return f"hypothesis {hypothesis.id} already refuted by {cell_id} ({first.label})"
    return None


def expectation_fixed(expectation: Expectation, records: Sequence[AttemptRecord]) -> str | None:
    """Why no further attempt can change this expect's result (it is violated), or None."""
    for violation in check_expectations([expectation], records):
        return f"expect #{expectation.index + 1} already violated by {violation.cell_id} ({violation.got})"
    return None


@dataclass(frozen=True)
class Decider:
    """The scheduler's gate: a reason not to launch an attempt, or None to launch it."""

    hypotheses: Sequence[Hypothesis]
    expectations: Sequence[Expectation]
    stop_when_decided: bool = False
    fail_fast: bool = False
    repeat: int = 1  # attempts per cell: a refuting cell is final only once all have ended

    def __call__(self, item: PlannedAttempt, records: Sequence[AttemptRecord]) -> str | None:
        if self.fail_fast:
            violated = next((reason for e in self.expectations if (reason := expectation_fixed(e, records))), None)
            if violated is not None:
                return f"{violated} (--fail-fast)"
        return self.skip_reason(item, records) if self.stop_when_decided else None

    def skip_reason(self, item: PlannedAttempt, records: Sequence[AttemptRecord]) -> str | None:
        """Why `item` can change no verdict and no expect any more, or None if it still can."""
        params = item.cell.params
        reasons: list[str] = []
        for h in self.hypotheses:
            if selects(h.when, params):
                fixed = hypothesis_fixed(h, records, self.repeat)
                if fixed is None:
                    return None
                reasons.append(fixed)
        for e in self.expectations:
            if selects(e.when, params):
                fixed = expectation_fixed(e, records)
                if fixed is None:
                    return None
                reasons.append(fixed)
        return "; ".join(reasons) if reasons else NOTHING_TO_DECIDE


def decision_order(
    planned: Sequence[PlannedAttempt], hypotheses: Sequence[Hypothesis], expectations: Sequence[Expectation]
) -> list[PlannedAttempt]:
    """The launch order that decides verdicts soonest, deterministically: first an attempt
    for each hypothesis not yet tried (a cell deciding several at once first), so an early
    refutation spares the rest of its cells; then first repeats before later ones; cells
    that decide more before fewer, expect cells before others, matrix order last. Attempts
    that decide nothing go at the end (they are skipped)."""
    decides = [frozenset(h.id for h in hypotheses if selects(h.when, p.cell.params)) for p in planned]
    expected = [any(selects(e.when, p.cell.params) for e in expectations) for p in planned]
    left = list(range(len(planned)))
    tried: set[str] = set()
    order: list[int] = []

    def key(i: int) -> tuple[bool, int, int, int, bool, int]:
        mine, p = decides[i], planned[i]
        fresh = len(mine - tried) if mine else 0
        return (bool(mine) or expected[i], fresh, -p.repeat, len(mine), expected[i], -p.cell.index)

    # each pick that tries a hypothesis not yet tried adds one to `tried`: at most one pick per
    # hypothesis; once none is left to try, the keys no longer change and one sort orders the
    # rest (stable: ties keep matrix order, as `max` picked the first of them)
    while left and any(decides[i] - tried for i in left):
        best = max(left, key=key)
        left.remove(best)
        order.append(best)
        tried.update(decides[best])
    return [planned[i] for i in [*order, *sorted(left, key=key, reverse=True)]]
