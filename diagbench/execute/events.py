"""What the pipeline tells whoever watches a run: a small typed protocol, called from
worker threads. The live view implements it; tests record it."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from diagbench.execute.slots import Slot
from diagbench.records.record import AttemptRecord
from diagbench.records.store import RunDir
from diagbench.spec.plan import PlannedAttempt

__all__ = ["QuietEvents", "RunEvents"]


class RunEvents(Protocol):
    def on_open(self, run_dir: RunDir, planned: Sequence[PlannedAttempt], done: Sequence[AttemptRecord] = ()) -> None:
        """The run directory exists and the manifest is written; nothing launched yet. `done`:
        the attempts of `planned` already recorded (a resumed run's), never launched again."""

    def on_wait(self, item: PlannedAttempt, slot: Slot, why: str) -> None:
        """An attempt waits before its launch: `waiting for GPU 0 (held by diagbench pid 961)`."""

    def on_helpers(self, what: str, pending: Sequence[str], elapsed_s: float, limit_s: float) -> None:
        """Before the first launch, diagbench waits on its own helper programs (`what`: each
        server interpreter asked what it has installed): told about once a second while
        `pending` ones run (at most `limit_s`), then once with none pending."""

    def on_start(self, item: PlannedAttempt, slot: Slot) -> None:
        """An attempt is being launched on `slot`."""

    def on_phase(self, item: PlannedAttempt, phase: str) -> None:
        """A running attempt reached a new start-up phase (`load`, `capture bs=32`)."""

    def on_done(self, item: PlannedAttempt, record: AttemptRecord) -> None:
        """An attempt ended (or was skipped or cancelled) and its record is on disk."""


class QuietEvents:
    """Events nobody watches (a library caller, a benchmark)."""

    def on_open(self, run_dir: RunDir, planned: Sequence[PlannedAttempt], done: Sequence[AttemptRecord] = ()) -> None:
        return None

    def on_wait(self, item: PlannedAttempt, slot: Slot, why: str) -> None:
        return None

    def on_helpers(self, what: str, pending: Sequence[str], elapsed_s: float, limit_s: float) -> None:
        return None

    def on_start(self, item: PlannedAttempt, slot: Slot) -> None:
        return None

    def on_phase(self, item: PlannedAttempt, phase: str) -> None:
        return None

    def on_done(self, item: PlannedAttempt, record: AttemptRecord) -> None:
        return None
