"""A run directory someone else shaped: its `.lock` planted as a link to a file, a cell folder
as a link to another folder. `cleanup` and `run`'s start-up sweep record a dead diagbench's
attempts there; they must never truncate a link's target, write a record through a linked
folder, nor write into another user's run directory.

Real runs of the fake server, made to look like a dead diagbench's (its records and verdicts
removed), then planted as a hostile hand would; a real second user where one is needed."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from conftest import diagbench_argv, fake_command, write_spec

PRECIOUS = "precious: never truncated\n"
OTHER = "dbdoorsother"
ROOT_ONLY = pytest.mark.skipif(
    os.geteuid() != 0 or shutil.which("useradd") is None, reason="needs root and useradd (a second user)"
)


@pytest.fixture
def dead_run(tmp_path: Path) -> Path:
    """A run whose diagbench 'died' after launching its one attempt: a server.log, no record."""
    spec = write_spec(
        tmp_path, {"command": fake_command("out=starting", "err=torch.OutOfMemoryError: CUDA OOM", "exit=1")}
    )
    done = subprocess.run(diagbench_argv("run", str(spec), "--runs-dir", str(tmp_path / "runs")), capture_output=True)
    assert done.returncode == 0, done.stderr
    run = next((tmp_path / "runs").glob("2*"))
    (run / "verdicts.json").unlink()
    cell = next((run / "cells").iterdir())
    (cell / "result.json").unlink()
    (cell / "server.log").touch()  # launched after the run was last judged
    return run


def cleanup(tmp_path: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    argv = diagbench_argv("cleanup", "--runs-dir", str(tmp_path / "runs"), *extra)
    return subprocess.run(argv, capture_output=True, text=True, timeout=120)


def test_the_dead_run_is_recorded_when_nothing_is_planted(dead_run, tmp_path):
    """The baseline the attacks below must not change: an orphan is recorded as cancelled."""
    done = cleanup(tmp_path)
    assert done.returncode == 0, done.stderr
    cell = next((dead_run / "cells").iterdir())
    assert '"outcome": "cancelled"' in (cell / "result.json").read_text()


@pytest.mark.parametrize("how", ["cleanup", "run"])
def test_a_lock_planted_as_a_link_is_never_truncated(dead_run, tmp_path, how):
    victim = tmp_path / "victim.txt"
    victim.write_text(PRECIOUS)
    (dead_run / ".lock").unlink()
    (dead_run / ".lock").symlink_to(victim)
    if how == "cleanup":
        done = cleanup(tmp_path)
    else:  # a plain run's start-up sweep looks in the same runs directory
        (tmp_path / "other").mkdir()
        spec = write_spec(
            tmp_path / "other", {"command": fake_command("out=The server is fired up and ready to roll!")}
        )
        done = subprocess.run(
            diagbench_argv("run", str(spec), "--runs-dir", str(tmp_path / "runs")), capture_output=True, text=True
        )
    assert done.returncode == 0, done.stderr
    assert victim.read_text() == PRECIOUS
    assert "Traceback" not in done.stderr
    assert not any((dead_run / "cells").glob("*/result.json"))  # a run it cannot lock is not its to write


def test_a_cell_folder_planted_as_a_link_is_never_written_through(dead_run, tmp_path):
    elsewhere = tmp_path / "elsewhere"
    cell = next((dead_run / "cells").iterdir())
    shutil.move(cell, elsewhere)
    cell.symlink_to(elsewhere)
    (elsewhere / "server.log").touch()
    done = cleanup(tmp_path)
    assert done.returncode == 0, done.stderr
    assert not (elsewhere / "result.json").exists()
    assert sorted(p.name for p in elsewhere.iterdir()) == ["server.log"]
    report = subprocess.run(diagbench_argv("report", str(dead_run), "--format", "json"), capture_output=True, text=True)
    assert "Traceback" not in report.stderr


def test_a_lock_planted_as_a_fifo_never_blocks(dead_run, tmp_path):
    """Asking who holds a run (its id taken again) opens its `.lock`: a FIFO there never blocks."""
    (dead_run / ".lock").unlink()
    os.mkfifo(dead_run / ".lock")
    spec = write_spec(tmp_path, {"command": fake_command("out=The server is fired up and ready to roll!")})
    argv = diagbench_argv("run", str(spec), "--runs-dir", str(tmp_path / "runs"), "--run-id", dead_run.name)
    done = subprocess.run(argv, capture_output=True, text=True, timeout=60)
    assert done.returncode == 2, done.stderr
    assert f"run directory {dead_run} already exists (choose another --run-id)" in done.stderr
    assert cleanup(tmp_path).returncode == 0


@ROOT_ONLY
def test_another_users_run_directory_is_never_written(dead_run, tmp_path):
    if subprocess.run(["id", OTHER], capture_output=True).returncode != 0:
        subprocess.run(["useradd", "--no-create-home", "--shell", "/bin/sh", OTHER], check=True, capture_output=True)
    shutil.chown(dead_run, OTHER)
    shutil.chown(dead_run / ".lock", OTHER)
    before = sorted(p.name for p in dead_run.rglob("*"))
    done = cleanup(tmp_path)
    assert done.returncode == 0, done.stderr
    assert sorted(p.name for p in dead_run.rglob("*")) == before
    assert (dead_run / ".lock").stat().st_uid != 0


@pytest.mark.parametrize("planted", ["link", "fifo"])
def test_a_resumed_attempt_never_writes_its_log_through_a_planted_link_or_fifo(dead_run, tmp_path, planted):
    """`run --resume` launches the unrecorded attempt again: its server.log, planted as a link
    to another file, was truncated and overwritten with the server's output; a FIFO hung it."""
    victim = tmp_path / "victim.txt"
    victim.write_text(PRECIOUS)
    log = next((dead_run / "cells").iterdir()) / "server.log"
    log.unlink()
    if planted == "link":
        log.symlink_to(victim)
    else:
        os.mkfifo(log)
    spec = tmp_path / "spec.yaml"
    argv = diagbench_argv("run", str(spec), "--resume", str(dead_run))
    done = subprocess.run(argv, capture_output=True, text=True, timeout=120)
    assert done.returncode in (0, 1), done.stderr
    assert victim.read_text() == PRECIOUS
    assert log.is_file() and not log.is_symlink() and "starting" in log.read_text()
