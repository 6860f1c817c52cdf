"""GPU slots and --stop-when-decided, each figure beside its baseline from the same run.

    python benchmarks/slots.py [--quick]

1. A 16-cell matrix whose server takes a few seconds to come up, on `--gpus 0,1,2,3`:
   wall time with one slot (`--parallel 1`) against four (the default). No GPU is needed:
   the ids are handed out as given, and each server is told its own as CUDA_VISIBLE_DEVICES.
2. The demo experiment (the simulated SGLang server), and a wider one (two batch sizes):
   launches and wall time of a full run against `--stop-when-decided`, and their verdicts.
"""

from __future__ import annotations

import argparse
import itertools
import tempfile
import time
from datetime import datetime
from pathlib import Path
from typing import Any

from common import ROOT, machine, record, write_spec
from diagbench.execute.events import QuietEvents
from diagbench.execute.pipeline import RunOptions, RunResult, execute
from diagbench.spec.gpus import parse_gpu_request
from diagbench.spec.load import Spec, load_spec

READY = "The server is fired up and ready to roll!"
FOUR = parse_gpu_request("0,1,2,3")


def timed(spec: Spec, folder: Path, **options: Any) -> tuple[RunResult, float]:
    start = time.monotonic()
    result = execute(spec, RunOptions(folder, **options), QuietEvents())
    return result, time.monotonic() - start


def bench_slots(folder: Path, startup_s: float) -> dict[str, Any]:
    cells = {"n": {"env": "BENCH_CELL", "values": [str(i) for i in range(1, 17)]}}
    # the server waits, says it is ready and waits: a shell's sleep, so that on this 2-core
    # machine four Python start-ups at once do not pass for diagbench's own cost
    script = f"sleep {startup_s:g}; echo '{READY}'; exec sleep 600"
    server = {"command": ["/bin/sh", "-c", script], "timeout": "60s"}
    spec = load_spec(write_spec(folder, server, cells))
    one, one_s = timed(spec, folder / "one", gpus=FOUR, parallel=1)
    four, four_s = timed(spec, folder / "four", gpus=FOUR)
    assert all(r.outcome == "ready" for r in (*one.records, *four.records))
    used = sorted({",".join(r.gpus) for r in four.records})
    print(f"\n== 16 cells, {startup_s:g} s start-up each, --gpus 0,1,2,3")
    print(f"  1 slot  (--parallel 1): {one_s:6.1f} s   ({16 * startup_s:g} s of start-up in a row)")
    print(
        f"  4 slots (the default):  {four_s:6.1f} s   ({4 * startup_s:g} s in four waves)   GPUs used: {' '.join(used)}"
    )
    print(f"  speed-up: {one_s / four_s:.2f}x (target: at least 3.8x; 4x is the ceiling)")
    for name, result, wall, slots in (("1 slot", one, one_s, 1), ("4 slots", four, four_s, 4)):
        parts = overhead(result, wall, startup_s, slots)
        shown = ", ".join(f"{k} {v:.2f} s" for k, v in parts.items())
        print(f"  where {name}' time goes, beyond {16 // slots} start-ups in a row per slot: {shown}")
    return {
        "cells": 16,
        "startup_s": startup_s,
        "one_slot_s": one_s,
        "four_slots_s": four_s,
        "speedup": one_s / four_s,
        "overhead_one": overhead(one, one_s, startup_s, 1),
        "overhead_four": overhead(four, four_s, startup_s, 4),
    }


def overhead(result: RunResult, wall: float, startup_s: float, slots: int) -> dict[str, float]:
    """The run's wall time beyond `cells / slots` start-ups, per slot (from the records): the
    server's spawn to its ready line beyond the start-up, the teardown, writing the record,
    the waits between one attempt's end and the next one's start on a slot, and the run's
    own opening and closing (the wall time outside every attempt)."""
    records = [r for r in result.records if r.started_at and r.ended_at]
    starts = {r.attempt: datetime.fromisoformat(r.started_at).timestamp() for r in records if r.started_at}
    ends = {r.attempt: datetime.fromisoformat(r.ended_at).timestamp() for r in records if r.ended_at}
    by_slot: dict[str, list[str]] = {}
    for r in sorted(records, key=lambda r: starts[r.attempt]):
        by_slot.setdefault(",".join(r.gpus), []).append(r.attempt)
    gaps = sum(max(0.0, starts[b] - ends[a]) for order in by_slot.values() for a, b in itertools.pairwise(order))
    spawn = sum((r.time_to_outcome_s or 0) - startup_s for r in records)
    teardown = sum(r.teardown_s or 0 for r in records)
    record = sum((r.duration_s or 0) - (r.time_to_outcome_s or 0) - (r.teardown_s or 0) for r in records)
    outside = wall - (max(ends.values()) - min(starts.values()))
    return {
        "spawn to ready beyond the start-up": spawn / slots,
        "teardown": teardown / slots,
        "record": max(0.0, record) / slots,
        "between attempts": gaps / slots,
        "run open and close": outside,
    }


def wide_demo(folder: Path) -> Spec:
    """The demo with two batch sizes: 12 cells, the same hypotheses."""
    text = (ROOT / "experiments" / "demo.yaml").read_text()
    wide = text.replace("values: [32]}", "values: [32, 64]}").replace("name: demo-compile-isolation", "name: demo-wide")
    assert wide != text, "the demo's max_bs axis changed: update this benchmark"
    path = folder / "demo-wide.yaml"
    path.write_text(wide)
    return load_spec(path)


def bench_stop(folder: Path) -> None:
    demo = load_spec(ROOT / "experiments" / "demo.yaml")
    cases = [("demo, 1 slot", demo, {}), ("demo-wide, 1 slot", wide_demo(folder), {})]
    cases.append(("demo-wide, 4 slots", cases[1][1], {"gpus": FOUR}))
    print("\n== launches to the verdicts: a full run against --stop-when-decided")
    print(f"  {'experiment':20} {'full run':>18} {'--stop-when-decided':>22}   fewer launches   same verdicts")
    for n, (name, spec, extra) in enumerate(cases):
        full, full_s = timed(spec, folder / f"full{n}", **extra)
        stop, stop_s = timed(spec, folder / f"stop{n}", stop_when_decided=True, **extra)
        launched = [sum(r.outcome.ran for r in result.records) for result in (full, stop)]
        same = [v.verdict for v in full.verdicts] == [v.verdict for v in stop.verdicts]
        print(
            f"  {name:20} {launched[0]:3d} in {full_s:6.1f} s {launched[1]:9d} in {stop_s:6.1f} s"
            f"   {1 - launched[1] / launched[0]:13.0%}   {'yes' if same else 'NO'}"
            f" ({', '.join(v.verdict.value for v in stop.verdicts)})"
        )
    print("  (target: at least a third fewer launches, the same verdicts)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="1 s start-ups instead of 3 s")
    parser.add_argument("--slots-only", action="store_true", help="the slots figure alone (not --stop-when-decided)")
    parser.add_argument("--no-record", action="store_true", help="do not write benchmarks/results/slots.json")
    args = parser.parse_args()
    started = machine()
    with tempfile.TemporaryDirectory() as tmp:
        figures = bench_slots(Path(tmp), 1.0 if args.quick else 3.0)
        if not args.slots_only:
            bench_stop(Path(tmp))
    if not args.no_record:
        print(f"\nrecorded: {record('slots', figures, started)}")


if __name__ == "__main__":
    main()
