"""The search for guilty factors, driven by a probe callback: a 1-minimal set of factors that,
applied to the good launch, reproduces the bad launch's failure (the goal of Zeller and
Hildebrandt's `ddmin`, 2002), found in fewer launches than ddmin by binary search.

A probe is the good launch with some factors applied. It *fails* when it reproduces the
target (the bad launch's outcome and class), *passes* when it comes up, and is
*unresolved* otherwise: a different failure, or launches of it that disagree (flaky).
Only a failing probe narrows the search, so an unresolved one can never make a factor
look guilty.

The search (`_minimal`) finds the last factor the failure needs by bisecting the prefixes
of the factors, then launches it alone, so a lone culprit is seen failing on its own; where
that launch comes up, it finds what the factor needs among those before it, the same way.
Every answer rests on
launches: the culprit was seen failing, and the configuration without each of its factors
was seen not to. The good launch is made only where it is needed: where, for some factor
of the culprit, no launch without that factor came up. A launch that came up holds the
good one (the good one plus factors), which is then taken to come up too; a good launch
that does not come up ends the search (the caller says so) before any answer is given.

At `--repeat 1` (`confirm`), a culprit of several factors says they are guilty only
together, and that rests on launches that came up, which a flaky target fakes. So before
it is named, each launch without one of its factors is seen twice and the culprit three
times in all (what the search saw counts); a lone factor whose own launch showed the target
needs nothing more. The first launch that disagrees stops it: flaky.

Pure: launching is the callback's business. It gets a batch of probes that do not depend on
each other (run them at once where slots allow); asked again, it launches them once more.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from enum import Enum

from diagbench.vocab import Ended, Outcome, outcome_label

__all__ = [
    "GOOD",
    "Judged",
    "Probe",
    "Result",
    "Searched",
    "Target",
    "Test",
    "came_up_without",
    "companions",
    "conclude",
    "contradicted",
    "judge_launches",
    "search",
    "suspects",
]

Probe = frozenset[str]  # the factors applied to the good launch
GOOD: Probe = frozenset()  # the good launch itself

WITNESS_LAUNCHES = 2  # at --repeat 1: launches without one of a culprit's factors, before naming it
CULPRIT_LAUNCHES = 3  # and of a culprit of several factors


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
    launches: int = 1  # how many launches it is judged over


def judge_launches(launches: Sequence[Ended], target: Target) -> Judged:
    """fail if every launch shows the target, pass if every launch came up, else unresolved."""
    hits = [target.matches(e) for e in launches]
    labels = {outcome_label(e.outcome, e.failure_class) for e in launches}
    if launches and all(hits):
        return Judged(Result.FAIL, reproduced=True, launches=len(launches))
    if launches and all(e.outcome is Outcome.READY for e in launches):
        return Judged(Result.PASS, launches=len(launches))
    return Judged(Result.UNRESOLVED, flaky=len(labels) > 1, reproduced=any(hits), launches=len(launches))


# test(batch, again): each probe's judgement over all its launches. again=False: probes the
# search has not seen (a launch already made of the same configuration may answer); again=True:
# launch each once more.
Test = Callable[[Sequence[Probe], bool], Sequence[Judged]]


@dataclass(frozen=True)
class Searched:
    culprit: tuple[str, ...]
    known: dict[Probe, Judged]  # every probe's result
    trouble: str = ""  # why the culprit does not stand (launches disagreed), when it does not


class _Ask(Exception):
    """The search needs a probe it has not seen."""

    def __init__(self, probe: Probe):
        super().__init__()
        self.probe = probe


def search(
    factors: Sequence[str],
    test: Test,
    width: int = 1,
    confirm: bool = False,
    known: Mapping[Probe, Judged] | None = None,
) -> Searched:
    """A 1-minimal set of factors that reproduces the target, and every probe's result.

    `known` holds what was launched before: the bad launch (all applied), which fails. The
    good one (`GOOD`) is asked for only where, for some factor of the culprit, no launch
    without it came up, or where none came up at all.
    `width`: probes launched at once (the answer is the same at any width)."""
    seen: dict[Probe, Judged] = dict(known or {})  # each probe over all its launches
    seen.setdefault(frozenset(factors), Judged(Result.FAIL, reproduced=True))
    first = dict(seen)  # each probe as the search first saw it: launches again never change its path
    current = list(factors)
    while True:
        try:
            culprit = _minimal(current, first)
        except _Ask as ask:
            batch = _ahead(current, first, ask.probe, max(1, width))
            for probe, judged in zip(batch, test(batch, False), strict=True):
                first.setdefault(probe, judged)
                seen[probe] = judged
            continue
        step = _confirmation(culprit, seen, confirm)
        if isinstance(step, _Shrink):
            current = [f for f in current if f in step.to]  # a factor the culprit does not need
        elif isinstance(step, str):
            if GOOD not in seen and not any(j.result is Result.PASS for j in seen.values()):
                seen[GOOD] = test([GOOD], False)[0]  # nothing came up: is the good side itself broken?
            return Searched(tuple(culprit), seen, step)
        elif not step.new and not step.again:
            return Searched(tuple(culprit), seen)
        else:
            for batch, again in ((step.new[:width], False), (step.again[:width], True)):
                for probe, judged in zip(batch, test(batch, again) if batch else [], strict=True):
                    first.setdefault(probe, judged)
                    seen[probe] = judged


def _fails(seen: Mapping[Probe, Judged], factors: Sequence[str]) -> bool:
    probe = frozenset(factors)
    if probe not in seen:
        raise _Ask(probe)
    return seen[probe].result is Result.FAIL


def _minimal(factors: Sequence[str], seen: Mapping[Probe, Judged]) -> list[str]:
    """The culprit within `factors` (which fail together); raises _Ask for a probe not yet seen."""
    return _needed(list(factors), [], seen)


def _needed(items: list[str], context: list[str], seen: Mapping[Probe, Judged]) -> list[str]:
    """A smallest part of `items` that fails with `context`, where `context + items` fails and
    `context` alone does not: the last item it needs (bisecting the prefixes of `items`), then
    what that one needs among the items before it.

    Without context the bisection goes down to one item, then launches it alone: that launch
    names a lone culprit, or is the launch without the others that a culprit of several needs
    anyway. With context, two items left are each tried with it first: those launches are
    the candidate culprits themselves. (Trying each alone without context too costs a pair
    up to two launches more, and a lone culprit on average less than half a launch less.)"""
    low, high = 0, len(items)  # context + items[:high] fails, context + items[:low] does not
    while high - low > (2 if context else 1):
        middle = (low + high) // 2
        if _fails(seen, context + items[:middle]):
            high = middle
        else:
            low = middle
    if high - low == 2:  # two left beside the context: each with it first
        first, second = items[low], items[low + 1]
        if _fails(seen, [*context, first]):
            return [first]
        if _fails(seen, [*context, second]):
            return [second]
        high = low + 1 if _fails(seen, context + items[: low + 1]) else high
    last = items[high - 1]
    if high == 1 or _fails(seen, [*context, last]):
        return [last]
    return [*_needed(items[: high - 1], [*context, last], seen), last]


def _ahead(current: Sequence[str], seen: Mapping[Probe, Judged], first: Probe, width: int) -> list[Probe]:
    """`first`, and the probes the search would ask next whichever way the earlier ones end,
    nearest first: up to `width` to launch at once."""
    batch, frontier, index = [first], [(dict(seen), first)], 0
    while len(batch) < width and index < len(frontier):
        base, probe = frontier[index]
        index += 1
        for result in (Result.FAIL, Result.PASS):
            guess = {**base, probe: Judged(result, reproduced=result is Result.FAIL)}
            try:
                _minimal(current, guess)
            except _Ask as ask:
                if ask.probe not in batch:
                    batch.append(ask.probe)
                frontier.append((guess, ask.probe))
            if len(batch) >= width:
                break
    return batch


@dataclass(frozen=True)
class _Launch:
    new: list[Probe]  # to launch a first time
    again: list[Probe]  # to launch once more


@dataclass(frozen=True)
class _Shrink:
    to: Probe  # a smaller set that fails: the search goes on in it


def _confirmation(culprit: Sequence[str], seen: Mapping[Probe, Judged], confirm: bool) -> _Launch | _Shrink | str:
    """What must still be launched before the culprit is named, a smaller failing set, or why
    it does not stand (launches that disagree)."""
    whole = frozenset(culprit)
    disagree = contradicted(culprit, seen)
    if disagree:
        return disagree
    if GOOD in seen and seen[GOOD].result is not Result.PASS:
        return "the good launch did not come up"  # the caller says how, from its launches
    if len(whole) == 1:  # a lone factor: its launch showed the target; one without it must have come up
        return _Launch([GOOD] if _good_needed(culprit, seen) else [], [])
    witness_quota, culprit_quota = (WITNESS_LAUNCHES, CULPRIT_LAUNCHES) if confirm else (1, 1)
    new, again = [], []
    retry, shown = "(try a larger --repeat)", " + ".join(culprit)
    for factor in culprit:
        without = whole - {factor}
        judged = seen.get(without)
        if judged is None:
            new.append(without)
        elif judged.reproduced and judged.flaky:
            return f"flaky: without {factor} the target came too, when launched again {retry}"
        elif judged.result is Result.FAIL:
            if any(j.result is Result.PASS and without <= p for p, j in seen.items()):
                return f"flaky: without {factor} the target came, and a launch holding that came up {retry}"
            return _Shrink(without)  # never seen before, and it fails: the factor is not needed
        elif judged.launches < witness_quota and not judged.unbuildable:
            again.append(without)
    if new:  # each launch without one of them seen first: one may fail (a smaller culprit) or not come up
        return _Launch(new, [])
    if _good_needed(culprit, seen):  # a launch without one of them did not come up
        return _Launch([GOOD], [])  # before any launch again: is the good side itself broken?
    judged = seen[whole]
    if judged.result is not Result.FAIL:
        return f"flaky: {shown} did not bring the target again when launched again {retry}"
    if judged.launches < culprit_quota:
        again.append(whole)
    return _Launch(new, again)


def _good_needed(culprit: Sequence[str], seen: Mapping[Probe, Judged]) -> bool:
    """Whether the good launch must be made before the culprit is named: it was not, and for
    some factor of the culprit no launch without that factor came up (one that did holds the
    good launch, which is then taken to come up too)."""
    return GOOD not in seen and not all(came_up_without(factor, seen) for factor in culprit)


def came_up_without(factor: str, seen: Mapping[Probe, Judged]) -> bool:
    """Whether a launch without `factor` came up."""
    return any(j.result is Result.PASS and factor not in p for p, j in seen.items())


def contradicted(culprit: Sequence[str], known: Mapping[Probe, Judged]) -> str:
    """Why the launches so far contradict a culprit (as a flaky target does), or "": a
    launch holding all of it (and more) that came up."""
    whole = frozenset(culprit)
    for probe, judged in known.items():
        if whole <= probe and judged.result is Result.PASS:
            return f"flaky: a launch with {' + '.join(culprit)} came up (try a larger --repeat)"
    return ""


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
