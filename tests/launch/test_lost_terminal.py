"""A terminal that goes away never stops a run: `diagbench run spec | head -1`, a dropped
SSH connection (its pty closed). The run writes every record, verdicts.json and
report.html, and exits with its own code (130 where the hangup came as SIGHUP).

Every diagbench here is a real process, with a real pipe or pty, and so is every server."""

from __future__ import annotations

import fcntl
import io
import json
import os
import pty
import subprocess
import termios
from pathlib import Path

import pytest
from rich.console import Console

from conftest import diagbench_argv, fake_command, wait_until, write_spec
from diagbench.execute.pipeline import RunOptions, execute
from diagbench.launch.process import sweep_tagged
from diagbench.render.live import Progress
from diagbench.spec.load import load_spec

READY = "The server is fired up and ready to roll!"
EIGHT = {"n": {"env": "N", "values": [str(n) for n in range(1, 9)]}}
TWO = {"n": {"env": "N", "values": ["1", "2"]}}


def _gated_spec(folder: Path, go: Path, **top: object) -> Path:
    """Eight cells whose servers become ready only once `go` exists: the test decides that the
    run is still going when its terminal is lost."""
    server = {"command": fake_command(f"wait-for={go}", f"out={READY}", "hang"), "timeout": "90s"}
    return write_spec(folder, server, EIGHT, expect=[{"when": {"n": "1"}, "outcome": "ready"}], **top)


def _outcomes(run: Path) -> list[str]:
    return [json.loads(p.read_text())["outcome"] for p in sorted(run.glob("cells/*/result.json"))]


def test_a_pipe_closed_after_one_line_stops_nothing(tmp_path):
    go = tmp_path / "go"
    spec = _gated_spec(tmp_path, go)
    runs_dir = tmp_path / "runs"
    argv = diagbench_argv("run", str(spec), "--runs-dir", str(runs_dir), "--parallel", "2")
    run = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    head = subprocess.Popen(["head", "-1"], stdin=run.stdout, stdout=subprocess.PIPE)
    assert run.stdout is not None
    run.stdout.close()  # head alone reads the pipe: once it exits, every write to it fails
    first = head.communicate(timeout=60)[0].decode()
    go.touch()
    stderr = run.communicate(timeout=180)[1].decode()
    assert first.startswith("run directory: ")
    assert run.returncode == 0, stderr  # the run's own code: every expect held
    assert "Traceback" not in stderr
    folder = (runs_dir / "latest").resolve()
    assert _outcomes(folder) == ["ready"] * 8
    assert json.loads((folder / "verdicts.json").read_text()) == []
    assert "<html" in (folder / "report.html").read_text()
    assert sweep_tagged(folder) == []


def _on_a_pty(argv: list[str], controlling: bool, stderr: Path) -> tuple[subprocess.Popen[bytes], int]:
    """diagbench with its stdin and stdout on a new pty (stderr to a file, to be read after),
    the pty its controlling terminal where `controlling`, as a login shell's is."""
    master, slave = pty.openpty()

    def take_the_terminal() -> None:
        os.setsid()
        if controlling:
            fcntl.ioctl(0, termios.TIOCSCTTY, 0)

    with stderr.open("wb") as err:
        proc = subprocess.Popen(argv, stdin=slave, stdout=slave, stderr=err, preexec_fn=take_the_terminal)
    os.close(slave)
    return proc, master


def _read_until(master: int, text: bytes) -> bytes:
    seen = b""
    while text not in seen:
        chunk = os.read(master, 4096)
        assert chunk, seen
        seen += chunk
    return seen


def test_a_lost_pty_without_a_hangup_lets_the_run_finish(tmp_path):
    """The pty's other end closed but no SIGHUP (not the controlling terminal): every
    write fails with EIO from then on, and the run goes on to its end."""
    go = tmp_path / "go"
    runs_dir = tmp_path / "runs"
    argv = diagbench_argv("run", str(_gated_spec(tmp_path, go)), "--runs-dir", str(runs_dir))
    proc, master = _on_a_pty(argv, controlling=False, stderr=tmp_path / "stderr")
    try:
        _read_until(master, b"run directory: ")
        wait_until(lambda: list(runs_dir.glob("2*/cells/*/server.log")), what="the first launch")
    finally:
        os.close(master)  # the terminal is gone
    go.touch()
    assert proc.wait(timeout=180) == 0, (tmp_path / "stderr").read_text()
    assert "Traceback" not in (tmp_path / "stderr").read_text()
    folder = (runs_dir / "latest").resolve()
    assert _outcomes(folder) == ["ready"] * 8
    assert (folder / "verdicts.json").is_file() and (folder / "report.html").is_file()
    assert sweep_tagged(folder) == []


def test_a_hangup_of_the_controlling_pty_stops_the_run_as_ctrl_c_does(tmp_path):
    """An SSH connection dropped: SIGHUP, then EIO on every write. The run stops in order,
    records what it has, writes verdicts.json and report.html, and exits 130."""
    runs_dir = tmp_path / "runs"
    argv = diagbench_argv("run", str(_gated_spec(tmp_path, tmp_path / "never")), "--runs-dir", str(runs_dir))
    proc, master = _on_a_pty(argv, controlling=True, stderr=tmp_path / "stderr")
    try:
        _read_until(master, b"run directory: ")
        wait_until(lambda: list(runs_dir.glob("2*/cells/*/server.log")), what="the first launch")
    finally:
        os.close(master)  # the kernel hangs the terminal up: SIGHUP to diagbench, its session's leader
    assert proc.wait(timeout=120) == 130, (tmp_path / "stderr").read_text()
    assert "Traceback" not in (tmp_path / "stderr").read_text()
    folder = (runs_dir / "latest").resolve()
    assert _outcomes(folder) == ["cancelled"] * 8
    assert (folder / "verdicts.json").is_file() and (folder / "report.html").is_file()
    assert sweep_tagged(folder) == []


class _Closing(io.StringIO):
    """A console's file whose reader goes away after its first write."""

    def __init__(self, error: BaseException, lines: int = 1):
        super().__init__()
        self.error, self.left = error, lines

    def write(self, text: str) -> int:
        if self.left <= 0:
            raise self.error
        self.left -= 1
        return super().write(text)


@pytest.mark.parametrize("terminal", [False, True], ids=["plain lines", "live screen"])
@pytest.mark.parametrize(
    "error", [BrokenPipeError(32, "Broken pipe"), OSError(5, "Input/output error"), SystemExit(1)], ids=repr
)
def test_the_live_view_goes_dark_when_its_console_fails(tmp_path, terminal, error):
    """Whatever the console raises (EPIPE, EIO, rich's own SystemExit on a broken pipe), the
    events the attempts' threads send never raise: every attempt runs and is recorded."""
    sink = _Closing(error)
    progress = Progress(Console(file=sink, width=100, force_terminal=terminal), heartbeat_s=0)
    spec = load_spec(write_spec(tmp_path, {"command": fake_command(f"out={READY}", "hang")}, TWO))
    try:
        result = execute(spec, RunOptions(tmp_path / "runs"), progress)
    finally:
        progress.close()
    assert [r.outcome.value for r in result.records] == ["ready", "ready"]
    assert [p.name for p in sorted(result.run_dir.cells.glob("*/result.json"))] == ["result.json"] * 2
    assert sink.left == 0 and sink.getvalue().startswith("run directory: " if not terminal else "")
    assert sweep_tagged(result.run_dir.path) == []
