"""GPU leases: two diagbench processes on one host never put servers on one GPU at once.
A slot waits for its GPUs while another diagbench holds them, says so, and Ctrl-C ends the
wait. Every server is a real process, every diagbench a real one; no GPU needed (the ids are
used as given, and the leases are the same)."""

from __future__ import annotations

import io
import json
import os
import signal
import subprocess
import threading
from itertools import combinations
from pathlib import Path
from typing import IO, Any

from rich.console import Console

from conftest import diagbench_argv, fake_command, wait_until, write_spec
from diagbench.execute.slots import Slot
from diagbench.launch.gpulease import LOCK_DIR, LOCKS_VAR, hold_gpus, lock_dir
from diagbench.launch.process import sweep_tagged
from diagbench.records.store import RunDir
from diagbench.render.live import Progress
from diagbench.spec.load import load_spec
from diagbench.spec.plan import PlannedAttempt

READY = "The server is fired up and ready to roll!"
TWO = {"n": {"env": "N", "values": ["1", "2"]}}


def lifetimes(journal: Path) -> list[dict[str, Any]]:
    """One {pid, gpus, start, end} per server, from the lines it journalled."""
    spans: dict[int, dict[str, Any]] = {}
    for entry in map(json.loads, journal.read_text().splitlines()):
        spans.setdefault(entry["pid"], {"gpus": entry["gpus"]})[entry["event"]] = entry["t"]
    return list(spans.values())


class Lines:
    """A diagbench's plain output, read as it comes (a thread drains the pipe)."""

    def __init__(self, stream: IO[str]):
        self.lines: list[str] = []
        self.thread = threading.Thread(target=self._read, args=(stream,), daemon=True)
        self.thread.start()

    def _read(self, stream: IO[str]) -> None:
        for line in stream:
            self.lines.append(line.rstrip("\n"))

    def has(self, text: str) -> bool:
        return any(text in line for line in self.lines)


def start(spec: Path, *args: str) -> tuple[subprocess.Popen[str], Lines]:
    argv = diagbench_argv("run", str(spec), "--runs-dir", str(spec.parent / "runs"), "--gpus", "0", *args)
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    assert proc.stdout is not None
    return proc, Lines(proc.stdout)


def two_specs(tmp_path: Path, journal: Path, gate: Path) -> tuple[Path, Path]:
    """a's servers stay up until `gate` holds a start line; b's come up at once. Both journal
    their GPUs and lifetimes into one file."""
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    held = fake_command(f"journal={journal}", f"await={gate}:1", f"out={READY}", "hang")
    quick = fake_command(f"journal={journal}", f"out={READY}", "hang")
    return write_spec(tmp_path / "a", {"command": held}, TWO), write_spec(tmp_path / "b", {"command": quick}, TWO)


def test_two_diagbench_runs_on_one_gpu_take_turns(tmp_path):
    journal, gate = tmp_path / "journal.jsonl", tmp_path / "gate"
    journal.touch()
    gate.touch()
    spec_a, spec_b = two_specs(tmp_path, journal, gate)
    a, a_out = start(spec_a)
    try:
        wait_until(lambda: len(lifetimes(journal)) == 1, what="a's first server")
        b, b_out = start(spec_b)
        try:
            wait_until(lambda: b_out.has(f"waiting for GPU 0 (held by diagbench pid {a.pid})"), what="b waiting")
            assert len(lifetimes(journal)) == 1  # b launched nothing while a's server is on GPU 0
        finally:
            gate.write_text('{"event": "start"}\n')  # a's servers come up now, and end
            b.wait(timeout=120)
    finally:
        a.wait(timeout=120)
    assert (a.returncode, b.returncode) == (0, 0), a_out.lines + b_out.lines
    spans = lifetimes(journal)
    assert len(spans) == 4 and {s["gpus"] for s in spans} == {"0"}
    for one, other in combinations(spans, 2):  # on one GPU, one server at a time, across both runs
        assert one["end"] < other["start"] or other["end"] < one["start"], (one, other)
    line = next(x for x in b_out.lines if "waiting for GPU 0" in x)
    assert line == f"[0/2 running 1] n=1: waiting for GPU 0 (held by diagbench pid {a.pid})"
    for spec in (spec_a, spec_b):
        assert sweep_tagged((spec.parent / "runs" / "latest").resolve()) == []


def test_ctrl_c_while_waiting_for_a_gpu_ends_the_run_at_once(tmp_path):
    journal, gate = tmp_path / "journal.jsonl", tmp_path / "gate"
    journal.touch()
    gate.touch()
    spec_a, spec_b = two_specs(tmp_path, journal, gate)
    a, _ = start(spec_a)
    try:
        wait_until(lambda: len(lifetimes(journal)) == 1, what="a's first server")
        b, b_out = start(spec_b)
        wait_until(lambda: b_out.has("waiting for GPU 0"), what="b waiting")
        b.send_signal(signal.SIGINT)
        assert b.wait(timeout=60) == 130
        assert len(lifetimes(journal)) == 1  # a's server alone ever ran: b launched nothing
    finally:
        gate.write_text('{"event": "start"}\n')
        a.wait(timeout=120)
    assert a.returncode == 0
    b_run = (spec_b.parent / "runs" / "latest").resolve()
    records = [json.loads(p.read_text()) for p in sorted(b_run.glob("cells/*/result.json"))]
    assert [(r["outcome"], r["reason"]) for r in records] == [("cancelled", "not started: the run was interrupted")] * 2


def test_one_gpu_by_index_or_uuid_is_one_lease_and_a_stop_ends_the_wait():
    stop, said = threading.Event(), []

    def waiting(why: str) -> None:
        said.append(why)
        stop.set()

    with (
        hold_gpus(["0"], {}, "attempt 001 of /runs/a", threading.Event(), said.append) as first,
        hold_gpus(["GPU-aaaa"], {"GPU-aaaa": 0}, "attempt 001 of /runs/b", stop, waiting) as second,
    ):
        assert (first, second) == (True, False)
    assert said == [f"waiting for GPU GPU-aaaa (held by diagbench pid {os.getpid()})"]
    with hold_gpus(["GPU-aaaa"], {"GPU-aaaa": 0}, "again", threading.Event(), said.append) as third:
        assert third is True  # released when the first block ended
    assert len(said) == 1


def test_the_lock_folder_is_one_for_the_whole_host():
    assert lock_dir({}) == lock_dir({"TMPDIR": "/elsewhere"}) == LOCK_DIR == Path("/tmp/diagbench-gpus")
    assert lock_dir({LOCKS_VAR: "/shared/locks"}) == Path("/shared/locks")


def test_on_a_terminal_a_waiting_attempt_shows_why_and_no_timeout_runs_yet(tmp_path):
    spec = write_spec(tmp_path, {"command": fake_command(f"out={READY}")}, TWO)
    item = PlannedAttempt(load_spec(spec).cells[0], 1)
    progress = Progress(Console(file=io.StringIO(), width=120, color_system=None), timeout_s=60, clock=lambda: 1000.0)
    progress.on_open(RunDir(tmp_path / "runs" / "r"), [item])
    progress.on_wait(item, Slot(0, ("0",)), "waiting for GPU 0 (held by diagbench pid 961)")
    shot = Console(file=io.StringIO(), width=120, height=10, color_system=None, force_terminal=True)
    with shot.capture() as capture:
        shot.print(progress.frame())
    row = next(line for line in capture.get().splitlines() if "waiting for GPU" in line)
    assert row.split() == ["1", "waiting", "for", "GPU", "0", "(held", "by", "diagbench", "pid", "961)", "0", "0.0s"]
    progress.on_start(item, Slot(0, ("0",)))  # launched: the timeout runs from now
    with shot.capture() as capture:
        shot.print(progress.frame())
    assert next(line for line in capture.get().splitlines() if "launching" in line).split()[-2:] == ["0.0s", "1m00s"]
    progress.close()
