"""`isolate --quiet`: the steps table, the culprit and the exit code; no factor table, no live lines (issue 37)."""

from __future__ import annotations

from pathlib import Path

from conftest import run_cli


def test_quiet_isolate_prints_only_its_answer(tmp_path: Path) -> None:
    good = "A=0 {python} -m diagbench.simulator --port {port}"
    bad = "A=1 {python} -m diagbench.simulator --port {port} --enable-torch-compile"
    done = run_cli("isolate", "--quiet", "--good", good, "--bad", bad, cwd=tmp_path, columns=80)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("isolation steps\n"), done.stdout
    assert "culprit: --enable-torch-compile" in done.stdout and "run directory:" not in done.stdout
