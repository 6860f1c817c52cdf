"""Live progress for `run`: a rich table on a terminal, plain lines elsewhere (CI)."""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from typing import Any

from rich.console import Console
from rich.live import Live
from rich.table import Table
from rich.text import Text

from diagbench.execute.slots import Slot
from diagbench.records.record import AttemptRecord
from diagbench.records.store import RunDir
from diagbench.render.report import OUTCOME_STYLE
from diagbench.render.text import visible
from diagbench.spec.plan import PlannedAttempt


class Progress:
    """Receives runner events (from worker threads) and shows them."""

    def __init__(self, console: Console):
        self.console = console
        self.interactive = console.is_terminal
        self.lock = threading.Lock()
        self.rows: dict[str, dict[str, Any]] = {}
        self.live: Live | None = None

    def on_open(self, run_dir: RunDir, planned: Sequence[PlannedAttempt]) -> None:
        self.console.print(f"run directory: {run_dir.path}  ({len(planned)} attempt(s))", highlight=False, markup=False)
        for item in planned:
            self.rows[item.name] = {
                "params": dict(item.cell.params),
                "repeat": item.repeat,
                "phase": "",
                "outcome": "",
                "style": "",
                "start": None,
                "end": None,
                "gpus": "",
            }
        if self.interactive:
            self.live = Live(self._table(), console=self.console, refresh_per_second=8, get_renderable=self._table)
            self.live.start()

    def on_start(self, item: PlannedAttempt, slot: Slot) -> None:
        with self.lock:
            row = self.rows[item.name]
            row["start"] = time.monotonic()
            row["phase"] = "launching"
            row["gpus"] = ",".join(slot.gpus)
            if not self.interactive:
                on = f" on GPU {row['gpus']}" if slot.gpus else ""
                self.console.print(f"[start] {item.name}{on}", highlight=False, markup=False)

    def on_phase(self, item: PlannedAttempt, phase: str) -> None:
        with self.lock:
            self.rows[item.name]["phase"] = visible(phase)

    def on_done(self, item: PlannedAttempt, record: AttemptRecord) -> None:
        with self.lock:
            row = self.rows[item.name]
            row.update(
                outcome=record.label,
                style=OUTCOME_STYLE.get(record.outcome, ""),
                end=time.monotonic(),
                phase=visible(record.phase or row["phase"]),
            )
            if not self.interactive:
                self._plain_done(item, record)

    def _plain_done(self, item: PlannedAttempt, r: AttemptRecord) -> None:
        line = f" {r.evidence.text[:100]!r}" if r.evidence else f" ({visible(r.reason)})"  # repr: escapes shown
        seconds = f" after {r.time_to_outcome_s:.2f}s" if r.time_to_outcome_s is not None else ""
        self.console.print(f"[done]  {item.name}: {r.label}{seconds}{line}", highlight=False, markup=False)

    def _table(self) -> Table:
        table = Table(expand=False)
        axes = list(next(iter(self.rows.values()))["params"]) if self.rows else []
        with_gpus = any(row["gpus"] for row in self.rows.values())
        for column in (*axes, "#", *(["gpus"] if with_gpus else []), "phase", "elapsed", "outcome"):
            table.add_column(column)
        now = time.monotonic()
        with self.lock:
            for row in self.rows.values():
                start, end = row["start"], row["end"]
                elapsed = f"{(end or now) - start:5.1f}s" if start else ""
                table.add_row(
                    *(Text(v) for v in row["params"].values()),
                    Text(str(row["repeat"])),
                    *([Text(row["gpus"])] if with_gpus else []),
                    Text(row["phase"]),
                    Text(elapsed),
                    Text(row["outcome"], style=row["style"]),
                )
        return table

    def close(self) -> None:
        if self.live is not None:
            self.live.stop()
            self.live = None
