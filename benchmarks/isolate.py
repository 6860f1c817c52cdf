"""`diagbench isolate` beside textbook delta debugging, on fake servers whose failure is a known
function of their flags and env (tests/ruleserver.py), in one run:

    python benchmarks/isolate.py [--quick] [--no-record]

For each case: the launches `diagbench isolate` made (the bad launch, the good one where it
was made, and any confirming launch included) and whether its answer was right; textbook
ddmin (Zeller and Hildebrandt 2002, with its cache of outcomes, so no configuration twice)
run through the same launcher and judge, plus the bad launch (ddmin takes the good one as
given, so it is not counted); and diagbench before this round (both baselines, that ddmin,
then its confirmation at --repeat 1: the culprit twice more, without each of its factors
once more for two or more, its complement once; computed from ddmin's launches). The shapes the search
was tuned on are marked; the others were not looked at while it was chosen (held out).

Then, without launching: how often a culprit that brings the failure only part of the time
gets an innocent partner named at --repeat 1 (a seeded simulation of the same search code
and of the old one), the protection the confirmation is for.
Nothing here is a test: it measures and prints (and records benchmarks/results/isolate.json).
"""

from __future__ import annotations

import argparse
import itertools
import random
import shlex
import statistics
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from common import RULESERVER, machine, record
from diagbench.execute.cancel import Cancel
from diagbench.execute.events import QuietEvents
from diagbench.isolate.problem import Problem, ServerRules, from_commands
from diagbench.isolate.record import Status, Step
from diagbench.isolate.run import IsolateOptions, Prober, check_bad, isolate, isolation_slots, open_isolation
from diagbench.isolate.search import Judged, Probe, Result, conclude, search

RULES = ServerRules(signatures=("pytorch", "sglang"), timeout=30.0, grace=2.0)
WORDS = [
    "KERNEL=1", "GRAPHS=1", "FAST=1", "--compile", "--no-warmup", "--chunked", "--max-bs=64", "--tp=2",
    "--spec-decode", "LOGLEVEL=1", "--page-size=32", "ATTN=flash", "--quant=fp8", "--ep=4", "SEED=7", "--nccl-p2p",
]  # fmt: skip


class Quiet(QuietEvents):
    def on_step(self, step: Step) -> None:
        return None


@dataclass(frozen=True)
class Case:
    """One isolation: the bad line's extra words (factors), the rules that fail, the failure's odds."""

    words: tuple[str, ...]
    guilty: tuple[str, ...]  # the target's conditions (all needed)
    decoy: tuple[str, ...] = ()  # conditions of a different failure (oom), checked after the target's
    also: tuple[str, ...] = ()  # a second, separate culprit: each of `guilty` and `also` fails alone
    rate: float = 1.0
    repeat: int = 1

    def lines(self) -> tuple[str, str]:
        rules = [f"--rule={','.join(self.guilty)}=>capture"]
        rules += [f"--rule={','.join(self.also)}=>capture"] if self.also else []
        rules += [f"--rule={','.join(self.decoy)}=>oom"] if self.decoy else []
        rate = ["--rate", str(self.rate)] if self.rate < 1 else []
        base = [shlex.quote(sys.executable), shlex.quote(str(RULESERVER)), "--port", "{port}", *rules, *rate]
        env = [w for w in self.words if not w.startswith("-")]
        args = [w for w in self.words if w.startswith("-")]
        good_env = [f"{w.split('=')[0]}=0" for w in env]
        return " ".join([*good_env, *base]), " ".join([*env, *base, *args])

    def right(self, culprit: Sequence[str]) -> bool:
        answers = [self.guilty, self.also] if self.also else [self.guilty]
        return any({factor_name(w) for w in answer} == set(culprit) for answer in answers)

    def names(self) -> tuple[str, ...]:
        return tuple(factor_name(g) for g in self.guilty)


def factor_name(word: str) -> str:
    return word.split("=")[0]


def problem_of(case: Case, folder: Path) -> Problem:
    good, bad = case.lines()
    return from_commands(good, bad, [], [], RULES, folder)


def run_isolate(case: Case, folder: Path) -> tuple[int, str, float]:
    """diagbench isolate: launches, the answer in words, seconds."""
    started = time.monotonic()
    result = isolate(problem_of(case, folder), IsolateOptions(folder / "runs", repeat=case.repeat), Quiet())
    iso = result.isolation
    if iso.status is Status.FOUND:
        answer = "right" if case.right(iso.culprit) else f"WRONG {'+'.join(iso.culprit)}"
    elif iso.status is Status.NOT_ISOLABLE:
        answer = "not isolable (suspect right)" if set(iso.suspects) == set(case.names()) else "not isolable"
    else:
        answer = f"{iso.status.value}: {iso.reason}"
    return iso.launches, answer, time.monotonic() - started


def textbook_ddmin(factors: Sequence[str], fails: Callable[[Probe], bool]) -> tuple[str, ...]:
    """Zeller and Hildebrandt's ddmin: subsets, then complements, then twice the granularity;
    `fails` keeps the outcomes (the paper's cache)."""
    current, n = list(factors), 2
    while len(current) >= 2:
        size, extra = divmod(len(current), n)
        bounds = [i * size + min(i, extra) for i in range(n + 1)]
        subsets = [current[bounds[i] : bounds[i + 1]] for i in range(n) if bounds[i] < bounds[i + 1]]
        complements = [[f for f in current if f not in s] for s in subsets] if n > 2 else []
        subset = next((s for s in subsets if fails(frozenset(s))), None)
        complement = None if subset is not None else next((c for c in complements if fails(frozenset(c))), None)
        if subset is not None:
            current, n = subset, 2
        elif complement is not None:
            current, n = complement, max(n - 1, 2)
        elif n >= len(current):
            break
        else:
            n = min(len(current), 2 * n)
    return tuple(current)


def run_textbook(case: Case, folder: Path) -> tuple[int, str, int]:
    """Textbook ddmin through the same launcher and judge: launches (the bad one included, the
    good one taken as given), the answer, and its culprit's size (for the old confirmation's count)."""
    problem = problem_of(case, folder)
    options = IsolateOptions(folder / "runs", repeat=case.repeat)
    slots = isolation_slots(problem, options)
    prober = Prober(problem, options, open_isolation(problem, options, slots, Quiet()), Quiet(), slots, Cancel())
    try:
        names = [f.name for f in problem.space.factors]
        (bad,) = prober.launch([(tuple(names), "bad")])
        prober.target, trouble, _ = check_bad(bad)
        if trouble:
            return len(prober.records), f"baselines: {trouble}", 0
        whole = frozenset(names)
        culprit = textbook_ddmin(names, lambda p: p == whole or prober.test([p])[0].result is Result.FAIL)
    finally:
        prober.cancel.close()
    return len(prober.records), "right" if case.right(culprit) else f"WRONG {'+'.join(culprit)}", len(culprit)


def before(textbook: int, size: int, repeat: int) -> int:
    """diagbench's launches before this round: the good launch, ddmin's, then its confirmation at --repeat 1."""
    good = 1 + textbook
    return good + (2 + (size if size > 1 else 0) + 1) * repeat if repeat == 1 and size else good


def scenario(title: str, tuned: bool, cases: Sequence[Case], tmp: Path) -> dict[str, Any]:
    rows = []
    for i, case in enumerate(cases):
        launches, answer, seconds = run_isolate(case, tmp / f"{title[:8]}-{i}-new")
        textbook, textbook_answer, size = run_textbook(case, tmp / f"{title[:8]}-{i}-dd")
        rows.append((launches, answer, seconds, textbook, textbook_answer, before(textbook, size, case.repeat)))
    n, repeat = len(cases[0].words), cases[0].repeat
    figures = {
        "title": title,
        "tuned": tuned,
        "cases": len(cases),
        "factors": n,
        "repeat": repeat,
        "diagbench": spread(r[0] for r in rows),
        "answers": tally(r[1] for r in rows),
        "seconds_median": round(statistics.median(r[2] for r in rows), 1),
        "ddmin": spread(r[3] for r in rows),
        "ddmin_answers": tally(r[4] for r in rows),
        "before": spread(r[5] for r in rows),
        "per_case": [[r[0], r[3], r[5]] for r in rows],
    }
    shape = "tuned on" if tuned else "held out"
    print(f"\n{title} ({len(cases)} isolations, {n} differences, --repeat {repeat}; {shape})")
    print(
        f"  diagbench isolate:       {show(figures['diagbench'])}; {figures['seconds_median']} s median; {figures['answers']}"
    )
    print(f"  textbook ddmin (cached): {show(figures['ddmin'])}; {figures['ddmin_answers']}")
    print(f"  diagbench before:        {show(figures['before'])} (good, bad, ddmin, its confirmation)")
    print(f"  per case (this, ddmin, before): {' '.join('/'.join(map(str, c)) for c in figures['per_case'])}")
    return figures


def spread(values: Iterable[int]) -> dict[str, float]:
    ordered = sorted(values)
    return {"min": ordered[0], "median": statistics.median(ordered), "max": ordered[-1]}


def show(s: dict[str, float]) -> str:
    return f"launches min {s['min']:g}, median {s['median']:g}, max {s['max']:g}"


def tally(answers: Iterable[str]) -> str:
    return ", ".join(f"{answer} x{n}" for answer, n in Counter(answers).most_common())


# -- the protection, simulated: a culprit that brings the target only part of the time ----------


class Coin:
    """A flaky server as a predicate: the target with probability `rate` when `needed` is applied."""

    def __init__(self, needed: Probe, rate: float, rng: random.Random):
        self.needed, self.rate, self.rng = needed, rate, rng

    def __call__(self, probe: Probe) -> bool:
        return self.needed <= probe and self.rng.random() < self.rate


def simulate_new(factors: Sequence[str], coin: Coin) -> str:
    if not coin(frozenset(factors)):
        return "bad came up"
    outcomes: dict[Probe, list[bool]] = {}

    def test(batch: Sequence[Probe], again: bool) -> list[Judged]:
        out = []
        for probe in batch:
            outcomes.setdefault(probe, []).append(coin(probe))
            seen = outcomes[probe]
            result = Result.FAIL if all(seen) else Result.PASS if not any(seen) else Result.UNRESOLVED
            out.append(Judged(result, flaky=0 < sum(seen) < len(seen), reproduced=any(seen), launches=len(seen)))
        return out

    found = search(factors, test, confirm=True)
    if found.trouble or not conclude(found.culprit, found.known).isolated:
        return "not isolable"
    return "right" if found.culprit == tuple(sorted(coin.needed)) else "innocent named"


def simulate_before(factors: Sequence[str], coin: Coin) -> str:
    """The search and confirmation this one replaced: ddmin, then the culprit twice more, each
    launch without one of its factors once more, the complement once; a launch holding the
    culprit that came up contradicts it."""
    if not coin(frozenset(factors)):
        return "bad came up"
    seen: dict[Probe, bool] = {frozenset(): False, frozenset(factors): True}

    def fails(probe: Probe) -> bool:
        if probe not in seen:
            seen[probe] = coin(probe)
        return seen[probe]

    culprit = frozenset(textbook_ddmin(factors, fails))
    again = [coin(culprit), coin(culprit)]
    without = [coin(culprit - {f}) for f in culprit] if len(culprit) > 1 else []
    coin(frozenset(factors) - culprit)  # the complement: a note only
    if not all(again) or any(without) or any(not v and culprit <= p for p, v in seen.items()):
        return "not isolable"
    return "right" if culprit == coin.needed else "innocent named"


def protection(runs: int) -> dict[str, Any]:
    factors = [f"--f{i}" for i in range(1, 7)]  # tests/isolate/test_isolate_flaky.py's shape
    figures: dict[str, Any] = {"runs": runs, "factors": len(factors), "rates": {}}
    print(f"\nprotection at --repeat 1, simulated ({runs} seeded isolations each; the culprit is one of 6)")
    for rate in (0.5, 0.7, 0.9):
        row = {}
        for name, simulate in (("this", simulate_new), ("before", simulate_before)):
            rng = random.Random(f"{rate}")
            counts = Counter(simulate(factors, Coin(frozenset({"--f3"}), rate, rng)) for _ in range(runs))
            row[name] = {k: counts[k] for k in ("right", "innocent named", "not isolable", "bad came up")}
        figures["rates"][str(rate)] = row
        this, old = row["this"], row["before"]
        print(
            f"  culprit fails {rate:.0%} of launches: innocent named {this['innocent named'] / runs:6.2%} of isolations, "
            f"right {this['right'] / runs:6.2%}  (before: innocent {old['innocent named'] / runs:6.2%}, "
            f"right {old['right'] / runs:6.2%})"
        )
    return figures


# -- every placement, counted without launching: the same search code, a predicate for a server --


def counted(factors: Sequence[str], guilty: frozenset[str], decoy: frozenset[str] | None) -> int:
    """Launches `isolate` makes at --repeat 1 for this placement (the bad one included), by a
    predicate that fails like the rule server: the target where `guilty` is applied, else a
    different failure where `decoy` is."""
    outcomes: dict[Probe, int] = {}

    def test(batch: Sequence[Probe], again: bool) -> list[Judged]:
        out = []
        for probe in batch:
            outcomes[probe] = outcomes.get(probe, 0) + 1
            if guilty <= probe:
                out.append(Judged(Result.FAIL, reproduced=True, launches=outcomes[probe]))
            else:
                other = decoy is not None and decoy <= probe
                out.append(Judged(Result.UNRESOLVED if other else Result.PASS, launches=outcomes[probe]))
        return out

    found = search(factors, test, confirm=True)
    assert set(found.culprit) == guilty, (sorted(guilty), found.culprit)
    return 1 + sum(outcomes.values())


def ddmin_counted(factors: Sequence[str], guilty: frozenset[str]) -> int:
    """Textbook ddmin's launches for the same placement (the bad one included, the good one given)."""
    seen: dict[Probe, bool] = {frozenset(factors): True}

    def fails(probe: Probe) -> bool:
        if probe not in seen:
            seen[probe] = guilty <= probe
        return seen[probe]

    textbook_ddmin(factors, fails)
    return len(seen)


def placements() -> dict[str, Any]:
    w8, w9 = WORDS[:8], WORDS[:9]
    pairs = list(itertools.combinations(w9, 2))
    shapes: dict[str, list[tuple[frozenset[str], frozenset[str] | None]]] = {
        "one culprit among 8, each position": [(frozenset({g}), None) for g in w8],
        "a pair among 9, each placement": [(frozenset(p), None) for p in pairs],
        "a pair among 9 and a decoy, each placement": [
            (frozenset(p), frozenset({d})) for p in pairs for d in w9 if d not in p
        ],
    }
    print("\nevery placement, counted with the search code and a predicate for the server (no launch;")
    print("the bad launch included, --repeat 1), beside textbook ddmin counted the same way")
    figures = {}
    for title, cases in shapes.items():
        factors = w8 if "among 8" in title else w9
        counts = [counted(factors, guilty, decoy) for guilty, decoy in cases]
        textbook = [ddmin_counted(factors, guilty) for guilty, _ in cases]
        histogram = dict(sorted(Counter(counts).items()))
        figures[title] = {"placements": len(cases), "diagbench": spread(counts), "ddmin": spread(textbook)}
        figures[title]["histogram"] = histogram
        each = ", ".join(f"{n} launches x{k}" for n, k in histogram.items())
        print(f"  {title} ({len(cases)}):")
        print(f"    diagbench isolate: {show(spread(counts))} ({each})")
        print(f"    textbook ddmin:    {show(spread(textbook))}")
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer isolations per scenario")
    parser.add_argument("--no-record", action="store_true", help="do not write benchmarks/results/isolate.json")
    args = parser.parse_args()
    started = machine()
    rng = random.Random(36)
    w8, w9, w16 = WORDS[:8], WORDS[:9], WORDS[:16]
    singles = [Case(tuple(w8), (w,)) for w in w8]
    pairs: list[Case] = []
    for _ in range(3 if args.quick else 6):
        a, b, decoy = rng.sample(w9, 3)
        pairs.append(Case(tuple(w9), (a, b), decoy=(decoy,)))
    held = {
        "one culprit among 16": [Case(tuple(w16), (w16[i],)) for i in (0, 5, 10, 15)],
        "a pair at the ends among 9, a decoy between": [
            Case(tuple(w9), (w9[0], w9[8]), decoy=(w9[4],)),
            Case(tuple(w9), (w9[7], w9[8]), decoy=(w9[0],)),
            Case(tuple(w9), (w9[0], w9[1]), decoy=(w9[8],)),
        ],
        "a pair among 12, the decoy fails with one of them": [
            Case(tuple(WORDS[:12]), (WORDS[2], WORDS[9]), decoy=(WORDS[5], WORDS[2])),
            Case(tuple(WORDS[:12]), (WORDS[6], WORDS[11]), decoy=(WORDS[0], WORDS[11])),
        ],
        "three guilty together among 10": [Case(tuple(WORDS[:10]), (WORDS[1], WORDS[4], WORDS[8]))],
        "two separate culprits among 8 (either is right)": [Case(tuple(w8), (w8[2],), also=(w8[6],))],
    }
    flaky = [Case(tuple(w8), (w8[3],), rate=0.7, repeat=3) for _ in range(2 if args.quick else 3)]
    figures: dict[str, Any] = {"scenarios": []}
    with tempfile.TemporaryDirectory() as folder:
        tmp = Path(folder)
        print(
            "isolate: launches to the culprit (the bad one and any good one included), beside textbook ddmin "
            "(the bad one included), same server, same run"
        )
        figures["scenarios"].append(scenario("one culprit among 8", True, singles[::2] if args.quick else singles, tmp))
        figures["scenarios"].append(scenario("a pair among 9, a decoy that fails differently", True, pairs, tmp))
        for title, cases in held.items():
            figures["scenarios"].append(scenario(title, False, cases, tmp))
        figures["scenarios"].append(scenario("flaky: the culprit fails 70% of its launches", False, flaky, tmp))
    figures["placements"] = placements()
    figures["protection"] = protection(2000 if args.quick else 20000)
    if not args.no_record:
        print(f"\nrecorded: {record('isolate', figures, started)}")


if __name__ == "__main__":
    main()
