"""What the benchmarks share: where the repository is, the tests' fake servers (run as
programs, never imported), and a spec writer. Benchmarks run as `python benchmarks/X.py`
with diagbench installed, so this folder is on sys.path and nothing edits it."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parent.parent
FAKE = ROOT / "tests" / "fakeserver.py"  # the tests' fake server: a real process doing real I/O
RULESERVER = ROOT / "tests" / "ruleserver.py"  # fails by a rule over its own flags and env


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
