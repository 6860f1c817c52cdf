"""Three `diagbench run --parallel 4` at once, with chatty and misbehaving servers, repeated.

    python benchmarks/stress.py [--rounds N] [--repeat N] [--quick]

Each round starts three diagbench processes at once on the same spec (eight kinds of
server: floods, SIGTERM-ignoring trees with setsid daemons, OOM, crashes, self-SIGKILL,
megabyte lines, floods after ready), every server binding its auto port. It prints what
must all be 0:

    wrong records     an attempt without a record, or whose outcome is not its server's
    port collisions   two live attempts given one port, or a server that found its port taken
    leftovers         tagged processes of these runs, and temporary folders of these diagbenchs,
                      still there after the runs ended
    bad exits         a diagbench that did not exit 0

beside the time taken: a round of three at once, and the same three runs one after another.
Nothing here is a test: it measures and prints.
"""

from __future__ import annotations

import argparse
import itertools
import json
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

from conftest import FAKE  # noqa: E402
from diagbench.launch.process import sweep_tagged  # noqa: E402
from diagbench.launch.tags import CACHES_PREFIX  # noqa: E402

READY = "The server is fired up and ready to roll!"
# mode -> (fake-server actions after binding its port, the record it must get)
MODES: dict[str, tuple[list[str], str]] = {
    "chatty": (["flood=20", f"out={READY}", "hang"], "ready"),
    "stubborn": (
        ["ignore-term", "child", "daemon={tmp}/daemon-{port}.pid", "flood=5", f"out={READY}", "hang"],
        "ready",
    ),
    "oom": (["flood=5", "progress=50", "err=torch.OutOfMemoryError: CUDA out of memory.", "hang"], "failed:oom"),
    "crash": (["flood=2", "out=Load weight begin.", "exit=3"], "crashed"),
    "sigkill": (["out=Load weight begin.", "signal=9"], "crashed"),
    "junk": (["junk", "longline=2", f"out={READY}", "hang"], "ready"),
    "slow": (["flood=1", "sleep=1", f"out={READY}", "hang"], "ready"),
    "flood-after": ([f"out={READY}", "flood=20"], "ready"),
}
DISPATCH = """
import os, sys
modes = {modes!r}
mode, port, tmp = sys.argv[1], sys.argv[2], sys.argv[3]
actions = [a.replace("{{port}}", port).replace("{{tmp}}", tmp) for a in modes[mode]]
# every server binds its port first: a port handed to two live attempts fails one of them
os.execv(sys.executable, [sys.executable, {fake!r}, "http=/health", *actions])
"""


def write_spec(folder: Path, repeat_note: str) -> Path:
    dispatch = folder / "dispatch.py"
    dispatch.write_text(DISPATCH.format(modes={m: a for m, (a, _) in MODES.items()}, fake=str(FAKE)))
    spec = folder / "stress.yaml"
    values = ", ".join(MODES)
    spec.write_text(
        f"""name: stress
description: {repeat_note}
server:
  command: [{json.dumps(sys.executable)}, {json.dumps(str(dispatch))}]
  env: {{PORT: "{{port}}"}}
  port: auto
  timeout: 60s
  grace: 1s
  max_log: 2MiB
  fresh_caches: true
matrix:
  mode: {{args: ["{{value}}", "{{port}}", {json.dumps(str(folder))}], values: [{values}]}}
"""
    )
    return spec


@dataclass
class Tally:
    attempts: int = 0
    wrong: list[str] = field(default_factory=list)
    collisions: list[str] = field(default_factory=list)
    leftovers: list[str] = field(default_factory=list)
    bad_exits: list[str] = field(default_factory=list)

    def add(self, other: Tally) -> None:
        self.attempts += other.attempts
        for name in ("wrong", "collisions", "leftovers", "bad_exits"):
            getattr(self, name).extend(getattr(other, name))


def run_three(folder: Path, spec: Path, repeat: int, at_once: bool) -> tuple[float, Tally]:
    """Three diagbench runs of `spec`, at once or one after another; their tally."""
    options = ["--parallel", "4", "--repeat", str(repeat)]
    argvs = [
        [sys.executable, "-m", "diagbench", "run", str(spec), "--runs-dir", str(folder / f"runs-{i}"), *options]
        for i in range(3)
    ]
    started = time.monotonic()
    procs: list[subprocess.Popen[bytes]] = []
    for argv in argvs:
        procs.append(subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE))
        if not at_once:
            procs[-1].wait()
    errors = [p.communicate()[1].decode() for p in procs]
    seconds = time.monotonic() - started
    tally = Tally()
    for proc, error in zip(procs, errors, strict=True):
        if proc.returncode != 0:
            tally.bad_exits.append(f"pid {proc.pid} exited {proc.returncode}: {error.strip()[-300:]}")
    runs = [next((folder / f"runs-{i}").glob("2*")) for i in range(3)]
    expected = len(MODES) * repeat
    for run in runs:
        tally.add(_check_records(run, expected))
        tally.leftovers += [f"pid {pid} of {run}" for pid in sweep_tagged(run)]
    tally.collisions += _collisions(runs)
    leaked = [f for p in procs for f in Path(tempfile.gettempdir()).glob(f"{CACHES_PREFIX}{p.pid}@*")]
    tally.leftovers += [str(f) for f in leaked]
    return seconds, tally


def _check_records(run: Path, expected: int) -> Tally:
    tally = Tally(attempts=expected)
    records = [json.loads(p.read_text()) for p in sorted(run.glob("cells/*/result.json"))]
    if len(records) != expected:
        tally.wrong.append(f"{run}: {len(records)} records for {expected} attempts")
    for r in records:
        label = r["outcome"] + (f":{r['failure_class']}" if r.get("failure_class") else "")
        want = MODES[r["params"]["mode"]][1]
        if label != want:
            tally.wrong.append(f"{run.name}/{r['attempt']}: {label} ({r['reason']}), wanted {want}")
        if r.get("left_behind"):
            tally.leftovers.append(f"{run.name}/{r['attempt']}: left behind {r['left_behind']}")
    return tally


def _collisions(runs: list[Path]) -> list[str]:
    """Pairs of attempts (of any of the runs) that held one port at overlapping times."""
    spans: dict[str, list[tuple[float, float, str]]] = {}
    found = []
    for run in runs:
        for path in run.glob("cells/*/result.json"):
            r = json.loads(path.read_text())
            if r.get("failure_class") == "port_in_use":
                found.append(f"{run.name}/{r['attempt']}: {r['reason']}")
            port = (r.get("env_changes") or {}).get("PORT")
            if port and r.get("started_at") and r.get("ended_at"):
                span = (_epoch(r["started_at"]), _epoch(r["ended_at"]), f"{run.name}/{r['attempt']}")
                spans.setdefault(port, []).append(span)
    for port, held in spans.items():
        held.sort()
        for (_, end, who), (start, _, other) in itertools.pairwise(held):
            if start < end:
                found.append(f"port {port}: {who} and {other} at once")
    return found


def _epoch(iso: str) -> float:
    return datetime.fromisoformat(iso).timestamp()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--repeat", type=int, default=2, help="launches of each kind of server per run")
    parser.add_argument("--quick", action="store_true", help="one round, one launch of each")
    args = parser.parse_args()
    rounds, repeat = (1, 1) if args.quick else (args.rounds, args.repeat)
    total, times = Tally(), []
    with tempfile.TemporaryDirectory(prefix="diagbench-stress-") as tmp:
        base = Path(tmp)
        spec = write_spec(base, f"{len(MODES)} kinds of server x {repeat}")
        baseline, tally = run_three(base / "baseline", spec, repeat, at_once=False)
        total.add(tally)
        for i in range(rounds):
            seconds, tally = run_three(base / f"round-{i}", spec, repeat, at_once=True)
            times.append(seconds)
            total.add(tally)
    print(
        f"three `diagbench run --parallel 4 --repeat {repeat}` at once, {rounds} round(s), {len(MODES)} kinds of server"
    )
    print(f"  attempts          {total.attempts} (the rounds, and the baseline's one after another)")
    print(f"  wrong records     {len(total.wrong)}")
    print(f"  port collisions   {len(total.collisions)}")
    print(f"  leftovers         {len(total.leftovers)}")
    print(f"  bad exits         {len(total.bad_exits)}")
    print(f"  time, three at once (median of rounds)      {statistics.median(times):6.1f} s")
    print(f"  baseline: the same three one after another  {baseline:6.1f} s")
    for line in (*total.wrong, *total.collisions, *total.leftovers, *total.bad_exits)[:30]:
        print(f"    {line}")


if __name__ == "__main__":
    main()
