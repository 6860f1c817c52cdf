"""Time to a decided collective hang, beside the timeout (the baseline), in one run of this script.

    python benchmarks/collective_hang.py --torch-python /path/to/python-with-torch [--timeout 30] [--quick]
    (or DIAGBENCH_TORCH_PYTHON=...)

Launches of ranks over gloo on the CPU (tests/rankworker.py) where one rank never joins the
warm-up all_reduce: torch.multiprocessing.spawn with 2 ranks, torchrun with 2 and with 4, and
mp.spawn with 2 where rank 0 also burns a core (a host that stays busy while its ranks hang).
Three runs of the same matrix: `timeout` only (the baseline: the hang is decided when the
timeout runs out), `stall`, and `stall` + `spin`. Prints each case's time to its outcome,
whether it stalled, the site and the odd ranks named.
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
from pathlib import Path

from common import ROOT, write_spec
from diagbench.execute.events import QuietEvents
from diagbench.execute.pipeline import RunOptions, execute
from diagbench.records.record import AttemptRecord
from diagbench.spec.load import load_spec

WORKER = ROOT / "tests" / "rankworker.py"


def cases(python: str) -> dict[str, tuple[list[str], dict[str, str]]]:
    def torchrun(world: int) -> list[str]:
        launch = [python, "-m", "torch.distributed.run", f"--nproc-per-node={world}", "--nnodes=1"]
        return [*launch, "--master-addr=127.0.0.1", "--master-port={port}", str(WORKER), "torchrun"]

    spawn = [python, str(WORKER), "spawn", "{port}", "2", "1"]
    odd = {"RANKWORKER_ODD": "1", "RANKWORKER_HOW": "sleep"}
    return {
        "spawn-2": (spawn, {}),
        "torchrun-2": (torchrun(2), odd),
        "torchrun-4": (torchrun(4), {**odd, "RANKWORKER_ODD": "2"}),
        "spawn-2-busy-host": (spawn, {"RANKWORKER_BUSY": "1"}),
    }


def run(
    folder: Path, python: str, timeout_s: float, stall_s: float | None, spin_s: float | None
) -> list[AttemptRecord]:
    """Each case once, one after the other (each has its own command and variables)."""
    records = []
    for name, (argv, env) in cases(python).items():
        server: dict[str, object] = {"command": argv, "env": env, "ready": {"log": "never ready"}}
        server.update(timeout=f"{timeout_s:g}s", grace="3s")
        if stall_s:
            server["stall"] = f"{stall_s:g}s"
        if spin_s:
            server["spin"] = f"{spin_s:g}s"
        where = folder / name
        where.mkdir(parents=True)
        spec = load_spec(write_spec(where, server, {"case": {"env": "BENCH_CASE", "values": [name]}}))
        records += execute(spec, RunOptions(where / "runs"), QuietEvents()).records
    return records


def report(label: str, records: list[AttemptRecord]) -> dict[str, float]:
    out = {}
    print(label)
    for r in records:
        seconds = r.time_to_outcome_s or 0.0
        out[r.params["case"]] = seconds
        odd = list(r.hang.odd_ranks) if r.hang else []
        how = "stalled" if r.stalled else r.label
        site = r.hang.site if r.hang else "-"
        print(f"  {r.params['case']:<18} {seconds:6.1f} s  {how:<8} odd ranks {odd}  site {site}")
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--torch-python", default=os.environ.get("DIAGBENCH_TORCH_PYTHON", ""))
    parser.add_argument("--timeout", type=float, default=30.0, help="the baseline (default 30 s)")
    parser.add_argument("--stall", type=float, default=3.0)
    parser.add_argument("--quick", action="store_true", help="timeout 15 s")
    args = parser.parse_args()
    if not args.torch_python or not Path(args.torch_python).is_file():
        parser.error("--torch-python (or DIAGBENCH_TORCH_PYTHON): a python with torch (CPU is enough)")
    timeout_s = 15.0 if args.quick else args.timeout
    print(f"timeout {timeout_s:g}s (the baseline); stall {args.stall:g}s; spin {args.stall:g}s; one attempt at a time")
    with tempfile.TemporaryDirectory(prefix="diagbench-bench-collective-") as tmp:
        base = Path(tmp)
        timeout_only = report("timeout only (baseline)", run(base / "a", args.torch_python, timeout_s, None, None))
        stall = report(f"stall {args.stall:g}s", run(base / "b", args.torch_python, timeout_s, args.stall, None))
        both = run(base / "c", args.torch_python, timeout_s, args.stall, args.stall)
        spin = report(f"stall + spin {args.stall:g}s", both)
    for label, found in (("stall", stall), ("stall + spin", spin)):
        median = statistics.median(found.values())
        base_median = statistics.median(timeout_only.values())
        print(f"{label}: median time to a decided collective hang {median:.1f} s vs {base_median:.1f} s "
              f"with the timeout alone ({base_median / median:.1f}x sooner)")  # fmt: skip


if __name__ == "__main__":
    main()
