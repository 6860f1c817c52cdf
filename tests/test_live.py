"""The live progress display, on a terminal and off one."""

from __future__ import annotations

import io
from pathlib import Path

from rich.console import Console

from diagbench.execute.slots import Slot
from diagbench.records.record import AttemptRecord
from diagbench.records.store import RunDir
from diagbench.render.live import Progress
from diagbench.spec.load import load_spec
from diagbench.spec.plan import PlannedAttempt

ROOT = Path(__file__).resolve().parent.parent


def drive(terminal: bool) -> str:
    spec = load_spec(ROOT / "experiments" / "demo.yaml")
    planned = [PlannedAttempt(cell, 1) for cell in spec.cells]
    buffer = io.StringIO()
    progress = Progress(Console(file=buffer, force_terminal=terminal, width=160, color_system=None))
    progress.on_open(RunDir(Path("/tmp/x")), planned)
    first = planned[0]
    progress.on_start(first, Slot(0))
    progress.on_phase(first, "capture bs=32")
    record = AttemptRecord(
        cell_id=first.cell.id,
        repeat=1,
        attempt=first.name,
        params=dict(first.cell.params),
        command=[],
        env_changes={},
        outcome="failed",
        failure_class="cuda_graph_capture",
        time_to_outcome_s=0.7,
        evidence={"line_no": 29, "text": "Exception: Capture cuda graph failed"},
    )
    progress.on_done(first, record)
    progress.close()
    return buffer.getvalue()


def test_terminal_shows_a_live_table_with_one_column_per_axis():
    out = drive(terminal=True)
    assert "kernel" in out and "inductor_graphs" in out
    assert "failed:cuda_graph_capture" in out and "capture bs=32" in out


def test_off_a_terminal_it_prints_plain_lines():
    out = drive(terminal=False)
    assert "[start] 001-kernel-mma.compile-on.max_bs-32.inductor_graphs-unset-r1" in out
    assert "failed:cuda_graph_capture after 0.70s 'Exception: Capture cuda graph failed'" in out
