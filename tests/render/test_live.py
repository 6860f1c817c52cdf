"""The live progress display: a screen that fits a small terminal, and plain lines for CI."""

from __future__ import annotations

import fcntl
import io
import json
import os
import pty
import re
import select
import signal
import struct
import subprocess
import termios
import time
from collections.abc import Callable
from pathlib import Path

from rich.console import Console

from conftest import diagbench_argv, fake_command, run_cli, wait_until, write_spec
from diagbench.execute.slots import Slot
from diagbench.launch.process import sweep_tagged
from diagbench.records.record import AttemptRecord
from diagbench.records.store import RunDir
from diagbench.render.live import Progress, duration
from diagbench.spec.load import load_spec
from diagbench.spec.matrix import Cell
from diagbench.spec.plan import PlannedAttempt
from diagbench.vocab import Outcome

ROOT = Path(__file__).resolve().parents[2]


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def demo_planned() -> list[PlannedAttempt]:
    return [PlannedAttempt(cell, 1) for cell in load_spec(ROOT / "experiments" / "demo.yaml").cells]


def long_matrix(tmp_path: Path, cells: int) -> list[PlannedAttempt]:
    spec = tmp_path / "long.yaml"
    labels = ", ".join(f'"{i}"' for i in range(cells))
    spec.write_text(
        f"name: long\nserver: {{command: 'srv {{port}}'}}\nmatrix:\n  bs: {{env: BS, values: [{labels}]}}\n"
    )
    return [PlannedAttempt(cell, 1) for cell in load_spec(spec).cells]


def record(cell: Cell, name: str, outcome: str, failure_class: str | None = None, **kw) -> AttemptRecord:
    return AttemptRecord(
        cell_id=cell.id,
        repeat=1,
        attempt=name,
        params=dict(cell.params),
        command=[],
        env_changes={},
        outcome=Outcome(outcome),
        failure_class=failure_class,
        **kw,
    )


def console(terminal: bool, height: int = 40, width: int = 100) -> tuple[Console, io.StringIO]:
    buffer = io.StringIO()
    return Console(file=buffer, force_terminal=terminal, width=width, height=height, color_system=None), buffer


def screen(progress: Progress, width: int = 100, height: int = 15) -> list[str]:
    """Render one frame as the terminal would show it."""
    shot = Console(file=io.StringIO(), width=width, height=height, color_system=None, force_terminal=True)
    with shot.capture() as capture:
        shot.print(progress.frame())
    return capture.get().rstrip("\n").split("\n")


def test_a_long_matrix_fits_a_small_terminal_with_every_running_attempt_visible(tmp_path):
    planned = long_matrix(tmp_path, 30)
    clock = Clock()
    term, _ = console(terminal=True, height=15)
    progress = Progress(term, timeout_s=600, clock=clock)
    progress.on_open(RunDir(tmp_path), planned)
    progress.close()  # the frame is rendered by hand below, not by the refresh thread
    for i, item in enumerate(planned[:20]):
        progress.on_start(item, Slot(0))
        clock.now += 30
        outcome = ("ready", None) if i % 4 else ("failed", "oom")
        progress.on_done(item, record(item.cell, item.name, *outcome, time_to_outcome_s=29.5))
    for n, item in enumerate(planned[20:23]):
        progress.on_start(item, Slot(n, gpus=(str(2 * n), str(2 * n + 1))))
        progress.on_phase(item, f"capture bs={8 * (n + 1)}")
        clock.now += 10

    lines = screen(progress, height=15)
    text = "\n".join(lines)
    assert len(lines) <= 14  # never more than the terminal holds (one line kept free)
    assert lines[0] == "20/30 done · 3 running · 10m30s elapsed · ETA 5m15s"
    for n in range(3):  # every running attempt, with its phase, GPUs and time left
        row = next(line for line in lines if f"capture bs={8 * (n + 1)}" in line)
        assert f"{2 * n},{2 * n + 1}" in row
    assert re.search(r"capture bs=8 +0,1 +30\.0s +9m30s", text)
    assert "7 waiting" in text
    summary = next(line for line in lines if "earlier" in line)
    folded = int(summary.split()[0])
    shown = sum(1 for line in lines if re.search(r"\b(ready|failed:oom)\b +[\d.]+s", line))
    assert folded + shown == 20 and folded > 0
    assert "ready" in summary and "failed:oom" in summary


def test_when_everything_fits_nothing_is_folded(tmp_path):
    planned = demo_planned()
    clock = Clock()
    term, _ = console(terminal=True, height=40)
    progress = Progress(term, timeout_s=60, clock=clock)
    progress.on_open(RunDir(tmp_path), planned)
    progress.close()
    first = planned[0]
    progress.on_start(first, Slot(0))
    progress.on_phase(first, "capture bs=32")
    clock.now += 0.7
    progress.on_done(first, record(first.cell, first.name, "failed", "cuda_graph_capture", time_to_outcome_s=0.7))
    lines = screen(progress, height=40)
    assert not any("earlier" in line for line in lines)
    assert "kernel" in lines[1] and "inductor_graphs" in lines[1] and "GPUs" not in lines[1]
    assert any("failed:cuda_graph_capture" in line and "0.7s" in line for line in lines)
    assert f"{len(planned) - 1} waiting" in lines[-1]


def test_off_a_terminal_each_start_phase_and_end_is_one_unwrapped_line(tmp_path):
    planned = demo_planned()
    clock = Clock()
    plain, buffer = console(terminal=False, width=40)
    progress = Progress(plain, timeout_s=60, heartbeat_s=0, clock=clock)
    progress.on_open(RunDir(tmp_path), planned)
    first, second = planned[0], planned[1]
    progress.on_start(first, Slot(0, gpus=("3",)))
    clock.now += 4.2
    progress.on_phase(first, "capture bs=32")
    evidence = {"line_no": 29, "text": "Exception: Capture cuda graph failed: CUDA error: operation not permitted"}
    progress.on_done(
        first,
        record(first.cell, first.name, "failed", "cuda_graph_capture", time_to_outcome_s=4.7, evidence=evidence),
    )
    progress.on_done(second, record(second.cell, second.name, "skipped", reason="cannot change a verdict"))
    progress.close()
    lines = buffer.getvalue().splitlines()
    cell = first.cell.id
    assert lines[1:] == [
        f"[0/6 running 1] {cell}: launching on GPU 3",
        f"[0/6 running 1] {cell}: capture bs=32, 4.2s",
        f"[1/6 running 0] {cell}: failed:cuda_graph_capture after 4.7s: L29: {evidence['text']}",
        f"[2/6 running 0] {second.cell.id}: skipped: cannot change a verdict",
    ]  # 40 columns wide, and not one line broken


def test_the_heartbeat_names_every_running_attempt_with_its_phase_and_time(tmp_path):
    planned = long_matrix(tmp_path, 48)
    clock = Clock()
    plain, buffer = console(terminal=False)
    progress = Progress(plain, timeout_s=600, heartbeat_s=0, clock=clock)
    progress.on_open(RunDir(tmp_path), planned)
    for item in planned[:12]:
        progress.on_start(item, Slot(0))
        progress.on_done(item, record(item.cell, item.name, "ready", time_to_outcome_s=1.0))
    for item in planned[12:16]:
        progress.on_start(item, Slot(0))
    progress.on_phase(planned[12], "capture bs=16")
    clock.now += 192
    buffer.truncate(0)
    buffer.seek(0)
    progress.heartbeat()
    progress.close()
    lines = buffer.getvalue().splitlines()
    assert lines[0] == "[12/48 running 4] bs=12: capture bs=16, 3m12s"
    assert lines[1:] == [f"[12/48 running 4] bs={i}: launching, 3m12s" for i in (13, 14, 15)]


def test_the_heartbeat_runs_by_itself_off_a_terminal(tmp_path):
    planned = demo_planned()
    plain, buffer = console(terminal=False)
    progress = Progress(plain, heartbeat_s=0.05)
    progress.on_open(RunDir(tmp_path), planned)
    progress.on_start(planned[0], Slot(0))
    try:
        wait_until(
            lambda: buffer.getvalue().count(f"{planned[0].cell.id}: launching,") >= 2,
            timeout=10,
            what=lambda: f"two heartbeat lines; printed: {buffer.getvalue()!r}",
        )
    finally:
        progress.close()


def test_more_running_attempts_than_terminal_lines_fold_into_one_line(tmp_path):
    planned = long_matrix(tmp_path, 20)
    clock = Clock()
    term = Console(height=10, width=100, force_terminal=True, file=io.StringIO(), color_system=None)
    progress = Progress(term, timeout_s=600, clock=clock)
    progress.on_open(RunDir(tmp_path), planned)
    progress.close()
    for item in planned[:3]:
        progress.on_start(item, Slot(0))
        progress.on_done(item, record(item.cell, item.name, "ready", time_to_outcome_s=1.0))
    phases = [f"capture bs={8 * n}" for n in range(1, 9)] + ["load"] * 3 + [""]
    for item, phase in zip(planned[3:15], phases, strict=True):  # 12 running, each started 5 s after the last
        progress.on_start(item, Slot(0))
        if phase:
            progress.on_phase(item, phase)
        clock.now += 5

    lines = screen(progress, height=10)
    assert len(lines) <= 9  # one line kept free
    assert lines[0].startswith("3/20 done · 12 running")
    assert "3 earlier: 3 ready" in lines
    shown = [line for line in lines if re.match(r"\d+ +(capture|load|launching)", line)]
    assert [line.split()[0] for line in shown] == ["3", "4", "5", "6"]  # the oldest: closest to their timeout
    assert f"+{12 - len(shown)} more running: 4 capture, 3 load, 1 launching" in lines
    assert "5 waiting" in lines


def test_a_small_terminal_full_of_running_attempts_shows_what_fits_and_counts_the_rest(tmp_path):
    planned = long_matrix(tmp_path, 12)
    clock = Clock()
    progress = Progress(console(terminal=True, height=10)[0], timeout_s=600, clock=clock)
    progress.on_open(RunDir(tmp_path), planned)
    progress.close()
    for item in planned:
        progress.on_start(item, Slot(0))
        clock.now += 1
    lines = screen(progress, height=10)
    # a line kept free, the header, the table's header, 6 rows (the oldest), the fold
    assert len(lines) == 9
    assert [line.split()[0] for line in lines[2:8]] == [str(i) for i in range(6)]
    assert lines[-1] == "+6 more running: 6 launching"
    assert not any("waiting" in line or "earlier" in line for line in lines)


def test_a_resumed_run_counts_what_finished_before_as_done(tmp_path):
    planned = demo_planned()
    clock = Clock()
    progress = Progress(console(terminal=True, height=40)[0], timeout_s=60, clock=clock)
    before = [record(p.cell, p.name, "failed", "oom", time_to_outcome_s=3.0, gpus=["1"]) for p in planned[:3]]
    progress.on_open(RunDir(tmp_path), planned, before)
    progress.close()
    lines = screen(progress, height=40)
    assert lines[0] == "3/6 done · 0 running · 0.0s elapsed · ETA -"
    assert sum("failed:oom" in line and "3.0s" in line for line in lines) == 3
    assert lines[-1] == "3 waiting"
    item = planned[3]
    progress.on_start(item, Slot(0))
    clock.now += 10
    progress.on_done(item, record(item.cell, item.name, "ready", time_to_outcome_s=9.5))
    lines = screen(progress, height=40)
    assert lines[0] == "4/6 done · 0 running · 10.0s elapsed · ETA 20.0s"  # the pace of this diagbench's one
    assert lines[-1] == "2 waiting"


def test_resume_after_an_interruption_counts_the_earlier_attempts_in_its_plain_lines(tmp_path):
    gate = tmp_path / "gate"  # `await=gate:1` waits (up to 30 s) for a start line in it: none until the resume
    gate.write_text("")
    spec = write_spec(
        tmp_path,
        {"command": fake_command(), "ready": {"log": "^go$"}, "timeout": "90s"},
        matrix={
            "first": {"args": ["{value}", "out=go", "hang"], "values": ["sleep=0", "await=gate:1"]},
            "n": {"env": "N", "values": ["1", "2", "3"]},
        },
    )
    runs_dir = tmp_path / "runs"
    proc = subprocess.Popen(
        diagbench_argv("run", str(spec), "--runs-dir", str(runs_dir), "--parallel", "1"),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    try:
        wait_until(lambda: len(list(runs_dir.glob("latest/cells/*/result.json"))) >= 3, what="three records")
    finally:
        proc.send_signal(signal.SIGINT)
        proc.communicate(timeout=60)
    run = (runs_dir / "latest").resolve()
    outcomes = [json.loads(p.read_text())["outcome"] for p in run.glob("cells/*/result.json")]
    earlier = sum(outcome != "cancelled" for outcome in outcomes)
    assert proc.returncode == 130 and 3 <= earlier < 6

    gate.write_text('{"event": "start"}\n')
    resumed = run_cli("run", "--resume", str(run))
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    lines = resumed.stdout.splitlines()
    assert lines[0] == f"run directory: {run}  (6 attempt(s), {earlier} done before)"
    progress = [line for line in lines if line.startswith("[")]
    assert progress[0].startswith(f"[{earlier}/6 running 1] first=await=gate:1,")
    assert progress[-1].startswith("[6/6 running 0] first=await=gate:1,n=3: ready")
    wait_until(lambda: sweep_tagged(run) == [], timeout=5, what="no process left")


def in_terminal(argv: list[str], rows: int, cols: int, when: str, then: Callable[[], None]) -> tuple[int, str]:
    """Run `argv` on a pseudo-terminal of `rows` x `cols` to its end: its exit code and all it drew.
    `then()` is called once, as soon as `when` is drawn."""
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES")} | {"TERM": "xterm"}
    proc = subprocess.Popen(argv, stdin=slave, stdout=slave, stderr=slave, env=env, start_new_session=True)
    os.close(slave)
    drawn, called, deadline = b"", False, time.monotonic() + 120
    try:
        while time.monotonic() < deadline:
            if select.select([master], [], [], 0.2)[0]:
                try:
                    chunk = os.read(master, 65536)
                except OSError:  # EIO: every end of the terminal is closed
                    break
                if not chunk:
                    break
                drawn += chunk
            if not called and when.encode() in drawn:
                then()
                called = True
        else:
            raise AssertionError(f"{argv} did not end within 120s; it drew: {drawn[-2000:]!r}")
    finally:
        os.close(master)
        if proc.poll() is None:
            proc.send_signal(signal.SIGINT)
        proc.wait(timeout=60)
    return proc.returncode, drawn.decode("utf-8", "replace")


def test_on_a_terminal_twelve_running_attempts_fold_into_a_ten_line_window(tmp_path):
    gate = tmp_path / "gate"  # `await=gate:1`: every server waits for a line in it, so all 12 run at once
    gate.write_text("")
    spec = write_spec(
        tmp_path,
        {"command": fake_command("out=Load weight begin.", "await=gate:1", "out=go", "hang"), "ready": {"log": "^go$"}},
        matrix={"n": {"env": "N", "values": [str(n) for n in range(12)]}},
    )
    argv = diagbench_argv("run", str(spec), "--runs-dir", str(tmp_path / "runs"), "--parallel", "12")
    code, drawn = in_terminal(argv, 10, 100, "more running", lambda: gate.write_text('{"event": "start"}\n'))
    plain = re.sub(r"\x1b\[[0-9;]*m", "", drawn)
    assert code == 0 and "Traceback" not in plain, plain
    assert re.search(r"\+[1-9]\d* more running: \d+ (load|launching)", plain)
    # rich redraws a frame by erasing its lines, going up one at a time: never 9 lines up (a 10-line frame)
    assert max(m.count("\x1b[1A") for m in re.findall(r"(?:\x1b\[2K\x1b\[1A)+", plain)) <= 8
    assert sweep_tagged((tmp_path / "runs" / "latest").resolve()) == []


def test_durations_read_short():
    assert [duration(s) for s in (4.25, 59.9, 192, 3599, 3600 + 240)] == ["4.2s", "59.9s", "3m12s", "59m59s", "1h04m"]
