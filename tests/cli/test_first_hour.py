"""Small things a new user meets in the first hour (issue: the first hour of a new user)."""

from __future__ import annotations

import os
import signal
import subprocess
from pathlib import Path

from conftest import diagbench_argv, fake_command, wait_until, write_spec
from diagbench.launch.process import sweep_tagged

OOM = "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB"


def test_a_server_that_exits_by_itself_after_its_failure_line_keeps_its_exit_code(runs) -> None:
    # a long settle window: the decision waits for the exit (how fast a loaded machine reaps it
    # is not the point here; a server gone before the teardown is)
    r = runs.one({"command": fake_command(f"err={OOM}", "exit=3"), "settle": "5s"})
    assert (r.outcome, r.failure_class) == ("failed", "oom")
    assert (r.exit_code, r.signal) == (3, None)  # was null: decided on the line, gone before the SIGTERM


def test_a_server_the_teardown_stopped_has_no_exit_code_of_its_own(runs) -> None:
    r = runs.one({"command": fake_command(f"err={OOM}", "hang")})
    assert r.outcome == "failed" and r.exit_code is None and r.signal is None
    assert [k.signal for k in r.killed if k.pid] and r.killed[0].signal == "SIGTERM"


def test_an_interrupted_run_counts_what_it_launched_and_what_it_never_did(tmp_path: Path) -> None:
    spec = write_spec(
        tmp_path,
        {"command": fake_command("out=Load weight begin.", "hang"), "ready": {"log": "never"}, "timeout": "90s"},
        matrix={"n": {"env": "N", "values": ["1", "2", "3"]}},
    )
    proc = subprocess.Popen(
        diagbench_argv("run", str(spec), "--runs-dir", str(tmp_path / "runs")),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        env={**os.environ, "COLUMNS": "200"},
    )
    try:
        run_link = tmp_path / "runs" / "latest"
        wait_until(lambda: run_link.exists() and sweep_tagged(run_link.resolve()), what="the first launch")
    finally:
        proc.send_signal(signal.SIGINT)
        output = proc.communicate(timeout=60)[0].decode()
    assert proc.returncode == 130, output
    assert "3 attempts: 1 launched (1 cancelled while it ran), 2 cancelled before launch" in output
