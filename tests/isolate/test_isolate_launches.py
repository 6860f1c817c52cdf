"""Launches to the culprit on shapes the search was not tuned on (neither the benchmark's
cases nor the other tests'), the bad launch included, with the confirmation at `--repeat 1`:
a lone culprit is named after about log2(n) + 1 probes, a pair with a decoy that fails
differently after about 15 launches whatever the number of differences."""

from __future__ import annotations

import itertools
import statistics
from collections.abc import Callable, Sequence

import pytest

from diagbench.isolate.search import Judged, Probe, Result, conclude, search

FAIL, PASS, OTHER = Judged(Result.FAIL, reproduced=True), Judged(Result.PASS), Judged(Result.UNRESOLVED)
NAMES = [f"--x{i}" for i in range(12)]
BASELINES = 1  # the bad launch, before any probe (the good one is a probe, where the search asks for it)


def launches(factors: Sequence[str], judge: Callable[[Probe], Judged]) -> tuple[int, tuple[str, ...]]:
    """Launches of one isolation at --repeat 1 (each probe's launches, again ones too), and its culprit."""
    seen: dict[Probe, list[Judged]] = {}

    def test(batch: Sequence[Probe], again: bool) -> list[Judged]:
        out = []
        for probe in batch:
            assert again or probe not in seen, f"launched a second time unasked: {sorted(probe)}"
            runs = seen.setdefault(probe, [])
            runs.append(judge(probe))
            out.append(Judged(runs[0].result, reproduced=runs[0].reproduced, launches=len(runs)))
        return out

    found = search(factors, test, confirm=True)
    assert not found.trouble and conclude(found.culprit, found.known).isolated
    return BASELINES + sum(len(runs) for runs in seen.values()), found.culprit


def guilty(*needed: str, decoy: str | None = None) -> Callable[[Probe], Judged]:
    def judge(probe: Probe) -> Judged:
        if set(needed) <= probe:
            return FAIL
        return OTHER if decoy is not None and decoy in probe else PASS

    return judge


@pytest.mark.parametrize(("n", "median", "most"), [(6, 5, 5), (7, 5, 5), (12, 6, 6)])
def test_a_lone_culprit_takes_about_log2_n_probes_and_is_never_launched_again(n, median, most):
    factors = NAMES[:n]
    counts = []
    for culprit in factors:
        count, found = launches(factors, guilty(culprit))
        assert found == (culprit,)
        counts.append(count)
    assert statistics.median(counts) <= median and max(counts) <= most, counts


@pytest.mark.parametrize(("n", "median", "most"), [(7, 13, 14), (10, 14, 16), (11, 14, 16)])
def test_a_pair_with_a_decoy_takes_about_fifteen_launches_confirmation_included(n, median, most):
    factors = NAMES[:n]
    counts = []
    for a, b in itertools.combinations(factors, 2):
        for decoy in (f for f in factors if f not in (a, b)):
            count, found = launches(factors, guilty(a, b, decoy=decoy))
            assert found == (a, b)
            counts.append(count)
    assert statistics.median(counts) <= median and max(counts) <= most, (statistics.median(counts), max(counts))
