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
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

from conftest import write_spec  # noqa: E402
from diagbench.execute.events import QuietEvents  # noqa: E402
from diagbench.execute.pipeline import RunOptions, RunResult, execute  # noqa: E402
from diagbench.spec.gpus import parse_gpu_request  # noqa: E402
from diagbench.spec.load import Spec, load_spec  # noqa: E402

READY = "The server is fired up and ready to roll!"
FOUR = parse_gpu_request("0,1,2,3")


def timed(spec: Spec, folder: Path, **options: Any) -> tuple[RunResult, float]:
    start = time.monotonic()
    result = execute(spec, RunOptions(folder, **options), QuietEvents())
    return result, time.monotonic() - start


def bench_slots(folder: Path, startup_s: float) -> None:
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
    print(f"  speed-up: {one_s / four_s:.2f}x (target: at least 3.5x; 4x is the ceiling)")


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
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        bench_slots(Path(tmp), 1.0 if args.quick else 3.0)
        bench_stop(Path(tmp))


if __name__ == "__main__":
    main()
