"""`diagbench isolate` against its two baselines, on fake servers whose failure is a known
function of their flags and env (tests/ruleserver.py), in one run:

    python benchmarks/isolate.py [--quick] [--full-matrix]

For each scenario: the launches delta debugging used and whether its culprit was right;
toggling one factor at a time (run here, through the same launcher and judge); and the
full matrix (2^n launches: counted, and run for real only with --full-matrix; it names
every minimal failing set, but only when nothing is flaky).
Nothing here is a test: it measures and prints.
"""

from __future__ import annotations

import argparse
import random
import shlex
import statistics
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

from diagbench.execute.cancel import Cancel  # noqa: E402
from diagbench.execute.events import QuietEvents  # noqa: E402
from diagbench.isolate.problem import Problem, ServerRules, from_commands  # noqa: E402
from diagbench.isolate.record import Status, Step  # noqa: E402
from diagbench.isolate.run import (  # noqa: E402
    IsolateOptions,
    Prober,
    check_baselines,
    isolate,
    isolation_slots,
    open_isolation,
)
from diagbench.isolate.search import Result  # noqa: E402

SERVER = ROOT / "tests" / "ruleserver.py"
RULES = ServerRules(signatures=("pytorch", "sglang"), timeout=30.0, grace=2.0)


class Quiet(QuietEvents):
    def on_step(self, step: Step) -> None:
        return None


@dataclass(frozen=True)
class Case:
    """One isolation to run: the factors of the bad line, the guilty ones, the failure's odds."""

    words: tuple[str, ...]  # the bad line's extra words (factors); env factors as NAME=value
    guilty: tuple[str, ...]  # the rule's conditions
    rate: float = 1.0
    repeat: int = 1

    def lines(self) -> tuple[str, str]:
        rule = f"--rule={','.join(self.guilty)}=>capture"
        rate = ["--rate", str(self.rate)] if self.rate < 1 else []
        base = [shlex.quote(sys.executable), shlex.quote(str(SERVER)), "--port", "{port}", rule, *rate]
        env = [w for w in self.words if not w.startswith("-")]
        args = [w for w in self.words if w.startswith("-")]
        good_env = [f"{w.split('=')[0]}=0" for w in env]
        return " ".join([*good_env, *base]), " ".join([*env, *base, *args])

    def culprit_names(self) -> tuple[str, ...]:
        return tuple(factor_name(g) for g in self.guilty)


def eight() -> list[str]:
    return ["KERNEL=1", "GRAPHS=1", "FAST=1", "--compile", "--no-warmup", "--chunked", "--max-bs=64", "--tp=2"]


def ten() -> list[str]:
    return [*eight(), "--spec-decode", "LOGLEVEL=1"]


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
        answer = "right" if set(iso.culprit) == set(case.culprit_names()) else f"WRONG {'+'.join(iso.culprit)}"
    elif iso.status is Status.NOT_ISOLABLE:
        right = set(iso.suspects) == set(case.culprit_names())
        answer = "not isolable (suspect right)" if right else f"not isolable (suspects {'+'.join(iso.suspects)})"
    else:
        answer = f"{iso.status.value}: {iso.reason}"
    return iso.launches, answer, time.monotonic() - started


def run_one_at_a_time(case: Case, folder: Path) -> tuple[int, str]:
    """Both baselines, then each factor alone on the good launch; guilty = those that fail alone."""
    problem = problem_of(case, folder)
    options = IsolateOptions(folder / "runs", repeat=case.repeat)
    slots = isolation_slots(problem, options)
    prober = Prober(problem, options, open_isolation(problem, options, slots, Quiet()), Quiet(), slots, Cancel())
    try:
        names = [f.name for f in problem.space.factors]
        good, bad = prober.launch([((), "good"), (tuple(names), "bad")])
        prober.target, trouble, _ = check_baselines(good, bad)
        if trouble or prober.target is None:
            return len(prober.records), f"baselines: {trouble}"
        results = prober.test([frozenset({n}) for n in names])
    finally:
        prober.cancel.close()
    guilty = [n for n, judged in zip(names, results, strict=True) if judged.result is Result.FAIL]
    flaky = [n for n, judged in zip(names, results, strict=True) if judged.flaky]
    if set(guilty) == set(case.culprit_names()):
        return len(prober.records), "right"
    if not guilty:
        return len(prober.records), "none fails alone" + (f" ({len(flaky)} flaky)" if flaky else "")
    return len(prober.records), f"WRONG {'+'.join(guilty)}"


def scenario(title: str, cases: Sequence[Case], tmp: Path) -> None:
    rows = []
    for i, case in enumerate(cases):
        launches, answer, seconds = run_isolate(case, tmp / f"{title[:5]}-{i}-dd")
        toggled, toggled_answer = run_one_at_a_time(case, tmp / f"{title[:5]}-{i}-oat")
        rows.append((launches, answer, seconds, toggled, toggled_answer))
    n, repeat = len(cases[0].words), cases[0].repeat
    launches = [r[0] for r in rows]
    print(f"\n{title} ({len(cases)} isolations, {n} differences, --repeat {repeat})")
    print(
        f"  diagbench isolate:  launches min {min(launches)}, median {statistics.median(launches):g}, "
        f"max {max(launches)}; {statistics.median(r[2] for r in rows):.1f} s median wall time"
    )
    print(f"                      answers: {tally(r[1] for r in rows)}")
    toggled = [r[3] for r in rows]
    print(f"  one at a time:      launches median {statistics.median(toggled):g}; answers: {tally(r[4] for r in rows)}")
    per_launch = statistics.median(r[2] / r[0] for r in rows)
    print(
        f"  full matrix:        {2**n * repeat} launches (counted), "
        f"~{2**n * repeat * per_launch:.0f} s at this machine's {per_launch:.2f} s per launch"
    )


def tally(answers: Iterable[str]) -> str:
    return ", ".join(f"{answer} x{n}" for answer, n in Counter(answers).most_common())


def full_matrix(case: Case, tmp: Path) -> None:
    """Every subset of the factors, launched: the baseline's real cost for one case."""
    problem = problem_of(case, tmp)
    options = IsolateOptions(tmp / "runs", repeat=case.repeat)
    slots = isolation_slots(problem, options)
    prober = Prober(problem, options, open_isolation(problem, options, slots, Quiet()), Quiet(), slots, Cancel())
    names = [f.name for f in problem.space.factors]
    started = time.monotonic()
    try:
        good, bad = prober.launch([((), "good"), (tuple(names), "bad")])
        prober.target, _, _ = check_baselines(good, bad)
        subsets = [frozenset(n for j, n in enumerate(names) if mask >> j & 1) for mask in range(1, 2 ** len(names) - 1)]
        results = prober.test(subsets)
    finally:
        prober.cancel.close()
    failing = [s for s, r in zip(subsets, results, strict=True) if r.result is Result.FAIL]
    minimal = [s for s in failing if not any(o < s for o in failing)]
    print(
        f"\nfull matrix, run for real (one culprit among {len(names)}): {len(prober.records)} launches, "
        f"{time.monotonic() - started:.0f} s; minimal failing sets: {[sorted(m) for m in minimal]}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer isolations per scenario")
    parser.add_argument("--full-matrix", action="store_true", help="also run one full matrix (256 launches)")
    args = parser.parse_args()
    rng = random.Random(12)
    words8, words10 = eight(), ten()
    singles = [Case(tuple(words8), (w,)) for w in words8]
    pairs = [Case(tuple(words10), tuple(rng.sample(words10, 2))) for _ in range(3 if args.quick else 6)]
    flaky = [Case(tuple(words8), (words8[3],), rate=0.7, repeat=3) for _ in range(2 if args.quick else 6)]
    with tempfile.TemporaryDirectory() as folder:
        tmp = Path(folder)
        print("isolate: launches to the culprit, beside one-at-a-time and the full matrix (same server, same run)")
        scenario("one culprit among 8", singles[:4] if args.quick else singles, tmp)
        scenario("a pair guilty only together among 10", pairs, tmp)
        scenario("flaky: the culprit fails 70% of its launches, among 8", flaky, tmp)
        if args.full_matrix:
            full_matrix(singles[3], tmp / "full")


if __name__ == "__main__":
    main()
