"""What the benchmarks share: where the repository is, the tests' fake servers (run as
programs, never imported), and a spec writer. Benchmarks run as `python benchmarks/X.py`
with diagbench installed, so this folder is on sys.path and nothing edits it."""

from __future__ import annotations

import datetime
import json
import os
import platform
import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parent.parent
FAKE = ROOT / "tests" / "fakeserver.py"  # the tests' fake server: a real process doing real I/O
RULESERVER = ROOT / "tests" / "ruleserver.py"  # fails by a rule over its own flags and env
RESULTS = ROOT / "benchmarks" / "results"  # each benchmark's last figures, read by report.py


def fake_command(*actions: str) -> list[str]:
    return [sys.executable, str(FAKE), *actions]


def write_spec(folder: Path, server: dict[str, Any], matrix: dict[str, Any] | None = None, **top: Any) -> Path:
    """A spec file with the tests' defaults (20 s timeout, 2 s grace, one trivial axis)."""
    data = {
        "name": top.pop("name", "t"),
        "server": {"timeout": "20s", "grace": "2s", **server},
        "matrix": matrix or {"only": {"env": "DIAGBENCH_TEST_AXIS", "values": ["x"]}},
        **top,
    }
    path = folder / "spec.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def machine() -> dict[str, Any]:
    """The machine a figure was measured on: CPU model, cores, load average (1, 5, 15 min)."""
    model = platform.processor() or platform.machine()
    try:
        for text in Path("/proc/cpuinfo").read_text().splitlines():
            if text.startswith("model name"):
                model = text.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return {"cpu": model, "cores": os.cpu_count(), "load": [round(x, 2) for x in os.getloadavg()]}


def record(name: str, figures: dict[str, Any], started: dict[str, Any]) -> Path:
    """Write benchmarks/results/NAME.json: the figures, the machine (its load when the run started
    and ended), the commit and the date, for `python benchmarks/report.py`."""
    commit = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
    ended = machine()
    data = {
        "benchmark": name,
        "date": datetime.date.today().isoformat(),
        "commit": commit.stdout.strip() or None,
        "machine": {
            "cpu": ended["cpu"],
            "cores": ended["cores"],
            "load_start": started["load"],
            "load_end": ended["load"],
        },
        "figures": figures,
    }
    RESULTS.mkdir(exist_ok=True)
    path = RESULTS / f"{name}.json"
    path.write_text(json.dumps(data, indent=1) + "\n")
    return path
