"""An attempt spanning nodes on Slurm (`server.nodes: N`): one job of N nodes, one srun step with a
task per node, the nodes' output merged behind `[node N] `. CI's Slurm has one node, so the
span is tested there over one node (a real job step, srun's real labels), and a spec asking for
two is refused by Slurm's own words before anything runs; spanning two hosts is tested on Ray
(tests/execute/test_ray.py)."""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import FAKE
from diagbench.execute.remote.nodes import NODES_FILE
from diagbench.execute.slurm.jobs import SlurmSettings
from diagbench.execute.slurm.span import split_label
from diagbench.execute.slurm.worker import spanned
from diagbench.spec.executor import ExecutorSpec
from diagbench.spec.load import load_spec

ROOT = Path(__file__).resolve().parents[2]


def test_srun_labels_are_read_as_tasks_and_sruns_own_lines_left_alone() -> None:
    assert split_label(b"1: [rank1]: boom") == (1, b"[rank1]: boom")
    assert split_label(b" 7: x") == (7, b"x")  # padded to the widest task number
    assert split_label(b"srun: error: n1: task 1: Exited with exit code 3") == (
        None,
        b"srun: error: n1: task 1: Exited with exit code 3",
    )
    assert split_label(b"12:30:01 INFO ready") == (None, b"12:30:01 INFO ready")  # a clock is not a label


def test_a_job_of_n_nodes_asks_for_them_with_one_task_each(tmp_path: Path) -> None:
    spec = tmp_path / "s.yaml"
    spec.write_text(
        "name: s\nserver: {command: [python3, -V], ready: {log: x}, nodes: 2, gpus: 1}\nmatrix: {a: {env: A, values: [x]}}\n"
    )
    settings = SlurmSettings.of(ExecutorSpec(kind="slurm"), load_spec(spec).server)
    options = settings.sbatch_options()
    assert "--nodes=2" in options and "--ntasks-per-node=1" in options and "--gres=gpu:1" in options
    assert "--nodes=2" not in settings.sbatch_options(with_gpus=False)  # the probe job needs one node
    server = spanned(load_spec(spec).server, tmp_path)
    assert server.command[1:4] == ("-m", "diagbench.execute.slurm.span", "--nodes")
    assert server.command[-3:] == ("--", "python3", "-V")


@pytest.mark.slurm
@pytest.mark.parametrize("case", ["exit", "term"])
def test_the_span_runs_a_real_step_and_names_the_node_that_ended(tmp_path: Path, case: str) -> None:
    folder = tmp_path / "cells" / "a"
    folder.mkdir(parents=True)
    record = folder / NODES_FILE
    server = [sys.executable, str(FAKE), "out=hello from the node", "exit=3" if case == "exit" else "hang"]
    span = [
        sys.executable,
        "-m",
        "diagbench.execute.slurm.span",
        "--nodes",
        "1",
        "--grace",
        "3",
        "--record",
        str(record),
        "--",
        *server,
    ]
    job = ["sbatch", "--parsable", "--nodes=1", "--time=2", f"--chdir={tmp_path}", f"--output={folder / 'out.txt'}"]
    env_path = f"PYTHONPATH={ROOT}"
    script = "#!/bin/sh\n" + (
        "exec env " + env_path + " " + shlex.join(span)
        if case == "exit"
        else f"env {env_path} {shlex.join(span)} & pid=$!\nsleep 4\nkill -TERM $pid\nwait $pid\n"
    )
    job_id = subprocess.run(job, input=script, capture_output=True, text=True, check=True).stdout.strip()
    try:
        subprocess.run(
            ["sh", "-c", f"while squeue -h -j {job_id} 2>/dev/null | grep -q .; do sleep 0.5; done"],
            timeout=120,
            check=True,
        )
    finally:
        subprocess.run(["scancel", job_id], check=False)
    out = (folder / "out.txt").read_text()
    assert "[node 0] hello from the node" in out, out
    seen = json.loads(record.read_text())
    node = seen["nodes"][0]
    assert node["pid"] and node["host"]
    if case == "exit":
        assert seen["first"] == 0 and node["exit_code"] == 3, seen
    else:  # stopped by SIGTERM: the node's process was stopped (whole), not the first to end on its own
        assert seen["first"] is None and node["signal"] in ("SIGTERM", "SIGKILL"), seen
    with open(folder / "out.txt") as handle:
        assert "Traceback" not in handle.read()


@pytest.mark.slurm
def test_two_nodes_on_a_one_node_cluster_are_refused_in_slurms_words_before_any_job(tmp_path: Path) -> None:
    spec = tmp_path / "s.yaml"
    spec.write_text(
        "name: n2\nserver: {command: [python3, -c, 'print(1)'], ready: {log: '1'}, nodes: 2, timeout: 30s}\n"
        "matrix: {a: {env: A, values: [x]}}\n"
    )
    runs = tmp_path / "runs"
    done = subprocess.run(
        [sys.executable, "-m", "diagbench", "run", str(spec), "--executor", "slurm", "--runs-dir", str(runs)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2, done.stderr
    assert "Slurm would not take the attempts' jobs" in done.stderr and "node configuration" in done.stderr
    assert "Traceback" not in done.stderr
    assert not runs.exists() or not [p for p in runs.iterdir() if not p.name.startswith(".")]
