"""Two things that grew faster than their input, beside the algorithms they replaced, in one run:

    python benchmarks/scale.py [--quick]

1. Rendering an isolation of many factors: `render/grid.py:split_axes` tried every split of
   the axes into rows and columns (2^n); now only splits narrow enough to draw. The old
   algorithm (kept below) on the sizes it can finish, the new one on 60 factors, then a real
   `diagbench isolate` of 60 factors and `report --format html` of that run, end to end.
2. `plan --stop-when-decided`: `judge/decide.py:decision_order` picked the next attempt by
   scanning every attempt left (quadratic); now one pick per hypothesis, then one sort. The
   old order (kept below) on 1k cells, the new on 1k and 10k (the same order, checked), then
   `diagbench plan --stop-when-decided` of a 10k-cell spec, end to end.
Nothing here is a test: it measures and prints.
"""

from __future__ import annotations

import argparse
import math
import shlex
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from itertools import combinations
from pathlib import Path

import yaml

from common import RULESERVER
from diagbench.judge.decide import decision_order
from diagbench.render.grid import MAX_COLUMNS, split_axes
from diagbench.spec.load import load_spec
from diagbench.spec.matrix import selects
from diagbench.spec.plan import PlannedAttempt, plan_attempts


def old_split_axes(levels: Mapping[str, Sequence[str]]) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The previous split_axes, as it was: every split tried."""
    names = list(levels)
    if len(names) < 2:
        return tuple(names), ()
    best = None
    for size in range(1, len(names)):
        for cols in combinations(range(len(names)), size):
            width = math.prod(len(levels[names[i]]) for i in cols)
            height = math.prod(len(levels[n]) for i, n in enumerate(names) if i not in cols)
            if width > MAX_COLUMNS:
                continue
            suffix = cols == tuple(range(len(names) - size, len(names)))
            score = (abs(math.log(height) - math.log(width)), not suffix, tuple(-i for i in cols))
            if best is None or score < best[0]:
                best = (score, cols)
    chosen = best[1] if best else (len(names) - 1,)
    return tuple(n for i, n in enumerate(names) if i not in chosen), tuple(names[i] for i in chosen)


def old_decision_order(planned, hypotheses, expectations) -> list[PlannedAttempt]:
    """The previous decision_order, as it was: a scan of every attempt left per pick."""
    decides = {p.name: [h.id for h in hypotheses if selects(h.when, p.cell.params)] for p in planned}
    expected = {p.name: any(selects(e.when, p.cell.params) for e in expectations) for p in planned}
    left = list(planned)
    tried: set[str] = set()
    order = []
    while left:

        def key(p):
            mine = decides[p.name]
            return (
                bool(mine) or expected[p.name],
                len(set(mine) - tried),
                -p.repeat,
                len(mine),
                expected[p.name],
                -p.cell.index,
            )

        best = max(left, key=key)
        left.remove(best)
        order.append(best)
        tried.update(decides[best.name])
    return order


def timed(action) -> tuple[float, object]:
    started = time.perf_counter()
    value = action()
    return time.perf_counter() - started, value


def bench_split(sizes_old: Sequence[int]) -> None:
    print("split_axes, n factors of 2 labels each (seconds)")
    print(f"  {'n':>3}  {'old':>9}  {'new':>9}  same split")
    for n in [*sizes_old, 24, 60]:
        levels = {f"f{i}": ["good", "bad"] for i in range(n)}
        new_s, new = timed(lambda: split_axes(levels))  # noqa: B023  # called at once
        if n in sizes_old:
            old_s, old = timed(lambda: old_split_axes(levels))  # noqa: B023
            print(f"  {n:>3}  {old_s:>9.3f}  {new_s:>9.4f}  {old == new}")
        else:
            print(f"  {n:>3}  {'(2^n: not run)':>9}  {new_s:>9.4f}")


def bench_isolate(factors: int) -> None:
    """A real isolation of `factors` flags (the culprit one of them) and its HTML report."""
    with tempfile.TemporaryDirectory() as folder:
        base = [shlex.quote(sys.executable), shlex.quote(str(RULESERVER)), "--port", "{port}", "--rule=--f7=>oom"]
        good, bad = " ".join(base), " ".join([*base, *(f"--f{i}" for i in range(factors))])
        argv = [sys.executable, "-m", "diagbench", "isolate", "--good", good, "--bad", bad, "--json"]
        took, done = timed(lambda: subprocess.run(argv, capture_output=True, text=True, cwd=folder, timeout=900))
        culprit = yaml.safe_load(done.stdout).get("culprit") if done.returncode == 0 else done.stderr[-300:]
        run = next((Path(folder) / "runs").glob("2*"))
        html = [sys.executable, "-m", "diagbench", "report", str(run), "--format", "html"]
        took_html, shown = timed(lambda: subprocess.run(html, capture_output=True, text=True, timeout=900))
        print(f"isolate of {factors} factors, end to end: {took:.1f} s (exit {done.returncode}, culprit {culprit})")
        print(
            f"report --format html of that run: {took_html:.2f} s (exit {shown.returncode}, {len(shown.stdout)} bytes)"
        )
        print("  (before: split_axes alone never finished on 60 factors: 13+ minutes at 100% CPU)")


def spec_of(folder: Path, cells: int) -> Path:
    side = math.isqrt(cells)
    data = {
        "name": "wide",
        "server": {"command": ["true"], "ready": {"log": "ready"}, "timeout": "10s"},
        "matrix": {
            "a": {"env": "A", "values": [str(i) for i in range(side)]},
            "b": {"env": "B", "values": [str(i) for i in range(cells // side)]},
        },
        "hypotheses": [
            {"id": f"h{i}", "when": {"a": str(i)}, "supported_if": "ready", "refuted_if": "failed"}
            for i in range(0, side, 7)
        ],
        "expect": [{"when": {"b": "0"}, "outcome": "ready"}],
    }
    path = folder / f"spec{cells}.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def bench_order(old_sizes: Sequence[int], sizes: Sequence[int]) -> None:
    print("decision_order (seconds)")
    print(f"  {'cells':>6}  {'old':>8}  {'new':>8}  same order")
    with tempfile.TemporaryDirectory() as folder:
        for cells in sizes:
            spec = load_spec(spec_of(Path(folder), cells))
            planned = plan_attempts(spec.cells, 1)
            new_s, new = timed(lambda: decision_order(planned, spec.hypotheses, spec.expectations))  # noqa: B023
            if cells in old_sizes:
                old_s, old = timed(lambda: old_decision_order(planned, spec.hypotheses, spec.expectations))  # noqa: B023
                print(f"  {cells:>6}  {old_s:>8.2f}  {new_s:>8.3f}  {old == new}")
            else:
                print(f"  {cells:>6}  {'(not run)':>8}  {new_s:>8.3f}")
        path = spec_of(Path(folder), max(sizes))
        argv = [sys.executable, "-m", "diagbench", "plan", str(path), "--stop-when-decided"]
        took, done = timed(lambda: subprocess.run(argv, capture_output=True, text=True, timeout=900))
        print(f"plan --stop-when-decided of {max(sizes)} cells, end to end: {took:.2f} s (exit {done.returncode})")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true", help="smaller sizes for the old algorithms")
    quick = parser.parse_args().quick
    bench_split([12, 14, 16] if quick else [14, 16, 18, 20])
    bench_isolate(60)
    bench_order([400] if quick else [1000], [400, 10000] if quick else [1000, 10000])


if __name__ == "__main__":
    main()
