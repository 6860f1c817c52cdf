"""Which remedies to launch, in what order, what each claims, and which to recommend (pure)."""

from __future__ import annotations

import itertools
import statistics
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from diagbench.records.record import AttemptRecord
from diagbench.spec.hypotheses import Condition, Hypothesis
from diagbench.triage.apply import Applied, Launch, apply_all, apply_change
from diagbench.triage.record import Recommendation, Target, Tried
from diagbench.triage.remedies import Remedy
from diagbench.vocab import Outcome

if TYPE_CHECKING:
    from diagbench.triage.problem import TriageProblem

__all__ = ["MAX_PAIRS", "Candidate", "candidates", "hypothesis_of", "pairs", "recommend", "tried_of", "unapplied"]

MAX_PAIRS = 6  # combinations of two launched when no single remedy comes up, cheapest first


@dataclass(frozen=True)
class Candidate:
    """A launch to try: one remedy, or two, applied to the command."""

    id: str
    diff: tuple[str, ...]
    source: str
    gives_up: str
    cost: int
    launch: Launch
    remedies: tuple[Remedy, ...]

    def records(self, records: Sequence[AttemptRecord]) -> list[AttemptRecord]:
        return [r for r in records if r.cell_id == self.id]

    def works(self, records: Sequence[AttemptRecord]) -> bool:
        mine = [r for r in self.records(records) if r.outcome.ran]
        return bool(mine) and all(r.outcome is Outcome.READY for r in mine)


def candidates(problem: TriageProblem, server: str | None, target: Target) -> list[Candidate]:
    """The remedies for this server and failure that change the command, cheapest first."""
    out = []
    for remedy in problem.catalogue.for_server(server):
        if not remedy.applies_to(target.outcome, target.failure_class, target.signature):
            continue
        applied = apply_change(problem.launch, remedy.change)
        if applied is not None:
            out.append(_single(remedy, applied))
    return sorted(out, key=lambda c: c.cost)  # stable: the file's order among equals


def unapplied(problem: TriageProblem, server: str | None, target: Target) -> list[str]:
    """The remedies for this server and failure whose change changes nothing in the command,
    each with what it would change (`vllm.lower-gpu-memory-utilization (~ --gpu-memory-utilization x0.9)`)."""
    return [
        f"{remedy.id} ({'; '.join(remedy.change.describe())})"
        for remedy in problem.catalogue.for_server(server)
        if remedy.applies_to(target.outcome, target.failure_class, target.signature)
        and apply_change(problem.launch, remedy.change) is None
    ]


def _single(remedy: Remedy, applied: Applied) -> Candidate:
    return Candidate(remedy.id, applied.diff, remedy.source, remedy.gives_up, remedy.cost, applied.launch, (remedy,))


def pairs(singles: Sequence[Candidate], base: Launch) -> list[Candidate]:
    """Combinations of two applied to `base` that make a launch none of the singles made, cheapest first."""
    seen = {(c.launch.argv, tuple(sorted(c.launch.env.items()))) for c in singles}
    out = []
    for a, b in itertools.combinations(singles, 2):
        applied = apply_all(base, [a.remedies[0].change, b.remedies[0].change])
        if applied is None:
            continue
        key = (applied.launch.argv, tuple(sorted(applied.launch.env.items())))
        if key in seen:
            continue
        seen.add(key)
        out.append(
            Candidate(
                f"{a.id}+{b.id}",
                applied.diff,
                f"{a.source}; {b.source}",
                "; ".join(x for x in (a.gives_up, b.gives_up) if x),
                a.cost + b.cost,
                applied.launch,
                (*a.remedies, *b.remedies),
            )
        )
    return sorted(out, key=lambda c: c.cost)[:MAX_PAIRS]


def hypothesis_of(candidate: Candidate, axis: str) -> Hypothesis:
    """`--enforce-eager makes it come up`: supported if every launch comes up, refuted if one fails."""
    change = ", ".join(candidate.diff)
    return Hypothesis(
        id=candidate.id,
        claim=f"`{change}` makes it come up",
        when={axis: (candidate.id,)},
        supported_if=(Condition(Outcome.READY),),
        refuted_if=(Condition(Outcome.FAILED), Condition(Outcome.CRASHED)),
        meaning={
            "supported": f"it comes up with {change}"
            + (f"; it gives up {candidate.gives_up}" if candidate.gives_up else ""),
            "refuted": f"{change} does not help this failure",
        },
    )


def tried_of(candidate: Candidate, records: Sequence[AttemptRecord], problem: TriageProblem) -> Tried:
    mine = candidate.records(records)
    ran = [r for r in mine if r.outcome.ran]
    common = Counter(r.label for r in ran).most_common(1)
    first = next((r for r in ran if r.label == common[0][0]), None) if common else None
    ready = [r for r in ran if r.outcome is Outcome.READY]
    times = [r.time_to_outcome_s for r in ready if r.time_to_outcome_s is not None]
    priced = [r.price for r in ready if r.price]
    skipped = next((r.reason for r in mine if not r.outcome.ran), None) if not ran else None
    return Tried(
        id=candidate.id,
        change=candidate.diff,
        source=candidate.source,
        gives_up=candidate.gives_up,
        cost=candidate.cost,
        command=problem.shown(candidate.launch),
        outcome=first.outcome if first else None,
        failure_class=first.failure_class if first else None,
        works=candidate.works(records),
        startup_s=round(statistics.median(times), 3) if times else None,
        price=priced[0] if priced else None,
        attempts=tuple(r.attempt for r in mine),
        outcomes=tuple(r.label for r in mine),
        skipped=skipped,
    )


def recommend(tried: Sequence[Tried], problem: TriageProblem) -> Recommendation | None:
    """The cheapest that works: the best measured throughput when priced, else the least
    the remedy gives up (its cost), then the quickest start. A remedy that came up but
    answered none of its pricing requests is never recommended: it does not serve."""
    working = [t for t in tried if t.works and not unserved(t)]
    if not working:
        return None
    measured = [t for t in working if t.price and _rate(t) is not None]
    if measured:
        best = max(measured, key=lambda t: _rate(t) or 0.0)
        why = f"the highest throughput of the {len(working)} that came up: {_rate_text(best)}"
    else:
        best = min(working, key=lambda t: (t.cost, t.startup_s if t.startup_s is not None else float("inf")))
        why = f"the least given up of the {len(working)} that came up: cost {best.cost}"
    return Recommendation(best.id, best.command, best.change, why)


def unserved(tried: Tried) -> bool:
    """Priced, and not one pricing request answered."""
    return tried.price is not None and tried.price.ok == 0


def _rate(tried: Tried) -> float | None:
    if tried.price is None:
        return None
    return tried.price.tokens_per_s or tried.price.throughput_rps


def _rate_text(tried: Tried) -> str:
    price = tried.price
    if price is not None and price.tokens_per_s:
        return f"{price.tokens_per_s} tokens/s"
    return f"{price.throughput_rps if price else None} requests/s"
