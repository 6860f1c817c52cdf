"""Files read back from a run directory are regular files inside it: a `result.json` that is a
link (to /etc/shadow, say) is not followed, a `server.log` link's target never reaches
report.html, and a FIFO in place of `server.log` neither hangs `report` nor tracebacks.
Real runs of a real fake server; the files are then swapped as a hostile hand would."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from conftest import diagbench_argv, fake_command, write_spec

SECRET = "SECRET-root:$6$not-for-you"


@pytest.fixture
def failed_run(tmp_path: Path) -> Path:
    spec = write_spec(
        tmp_path, {"command": fake_command("out=starting", "err=torch.OutOfMemoryError: CUDA out of memory.", "exit=1")}
    )
    done = subprocess.run(diagbench_argv("run", str(spec), "--runs-dir", str(tmp_path / "runs")), capture_output=True)
    assert done.returncode == 0, done.stderr
    return next((tmp_path / "runs").glob("2*"))


def secret_file(tmp_path: Path) -> Path:
    secret = tmp_path / "shadow"
    secret.write_text("".join(f'{{"{SECRET}": {i}}}\n' for i in range(5)))
    return secret


def cell(run: Path) -> Path:
    return next((run / "cells").iterdir())


def report(run: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(diagbench_argv("report", str(run), *args), capture_output=True, text=True, timeout=60)


def test_a_result_json_link_is_not_followed(failed_run, tmp_path):
    result = cell(failed_run) / "result.json"
    result.unlink()
    result.symlink_to(secret_file(tmp_path))
    done = report(failed_run, "--format", "json")
    assert "symbolic link" in done.stderr, done.stderr
    assert SECRET not in done.stdout + done.stderr
    assert "Traceback" not in done.stderr


def test_a_server_log_links_target_never_reaches_the_report(failed_run, tmp_path):
    log = cell(failed_run) / "server.log"
    log.unlink()
    log.symlink_to(secret_file(tmp_path))
    for form in ("html", "junit", "md", "json", "table"):
        done = report(failed_run, "--format", form)
        assert done.returncode in (0, 1), done.stderr
        assert SECRET not in done.stdout, form


def test_a_fifo_server_log_neither_hangs_nor_tracebacks(failed_run):
    log = cell(failed_run) / "server.log"
    log.unlink()
    os.mkfifo(log)
    for form in ("html", "junit", "table"):
        done = report(failed_run, "--format", form)  # a reader blocked on the FIFO would time out here
        assert done.returncode in (0, 1), done.stderr
        assert "Traceback" not in done.stderr
