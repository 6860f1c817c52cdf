"""`diff` leads with what changed underneath: the server's packages, driver, variables, and
start-up phases that moved beyond the noise of the repeats."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import venv
from pathlib import Path
from typing import Any

from conftest import FAKE, write_spec
from diagbench.judge.underneath import PhaseShift, compare_environments, phase_shifts
from diagbench.records.record import AttemptRecord, PhaseChange
from diagbench.vocab import Outcome

READY = "The server is fired up and ready to roll!"


def server_venv(folder: Path, packages: dict[str, str]) -> Path:
    """A real venv whose site-packages holds real (metadata-only) distributions."""
    venv.EnvBuilder(with_pip=False, symlinks=True).create(folder)
    site = next((folder / "lib").glob("python*/site-packages"))
    for name, version in packages.items():
        info = site / f"{name}-{version}.dist-info"
        info.mkdir()
        (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
    return folder / "bin" / "python"


def env_of(packages: dict[str, str], driver: str = "580.1", **variables: str) -> dict[str, Any]:
    dists = [{"name": n, "version": v, "origin": {"kind": "index"}} for n, v in packages.items()]
    python: dict[str, object] = {"interpreter": "/v/bin/python", "python": "3.12.1", "distributions": dists}
    python["torch"] = {"torch": packages.get("torch"), "cuda_runtime": "12.8", "nccl": "2.27.3"}
    return {"python": python, "gpus": [{"name": "H200", "driver": driver}], "variables": variables}


def test_the_environment_changes_are_named_and_what_stayed_is_said() -> None:
    a = env_of({"torch": "2.10.0", "flashinfer": "0.2.5", "six": "1.16.0", "gone": "1.0"})
    b = env_of({"torch": "2.11.0", "flashinfer": "0.2.6", "six": "1.16.0", "new": "0.1"}, NCCL_DEBUG="INFO")
    underneath = compare_environments(a, b)
    assert underneath.words == (
        "torch 2.10.0 -> 2.11.0, flashinfer 0.2.5 -> 0.2.6, gone 1.0 (removed), new 0.1 (added), "
        "NCCL_DEBUG INFO (added), CUDA same, NCCL same, driver same"
    )
    assert compare_environments(a, env_of({**{"torch": "2.10.0"}}, driver="590.2")).changes[-1].words == (
        "driver 580.1 -> 590.2"
    )
    assert compare_environments(None, b).words == "environment not recorded in one run"


def record(cell: str, seconds: float, phases: list[tuple[str, float]], repeat: int = 1) -> AttemptRecord:
    return AttemptRecord(
        cell_id=cell,
        repeat=repeat,
        attempt=f"{cell}-r{repeat}",
        params={},
        command=[],
        env_changes={},
        outcome=Outcome.READY,
        time_to_outcome_s=seconds,
        phases=[PhaseChange(n, t) for n, t in phases],
    )


def test_a_phase_is_slower_only_beyond_the_spread_of_its_repeats() -> None:
    before = [record("c", 60, [("load", 0), ("capture", 10)], r) for r in (1, 2)]
    after = [record("c", 100, [("load", 0), ("capture", 10)], 1), record("c", 101, [("load", 1), ("capture", 10)], 2)]
    assert phase_shifts(before, after) == [
        PhaseShift("c", "capture", 50.0, 90.5, 1.0),
        PhaseShift("c", "start-up", 60.0, 100.5, 1.0),
    ]
    assert phase_shifts(before, after)[0].words == "capture 40 s slower (50.0 s -> 90.5 s)"
    noisy = [record("c", 60, [("capture", 10)], 1), record("c", 120, [("capture", 10)], 2)]
    assert phase_shifts(noisy, after) == []  # a 60 s spread hides a 20 s move


def run(spec: Path, runs: Path, run_id: str) -> None:
    argv = [sys.executable, "-m", "diagbench", "run", str(spec), "--runs-dir", str(runs), "--run-id", run_id]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr


def test_diff_leads_with_the_packages_that_changed_underneath(tmp_path: Path) -> None:
    old = server_venv(tmp_path / "old", {"flashinfer": "0.2.5", "torch": "2.10.0", "six": "1.16.0"})
    new = server_venv(tmp_path / "new", {"flashinfer": "0.2.6", "torch": "2.11.0", "six": "1.16.0"})
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    ready = [f"out={READY}", "hang"]
    run(write_spec(tmp_path / "a", {"command": [str(old), str(FAKE), *ready]}), tmp_path / "runs", "before")
    slow = [str(new), str(FAKE), "sleep=3", *ready]
    run(write_spec(tmp_path / "b", {"command": slow, "env": {"NCCL_DEBUG": "INFO"}}), tmp_path / "runs", "after")
    argv = [sys.executable, "-m", "diagbench", "diff", str(tmp_path / "runs/before"), str(tmp_path / "runs/after")]
    wide = {**os.environ, "COLUMNS": "300"}  # one line per change (at 80 columns they wrap at words)
    text = subprocess.run(argv, capture_output=True, text=True, timeout=60, env=wide)
    assert text.returncode == 0, text.stderr
    lines = text.stdout.splitlines()
    assert lines[0] == "before -> after"
    assert lines.pop(1).startswith("warning: the spec 't' changed between the runs")  # the command changed
    assert lines[1] == (
        f"underneath: interpreter {old} -> {new}, torch 2.10.0 -> 2.11.0, flashinfer 0.2.5 -> 0.2.6, "
        "NCCL_DEBUG INFO (added)"
    )
    assert lines[2].startswith("  cell only=x: start-up 3 s slower (")
    assert lines[3] == "no change in outcomes or verdicts"
    data = json.loads(subprocess.run([*argv, "--json"], capture_output=True, text=True, timeout=60).stdout)
    torch = {"kind": "package", "name": "torch", "before": "2.10.0", "after": "2.11.0"}
    assert torch in data["environment"]["changes"]
    assert data["phases"][0]["phase"] == "start-up"


def test_the_issue_report_shows_the_server_environment_in_words_and_its_packages(tmp_path: Path) -> None:
    python = server_venv(tmp_path / "v", {"flashinfer": "0.2.6", "six": "1.16.0"})
    spec = write_spec(tmp_path, {"command": [str(python), str(FAKE), "err=Segmentation fault", "exit=139"]})
    argv = [sys.executable, "-m", "diagbench", "run", str(spec), "--runs-dir", str(tmp_path / "runs"), "--run-id", "r"]
    assert subprocess.run(argv, capture_output=True, timeout=120).returncode == 0  # no expect: a failure is data
    argv = [sys.executable, "-m", "diagbench", "report", str(tmp_path / "runs/r"), "--format", "issue"]
    text = subprocess.run(argv, capture_output=True, text=True, timeout=60).stdout
    assert f"- server interpreter: {python} (Python {sys.version.split()[0]}, 2 dists)" in text
    assert "```text\nflashinfer==0.2.6\nsix==1.16.0\n```" in text
