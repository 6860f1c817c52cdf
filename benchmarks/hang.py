"""Time to a decided hang, with and without `server.stall`, in one run of this script.

    python benchmarks/hang.py [--quick]

The same matrix twice: servers that deadlock right after their load line (a lock taken
twice), one that reads a pipe nobody writes, one whose child hangs while it sleeps, a busy
compile that prints nothing for 2 x stall and then comes up, and a plain ready server. First
with only `timeout` (the baseline: a hang is decided when the timeout runs out), then with
`stall`. Prints each hung attempt's time to its outcome, the wall time of each run, and that
the silent-but-busy compile came up in both (a stall rule that killed it would be wrong).
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

from common import fake_command, write_spec
from diagbench.execute.events import QuietEvents
from diagbench.execute.pipeline import RunOptions, RunResult, execute
from diagbench.spec.load import load_spec

CASES = {
    "lock": ["out=Loading weights", "deadlock"],
    "pipe": ["out=waiting for the tokenizer", "pipe-read"],
    "child": ["child-deadlock"],
}


def run(folder: Path, timeout_s: float, stall_s: float | None, compile_s: float) -> tuple[RunResult, float]:
    scripts = {name: ";".join(actions) for name, actions in CASES.items()}
    scripts["compile"] = f"out=compiling;busy={compile_s:g};out=startup complete;hang"
    scripts["ready"] = "out=startup complete;hang"
    server = {
        "command": fake_command(),
        "ready": {"log": "startup complete"},
        "timeout": f"{timeout_s:g}s",
        **({"stall": f"{stall_s:g}s"} if stall_s else {}),
    }
    matrix = {"case": {"args": ["script={value}"], "values": scripts}}
    spec = load_spec(write_spec(folder, server, matrix))
    start = time.monotonic()
    result = execute(spec, RunOptions(folder / "runs", parallel=len(scripts)), QuietEvents())
    return result, time.monotonic() - start


def report(label: str, result: RunResult, wall: float) -> list[float]:
    hung = [r for r in result.records if r.params["case"] in CASES]
    times = [r.time_to_outcome_s or 0.0 for r in hung]
    compile_outcome = next(r.label for r in result.records if r.params["case"] == "compile")
    sites = sorted({str((r.hang or {}).get("site")) for r in hung})
    print(f"{label:<22} hung attempts decided after median {statistics.median(times):6.2f} s "
          f"(max {max(times):6.2f} s); run wall {wall:6.2f} s; silent compile: {compile_outcome}")  # fmt: skip
    print(f"{'':<22} sites: {'; '.join(sites)}")
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="timeout 12s, stall 2s")
    args = parser.parse_args()
    timeout_s, stall_s = (12.0, 2.0) if args.quick else (60.0, 5.0)
    with tempfile.TemporaryDirectory(prefix="diagbench-bench-hang-") as tmp:
        base = Path(tmp)
        print(f"timeout {timeout_s:g}s; stall {stall_s:g}s; busy silent compile {2 * stall_s:g}s; "
              f"{len(CASES)} hung servers + 2 that come up, all at once")  # fmt: skip
        (base / "a").mkdir()
        (base / "b").mkdir()
        without = report("timeout only (baseline)", *run(base / "a", timeout_s, None, 2 * stall_s))
        with_stall = report(f"stall {stall_s:g}s", *run(base / "b", timeout_s, stall_s, 2 * stall_s))
        ratio = statistics.median(without) / statistics.median(with_stall)
        print(f"time to a decided hang: {ratio:.1f}x sooner with stall")


if __name__ == "__main__":
    main()
