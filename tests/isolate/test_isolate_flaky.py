"""isolate at the default `--repeat 1` with a flaky bad side: the culprit's factor (--f3)
brings the failure only half the time (a real rule server drawing from a seeded sequence, so
every test run sees the same launches). Before naming a culprit, isolate launches it again
(and its complement, and it less each of its factors): a culprit it names with exit 0 is
never one holding an innocent factor; otherwise it says not isolable (or that the bad
baseline came up)."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import diagbench_argv

SERVER = Path(__file__).parents[1] / "ruleserver.py"
FACTORS = [f"--f{i}" for i in range(1, 7)]


def isolate(tmp_path: Path, seed: int) -> tuple[int, dict]:
    counter = tmp_path / f"draws-{seed}"
    base = [sys.executable, str(SERVER), "--port", "{port}", "--rule=--f3=>oom", "--rate", "0.5"]
    base += ["--seed", f"{counter}:{seed}"]
    good, bad = shlex.join(base), shlex.join([*base, *FACTORS])
    runs = tmp_path / f"runs-{seed}"
    done = subprocess.run(
        diagbench_argv("isolate", "--good", good, "--bad", bad, "--runs-dir", str(runs), "--json"),
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "COLUMNS": "200"},
    )
    return done.returncode, json.loads(done.stdout) if done.stdout.strip() else {"stderr": done.stderr}


@pytest.mark.parametrize("seed", range(1, 9))
def test_a_flaky_bad_side_never_names_an_innocent_factor(tmp_path, seed):
    code, isolation = isolate(tmp_path, seed)
    if code == 0:
        assert isolation["culprit"] == ["--f3"], isolation["culprit"]
    else:
        assert code in (1, 2), isolation
        assert isolation.get("status") in ("not_isolable", "bad_baseline"), isolation
