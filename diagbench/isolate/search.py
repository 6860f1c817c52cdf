"""Delta debugging over factors (Zeller and Hildebrandt 2002, `ddmin`), driven by a probe callback.

A probe is the good launch with some factors applied. It *fails* when it reproduces the
target (the bad launch's outcome and class), *passes* when it comes up, and is
*unresolved* otherwise: a different failure, or launches of it that disagree (flaky).
Only a failing probe narrows the search, so an unresolved one can never make a
factor look guilty. The result is 1-minimal: removing any one of its factors no longer
reproduces the target.

Pure: launching is the callback's business. It gets a batch of probes that do not
depend on each other (run them at once where slots allow) and is never asked about the
same probe twice.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from enum import Enum

from diagbench.vocab import Ended, Outcome, outcome_label

Probe = frozenset[str]  # the factors applied to the good launch


class Result(str, Enum):
    FAIL = "fail"  # reproduces the target
    PASS = "pass"  # comes up
    UNRESOLVED = "unresolved"  # a different failure, or launches that disagree

    def __str__(self) -> str:
        return self.value


@dataclass(frozen=True)
class Target:
    """What the bad launch did: the outcome and class every failing probe must show."""

    outcome: Outcome
    failure_class: str | None

    @property
    def label(self) -> str:
        return outcome_label(self.outcome, self.failure_class)

    def matches(self, ended: Ended) -> bool:
        return ended.outcome is self.outcome and ended.failure_class == self.failure_class


@dataclass(frozen=True)
class Judged:
    """A probe's result over its launches."""

    result: Result
    flaky: bool = False  # its launches disagreed
    reproduced: bool = False  # at least one launch showed the target
    unbuildable: bool = False  # its environment did not resolve or install: never launched


def judge_launches(launches: Sequence[Ended], target: Target) -> Judged:
    """fail if every launch shows the target, pass if every launch came up, else unresolved."""
    hits = [target.matches(e) for e in launches]
    labels = {outcome_label(e.outcome, e.failure_class) for e in launches}
    if launches and all(hits):
        return Judged(Result.FAIL, reproduced=True)
    if launches and all(e.outcome is Outcome.READY for e in launches):
        return Judged(Result.PASS)
    return Judged(Result.UNRESOLVED, flaky=len(labels) > 1, reproduced=any(hits))


Test = Callable[[Sequence[Probe]], Sequence[Judged]]


class _Memo:
    """Every probe's result, asked of the callback once, in batches of up to `width`."""

    def __init__(self, test: Test, width: int, known: Mapping[Probe, Judged]):
        self.test, self.width = test, max(1, width)
        self.known: dict[Probe, Judged] = dict(known)

    def first_failing(self, candidates: Sequence[Probe]) -> Probe | None:
        """The first candidate, in order, that fails: the same answer however wide the batches are."""
        ordered = list(dict.fromkeys(candidates))
        for i, probe in enumerate(ordered):
            if probe not in self.known:
                batch = [c for c in ordered[i:] if c not in self.known][: self.width]
                for tried, judged in zip(batch, self.test(batch), strict=True):
                    self.known[tried] = judged
            if self.known[probe].result is Result.FAIL:
                return probe
        return None


def ddmin(factors: Sequence[str], test: Test, width: int = 1) -> tuple[tuple[str, ...], dict[Probe, Judged]]:
    """A 1-minimal set of factors that reproduces the target, and every probe's result.

    The baselines are known: no factor applied passes (good), all applied fail (bad)."""
    everything = frozenset(factors)
    memo = _Memo(test, width, {frozenset(): Judged(Result.PASS), everything: Judged(Result.FAIL, reproduced=True)})
    current, n = list(factors), 2
    while len(current) >= 2:
        subsets = _split(current, n)
        complements = [[f for f in current if f not in s] for s in subsets] if n > 2 else []  # n=2: the same sets
        found = memo.first_failing([frozenset(s) for s in (*subsets, *complements)])
        if found is None:
            if n >= len(current):
                break  # every single factor's removal tested: 1-minimal
            n = min(len(current), 2 * n)
            continue
        shrunk_to_subset = any(found == frozenset(s) for s in subsets)
        current = [f for f in current if f in found]
        n = 2 if shrunk_to_subset else max(n - 1, 2)
    return tuple(current), memo.known


def _split(items: Sequence[str], n: int) -> list[list[str]]:
    """`n` contiguous chunks as equal as can be."""
    size, extra = divmod(len(items), n)
    out, start = [], 0
    for i in range(n):
        end = start + size + (1 if i < extra else 0)
        out.append(list(items[start:end]))
        start = end
    return [chunk for chunk in out if chunk]


@dataclass(frozen=True)
class Conclusion:
    isolated: bool
    reason: str  # why not, when not


def conclude(culprit: Sequence[str], known: Mapping[Probe, Judged]) -> Conclusion:
    """Whether the culprit stands: the target never came and went between launches of one
    configuration (then a pass proves nothing), no launch without one of its factors was flaky,
    and not every such launch failed some other way (the target may be what the others hide)."""
    intermittent = sum(j.flaky and j.reproduced for j in known.values())
    if intermittent:
        return Conclusion(
            False,
            f"flaky: the target came and went between launches of {intermittent} configuration(s), "
            "so a launch that came up proves nothing",
        )
    without = {f: known.get(frozenset(culprit) - {f}) for f in culprit}
    flaky = [f for f, judged in without.items() if judged is not None and judged.flaky]
    if flaky:
        return Conclusion(False, f"flaky: the launches without {', '.join(flaky)} disagreed (try a larger --repeat)")
    all_unresolved = all(j is None or j.result is Result.UNRESOLVED for j in without.values())
    never_built = any(j is not None for j in without.values()) and all(
        j is None or j.unbuildable for j in without.values()
    )
    if len(culprit) > 1 and all_unresolved and not never_built:  # an environment that cannot be built hides nothing
        return Conclusion(False, "every launch without one of these factors failed some other way")
    return Conclusion(True, "")


def companions(culprit: Sequence[str], known: Mapping[Probe, Judged]) -> list[tuple[str, tuple[str, ...]]]:
    """(g, the rest) for each culprit factor without which the rest cannot even be installed: applied together."""
    out = []
    for g in culprit:
        judged = known.get(frozenset(culprit) - {g})
        if judged is not None and judged.unbuildable:
            out.append((g, tuple(f for f in culprit if f != g)))
    return out


def suspects(factors: Sequence[str], known: Mapping[Probe, Judged]) -> tuple[str, ...]:
    """The factors present in every probe that showed the target at least once."""
    seen = [probe for probe, judged in known.items() if judged.reproduced]
    common = frozenset.intersection(*seen) if seen else frozenset()
    return tuple(f for f in factors if f in common)
