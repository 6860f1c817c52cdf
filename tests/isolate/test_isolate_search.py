"""Delta debugging over factors, driven by a pure predicate (no launch)."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import pytest

from diagbench.isolate.search import (
    Judged,
    Probe,
    Result,
    Target,
    conclude,
    ddmin,
    judge_launches,
    suspects,
)
from diagbench.vocab import Outcome

FACTORS = [f"f{i}" for i in range(10)]


class Oracle:
    """A predicate over probes that remembers what it was asked, and fails on a repeat question."""

    def __init__(self, judge: Callable[[Probe], Judged]):
        self.judge = judge
        self.asked: list[Probe] = []
        self.batches: list[list[Probe]] = []

    def __call__(self, batch: Sequence[Probe]) -> list[Judged]:
        self.batches.append(list(batch))
        for probe in batch:
            assert probe not in self.asked, f"asked twice: {sorted(probe)}"
            assert probe not in (frozenset(), frozenset(FACTORS)), "the baselines are known"
            self.asked.append(probe)
        return [self.judge(p) for p in batch]


def fails_with(*needed: str) -> Callable[[Probe], Judged]:
    return lambda p: Judged(Result.FAIL, reproduced=True) if set(needed) <= p else Judged(Result.PASS)


@pytest.mark.parametrize("culprit", FACTORS)
def test_one_culprit_in_a_few_probes(culprit):
    oracle = Oracle(fails_with(culprit))
    found, _ = ddmin(FACTORS, oracle)
    assert found == (culprit,)
    assert len(oracle.asked) <= 2 * 4  # log2(10) levels, at most two probes each


@pytest.mark.parametrize(("a", "b"), list(itertools.combinations(FACTORS, 2)))
def test_a_pair_guilty_only_together(a, b):
    oracle = Oracle(fails_with(a, b))
    found, known = ddmin(FACTORS, oracle)
    assert found == (a, b)
    assert conclude(found, known).isolated


def test_batches_are_as_wide_as_asked_and_the_answer_is_the_same():
    for width in (1, 2, 4):
        oracle = Oracle(fails_with("f3", "f7"))
        found, _ = ddmin(FACTORS, oracle, width=width)
        assert found == ("f3", "f7")
        assert max(len(b) for b in oracle.batches) <= width
        assert any(len(b) == width for b in oracle.batches)


def test_a_different_failure_never_narrows_the_search():
    def judge(p: Probe) -> Judged:
        if {"f1", "f2"} <= p:
            return Judged(Result.FAIL, reproduced=True)
        return Judged(Result.UNRESOLVED) if "f1" in p else Judged(Result.PASS)

    found, known = ddmin(FACTORS, Oracle(judge))
    assert found == ("f1", "f2")
    assert known[frozenset({"f1"})].result is Result.UNRESOLVED
    assert conclude(found, known).isolated  # without f1 it passes: f1 is needed


def test_when_every_smaller_set_fails_otherwise_it_is_not_isolable():
    def judge(p: Probe) -> Judged:
        return Judged(Result.FAIL, reproduced=True) if {"f1", "f2"} <= p else Judged(Result.UNRESOLVED)

    found, known = ddmin(FACTORS, Oracle(judge))
    verdict = conclude(found, known)
    assert not verdict.isolated
    assert verdict.reason == "every launch without one of these factors failed some other way"


def test_a_flaky_neighbour_makes_it_not_isolable_and_names_the_suspect():
    def judge(p: Probe) -> Judged:
        return Judged(Result.UNRESOLVED, flaky=True, reproduced=True) if "f4" in p else Judged(Result.PASS)

    found, known = ddmin(FACTORS, Oracle(judge))
    verdict = conclude(found, known)
    assert not verdict.isolated and verdict.reason.startswith("flaky: the target came and went between launches")
    assert suspects(FACTORS, known) == ("f4",)


def test_a_lucky_pass_of_an_intermittent_target_cannot_confirm_a_wrong_culprit():
    # f4 fails most launches; {f4} alone happened to come up every time, {f4, f5} failed every time
    def judge(p: Probe) -> Judged:
        if p == frozenset({"f4"}):
            return Judged(Result.PASS)
        if "f4" in p and "f5" in p:
            return Judged(Result.FAIL, reproduced=True)
        return Judged(Result.UNRESOLVED, flaky=True, reproduced=True) if "f4" in p else Judged(Result.PASS)

    found, known = ddmin(FACTORS, Oracle(judge))
    assert found == ("f4", "f5")  # what the launches alone would say
    assert not conclude(found, known).isolated


def test_a_flaky_probe_that_never_showed_the_target_does_not_block_the_answer():
    def judge(p: Probe) -> Judged:
        if "f2" in p:
            return Judged(Result.FAIL, reproduced=True)
        return Judged(Result.UNRESOLVED, flaky=True) if "f7" in p else Judged(Result.PASS)  # oom or crash, by turns

    found, known = ddmin(FACTORS, Oracle(judge))
    assert found == ("f2",) and conclude(found, known).isolated


@dataclass(frozen=True)
class Launch:
    outcome: Outcome
    failure_class: str | None = None


CAPTURE = Launch(Outcome.FAILED, "cuda_graph_capture")
TARGET = Target(Outcome.FAILED, "cuda_graph_capture")


@pytest.mark.parametrize(
    ("launches", "expected"),
    [
        ([CAPTURE, CAPTURE], Judged(Result.FAIL, reproduced=True)),
        ([Launch(Outcome.READY)] * 3, Judged(Result.PASS)),
        ([Launch(Outcome.FAILED, "oom")], Judged(Result.UNRESOLVED)),
        ([Launch(Outcome.CRASHED)], Judged(Result.UNRESOLVED)),
        ([CAPTURE, Launch(Outcome.READY)], Judged(Result.UNRESOLVED, flaky=True, reproduced=True)),
        ([Launch(Outcome.FAILED, "oom"), CAPTURE], Judged(Result.UNRESOLVED, flaky=True, reproduced=True)),
    ],
)
def test_a_probe_is_judged_over_all_its_launches(launches, expected):
    assert judge_launches(launches, TARGET) == expected
