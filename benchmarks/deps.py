"""Package isolation against building every candidate environment, with real PyPI packages:

    python benchmarks/deps.py [--packages N]

The server imports `packaging.version.LegacyVersion` (gone in packaging 22.0); the good and
the bad environment differ in packaging and N-1 harmless small packages. Printed, in one run:
builds, launches and wall time to the culprit with a cold probe-environment cache (uv's own
download cache warm, as on any machine that installed these once) and again warm; and beside
them the baseline of building every candidate environment (all 2^N subsets, build time only,
no launch) and of toggling one package at a time (N + 2 environments).
Nothing here is a test: it measures and prints.
"""

from __future__ import annotations

import argparse
import itertools
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from diagbench.isolate.deps import read_deps
from diagbench.isolate.packages import package_factors
from diagbench.launch.envs import EnvCache

SERVER = """import time
from packaging.version import LegacyVersion  # removed in packaging 22.0
print("The server is fired up and ready to roll!", flush=True)
time.sleep(600)
"""
# (good, bad) pins of small pure-Python packages; packaging first: the guilty one
PAIRS = [
    ("packaging==21.3", "packaging==22.0"),
    ("six==1.15.0", "six==1.16.0"),
    ("idna==3.3", "idna==3.4"),
    ("toml==0.10.1", "toml==0.10.2"),
    ("colorama==0.4.4", "colorama==0.4.6"),
    ("attrs==22.1.0", "attrs==22.2.0"),
    ("wcwidth==0.2.5", "wcwidth==0.2.6"),
    ("tomli==2.0.0", "tomli==2.0.1"),
]
FIXED = ["pyparsing==3.0.9"]  # packaging 21.3 needs it; the same on both sides


def isolate(folder: Path, cache: Path, good: str, bad: str) -> tuple[float, int, int, str]:
    """One `diagbench isolate` as a user runs it: wall seconds, builds, launches, culprit line."""
    argv = [sys.executable, "-m", "diagbench", "isolate", "--good", "{python} server.py"]
    argv += ["--good-deps", good, "--bad-deps", bad, "--runs-dir", str(folder / "runs"), "--timeout", "60s"]
    start = time.monotonic()
    done = subprocess.run(argv, capture_output=True, text=True, cwd=folder, env=_env(cache), timeout=1800)
    wall = time.monotonic() - start
    lines = done.stdout.splitlines()
    builds = sum(line.startswith("environment (") and " built in " in line for line in lines)
    launches = next((int(line.split()[0]) for line in lines if " launches" in line and line[0].isdigit()), -1)
    culprit = next((line for line in lines if line.startswith("culprit:")), f"(exit {done.returncode})")
    return wall, builds, launches, culprit


def _env(cache: Path) -> dict[str, str]:
    return {**os.environ, "DIAGBENCH_ENV_CACHE": str(cache), "COLUMNS": "200"}


def build_all(cache_dir: Path, good: str, bad: str, subsets: list[list[str]]) -> tuple[float, int]:
    """Build each named subset's environment (the bad versions of its packages) into an empty cache."""
    a, b = read_deps("--good-deps", good, cache_dir), read_deps("--bad-deps", bad, cache_dir)
    cache = EnvCache(cache_dir, Path(sys.executable))
    start = time.monotonic()
    for applied in subsets:
        lines = {k: p.line for k, p in a.pins.items()}
        lines.update({k: b.pins[k].line for k in applied})
        cache.build(sorted(lines.values()))
    return time.monotonic() - start, cache.builds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--packages", type=int, default=6, help="packages that differ (2..8)")
    n = max(2, min(len(PAIRS), parser.parse_args().packages))
    good = " ".join([*(g for g, _ in PAIRS[:n]), *FIXED])
    bad = " ".join([*(b for _, b in PAIRS[:n]), *FIXED])
    names = [f.name.lower() for f in package_factors(read_deps("a", good, Path()), read_deps("b", bad, Path()))]
    with tempfile.TemporaryDirectory(prefix="diagbench-deps-bench-") as tmp:
        folder = Path(tmp)
        (folder / "server.py").write_text(SERVER)
        build_all(folder / "warm-uv", good, bad, [[], names])  # uv's download cache holds every wheel
        print(f"{n} packages differ; packaging 21.3 -> 22.0 is the guilty one")
        print(f"{'':44} {'wall s':>8} {'builds':>7} {'launches':>9}")
        for label in ("isolate, cold environment cache", "isolate, warm environment cache (second run)"):
            wall, builds, launches, culprit = isolate(folder, folder / "envs", good, bad)
            print(f"{label:44} {wall:8.1f} {builds:7d} {launches:9d}   {culprit}")
        every = [list(s) for r in range(n + 1) for s in itertools.combinations(names, r)]
        wall, builds = build_all(folder / "every", good, bad, every)
        print(f"{'build every candidate (2^N), no launch':44} {wall:8.1f} {builds:7d} {'-':>9}")
        alone = [[], names, *([name] for name in names)]
        wall, builds = build_all(folder / "alone", good, bad, alone)
        print(f"{'build one at a time (N + 2), no launch':44} {wall:8.1f} {builds:7d} {'-':>9}")


if __name__ == "__main__":
    main()
