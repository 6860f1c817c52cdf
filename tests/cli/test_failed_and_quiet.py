"""`run --failed RUN` runs again only the cells that did not come up; `--quiet` leaves the final
tables and the exit code (issue 37)."""

from __future__ import annotations

import json
from pathlib import Path

from conftest import fake_command, run_cli, write_spec

OOM = "err=torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB"


def _spec(tmp_path: Path) -> Path:
    return write_spec(
        tmp_path,
        {"command": fake_command(), "ready": {"log": "^up$"}},
        matrix={"case": {"args": ["{value}", "hang"], "values": {"a": "out=up", "b": OOM, "c": "out=up"}}},
        name="rerun",
    )


def test_failed_runs_again_only_the_cells_that_did_not_come_up(tmp_path: Path) -> None:
    spec = _spec(tmp_path)
    first = run_cli("run", str(spec), "--run-id", "one", cwd=tmp_path)
    assert first.returncode == 0, first.stderr
    again = run_cli("run", "--failed", "runs/one", "--run-id", "two", cwd=tmp_path)
    assert again.returncode == 0, again.stderr
    assert "diagbench: note: a new run of the 1 cell(s) that did not come up in runs/one" in again.stderr
    records = [json.loads(p.read_text()) for p in (tmp_path / "runs/two/cells").glob("*/result.json")]
    assert [(r["params"], r["outcome"]) for r in records] == [({"case": "b"}, "failed")]
    spec.write_text(spec.read_text().replace(OOM, "out=up"))  # fixed: the given spec is used
    fixed = run_cli("run", str(spec), "--failed", "runs/two", "--run-id", "three", cwd=tmp_path)
    assert fixed.returncode == 0, fixed.stderr
    done = run_cli("run", "--failed", "runs/three", cwd=tmp_path)
    assert done.returncode == 2 and "runs/three: every cell came up; there is nothing to run again" in done.stderr
    both = run_cli("run", "--failed", "runs/one", "--resume", "runs/one", cwd=tmp_path)
    assert both.returncode == 2 and "give one of them" in both.stderr


def test_quiet_leaves_the_final_tables_and_the_exit_code(tmp_path: Path) -> None:
    spec = _spec(tmp_path)
    loud = run_cli("run", str(spec), "--run-id", "loud", "--gpus", "0,1", cwd=tmp_path)
    quiet = run_cli("run", str(spec), "--run-id", "quiet", "--gpus", "0,1", "--quiet", cwd=tmp_path)
    assert loud.returncode == quiet.returncode == 0, quiet.stderr
    assert "note:" in loud.stderr and "note:" not in quiet.stderr
    table = quiet.stdout.index("rerun: outcomes")
    assert quiet.stdout[:table] == "", quiet.stdout  # nothing before the final tables
    assert loud.stdout.index("rerun: outcomes") > 0  # the live lines were there
    assert "failed:oom" in quiet.stdout[table:] and "runs/quiet" in quiet.stdout[table:]
