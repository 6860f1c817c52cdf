"""Decision latency, a line written -> the server's SIGTERM, of this tree beside another
commit's, measured interleaved in one run.

    python benchmarks/latency_vs.py [--base 8d51688] [--rounds 6] [--launches 10]

The base commit's `diagbench/` is unpacked (git archive) into a temporary folder; each round
runs `diagbench run --repeat N` once with the base and once with this tree, alternating
which goes first, on the same spec: the tests' fake server prints a stamped ready line
(`The server is fired up and ready to roll!`, SGLang's) and hangs. The latency of one
launch is its record's `sigterm_at` minus the stamp in its log. The machine's load
average is printed before and after: other people's work moves these figures.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tarfile
import tempfile
from io import BytesIO
from pathlib import Path
from typing import Any

from common import ROOT, fake_command, machine, record, write_spec

STAMP = re.compile(r"@(\d+\.\d+)")
READY = "The server is fired up and ready to roll!"  # SGLang's ready line


def pct(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(p / 100 * (len(ordered) - 1)))]


def unpack(commit: str, into: Path) -> Path:
    """The commit's diagbench package in `into` (nothing else of it)."""
    data = subprocess.run(["git", "-C", str(ROOT), "archive", commit, "diagbench"], capture_output=True, check=True)
    with tarfile.open(fileobj=BytesIO(data.stdout)) as tar:
        tar.extractall(into, filter="data")
    return into


def launches(tree: Path, folder: Path, n: int) -> list[float]:
    """`diagbench run --repeat n` with the package in `tree`: for each launch, its ready
    line's stamp to the moment the server handled its SIGTERM (the fake server's journal)."""
    folder.mkdir(parents=True)
    journal = folder / "journal.jsonl"
    server = {
        "command": fake_command(f"journal={journal}", "out=Load weight begin.", "sleep=0.05", f"stamp={READY}", "hang")
    }
    spec = write_spec(folder, server)
    env = {**os.environ, "PYTHONPATH": str(tree)}
    subprocess.run(
        [sys.executable, "-m", "diagbench", "run", str(spec), "--runs-dir", str(folder / "runs"), "--repeat", str(n)],
        cwd=folder,
        env=env,
        capture_output=True,
        check=False,
    )
    logs = {log.resolve() for log in folder.glob("runs/*/cells/*/server.log")}  # `latest` links to the run too
    stamps = sorted(float(found.group(1)) for log in logs if (found := STAMP.search(log.read_text(errors="replace"))))
    ends = sorted(e["t"] for line in journal.read_text().splitlines() if (e := json.loads(line))["event"] == "end")
    return [end - stamp for stamp, end in zip(stamps, ends, strict=False) if end > stamp]


def load() -> str:
    one, five, _ = os.getloadavg()
    return f"load average {one:.2f} (1 min), {five:.2f} (5 min) on {os.cpu_count()} CPUs"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--base", default="8d51688")
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--launches", type=int, default=10)
    parser.add_argument("--no-record", action="store_true", help="do not write benchmarks/results/latency.json")
    args = parser.parse_args()
    started = machine()
    print(f"before: {load()}")
    with tempfile.TemporaryDirectory(prefix="latency-vs-") as tmp:
        base = unpack(args.base, Path(tmp) / "base")
        sides = {args.base: base, "HEAD (this tree)": ROOT}
        got: dict[str, list[float]] = {name: [] for name in sides}
        for round_no in range(args.rounds):
            order = list(sides) if round_no % 2 == 0 else list(reversed(sides))
            for name in order:
                got[name] += launches(sides[name], Path(tmp) / f"{round_no}-{len(got[name])}-{name[:4]}", args.launches)
    print(f"after:  {load()}")
    print(
        f"\n== decision latency, ready line written -> the server handles its SIGTERM ({args.rounds} interleaved rounds)"
    )
    figures: dict[str, Any] = {"rounds": args.rounds, "base": args.base, "sides": {}}
    for name, values in got.items():
        if not values:
            print(f"  {name:18} no launches recorded")
            continue
        print(
            f"  {name:18} p50 {pct(values, 50) * 1000:6.2f} ms   p99 {pct(values, 99) * 1000:6.2f} ms   "
            f"({len(values)} launches)"
        )
        side = "base" if name == args.base else "this"
        figures["sides"][side] = {"p50_ms": pct(values, 50) * 1000, "p99_ms": pct(values, 99) * 1000, "n": len(values)}
    if not args.no_record:
        print(f"\nrecorded: {record('latency', figures, started)}")


if __name__ == "__main__":
    main()
