"""The demo matrix on this host and through Slurm, side by side, and what each Slurm job
costs beyond its server: printed beside a bare sbatch job measured in the same run.

    python benchmarks/slurm.py [--repeat 3]

Needs a Slurm that answers (.ci/slurm.sh up). Nothing here is a test: it measures and prints.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

from diagbench.execute.events import QuietEvents
from diagbench.execute.pipeline import RunOptions, RunResult, execute
from diagbench.execute.slots import Slot
from diagbench.execute.slurm.jobs import SlurmSettings
from diagbench.execute.slurm.probe import check_cluster
from diagbench.records.record import AttemptRecord
from diagbench.spec.executor import ExecutorSpec
from diagbench.spec.load import load_spec
from diagbench.spec.plan import PlannedAttempt

ROOT = Path(__file__).resolve().parent.parent
DEMO = ROOT / "experiments" / "demo.yaml"
IMPORT_WORKER = "import diagbench.execute.slurm.worker, time; print(time.time())"


class Clock(QuietEvents):
    """When each attempt was handed to its executor and when its record came back (epoch)."""

    def __init__(self) -> None:
        self.started: dict[str, float] = {}
        self.done: dict[str, float] = {}

    def on_start(self, item: PlannedAttempt, slot: Slot) -> None:
        self.started[item.name] = time.time()

    def on_done(self, item: PlannedAttempt, record: AttemptRecord) -> None:
        self.done[item.name] = time.time()


def run_demo(folder: Path, parallel: int | None, executor: ExecutorSpec) -> tuple[float, RunResult, Clock]:
    clock = Clock()
    spec = load_spec(DEMO)
    t0 = time.monotonic()
    result = execute(spec, RunOptions(folder, parallel=parallel, executor=executor), clock)
    return time.monotonic() - t0, result, clock


def overheads(result: RunResult, clock: Clock, slurm: bool) -> tuple[list[float], list[float]]:
    """Per attempt: submission -> worker start, and hand-over -> record minus the server's own time."""
    queued, beyond = [], []
    for record in result.records:
        handed = clock.started[record.attempt]
        if slurm:
            job = json.loads((result.run_dir.cells / record.attempt / "job.json").read_text())
            handed = job["submitted_at"]
            queued.append((record.executor or {})["queued_s"])
        beyond.append(clock.done[record.attempt] - handed - (record.duration_s or 0.0))
    return queued, beyond


def bare_jobs(folder: Path, n: int, command: str) -> list[float]:
    """n jobs submitted at once (as diagbench does) that print the epoch when `command` has
    run: sbatch -> that moment, for each."""
    lags = []
    submitted = []
    for i in range(n):
        out = folder / f"bare-{time.monotonic_ns()}-{i}.out"
        t0 = time.time()
        argv = ["sbatch", "--parsable", f"--output={out}", "--wrap", command]
        subprocess.run(argv, capture_output=True, text=True, check=True)
        submitted.append((t0, out))
    for t0, out in submitted:
        deadline = time.monotonic() + 60
        while (not out.exists() or not out.read_text().strip()) and time.monotonic() < deadline:
            time.sleep(0.05)
        lags.append(float(out.read_text().split()[-1]) - t0)
    return lags


def probe_times(folder: Path, n: int) -> list[float]:
    """The check every Slurm run starts with: would Slurm take the jobs, does a node see the folder."""
    settings = SlurmSettings.of(ExecutorSpec(kind="slurm"), load_spec(DEMO).server)
    times = []
    for _ in range(n):
        t0 = time.monotonic()
        check_cluster(settings, folder)
        times.append(time.monotonic() - t0)
    return times


def median_text(values: Sequence[float]) -> str:
    return (
        f"median {statistics.median(values):6.2f} s  (min {min(values):5.2f}, max {max(values):5.2f}, n={len(values)})"
    )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3, help="runs of each way")
    args = parser.parse_args(argv)
    slurm = ExecutorSpec(kind="slurm")
    local = ExecutorSpec()
    ways: dict[str, tuple[int | None, ExecutorSpec]] = {
        "local, one at a time (default)": (None, local),
        "local, 6 at once (--parallel 6)": (6, local),
        "slurm, every cell queued at once": (None, slurm),
    }
    walls: dict[str, list[float]] = {name: [] for name in ways}
    labels: dict[str, list[str]] = {}  # outcomes and verdicts -> the runs that gave them
    queued: list[float] = []
    beyond: dict[str, list[float]] = {name: [] for name in ways}
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(args.repeat):
            for name, (parallel, executor) in ways.items():
                wall, result, clock = run_demo(Path(tmp) / f"{i}-{len(walls[name])}-{name[:5]}", parallel, executor)
                walls[name].append(wall)
                seen = str(([r.label for r in result.records], [(v.id, v.verdict.value) for v in result.verdicts]))
                labels.setdefault(seen, []).append(name)
                q, b = overheads(result, clock, executor.kind == "slurm")
                queued += q
                beyond[name] += b
        bare = bare_jobs(Path(tmp), 6, "date +%s.%N")
        imports = bare_jobs(Path(tmp), 6, f"{sys.executable} -c '{IMPORT_WORKER}'")
        probes = probe_times(Path(tmp), 5)
    print(f"\n== the demo matrix (6 cells), wall time of `diagbench run`, {args.repeat} run(s) each")
    for name, values in walls.items():
        print(f"  {name:34} {median_text(values)}")
    print(f"  same outcomes and verdicts in every run: {'yes' if len(labels) == 1 else 'NO'}")
    if len(labels) > 1:
        for seen, names in labels.items():
            print(f"    {names}: {seen}")
    print("\n== what an attempt costs beyond its server (hand-over -> record in, minus the server's duration)")
    for name, values in beyond.items():
        print(f"  {name:34} {median_text(values)}")
    print("\n== Slurm: submission -> the worker running on its node")
    print(f"  diagbench jobs (6 at once), sbatch -> worker running         {median_text(queued)}")
    print(f"  baseline: 6 bare jobs at once, sbatch -> `date` ran           {median_text(bare)}")
    print(f"  baseline: 6 jobs at once, sbatch -> python imported the worker {median_text(imports)}")
    print(f"  the check before the first job (--test-only + probe job)       {median_text(probes)}")


if __name__ == "__main__":
    main()
