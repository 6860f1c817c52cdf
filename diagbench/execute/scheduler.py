"""Many attempts over a few slots: launch in plan order as slots free up, ask the gate
before each launch, record each the moment it ends, and stop cleanly on Ctrl-C.

Where an attempt runs is the executor's business (this host, a cluster's job); the
scheduler only owns order, concurrency and the records of what never ran.

Stopping: `cancel` set (a signal, or a record that could not be written) launches
nothing more, and every running attempt ends as its executor tears it down. The
scheduler returns only when every attempt has ended and has its record: a Ctrl-C while
it waits makes the teardowns hurry, never abandons them.
"""

from __future__ import annotations

import contextlib
import queue
import threading
import traceback
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Protocol

from diagbench.errors import WriteError
from diagbench.execute.cancel import Cancel
from diagbench.execute.events import RunEvents
from diagbench.execute.slots import Slot
from diagbench.records.record import AttemptRecord, not_launched
from diagbench.records.redact import Redactor
from diagbench.records.store import RunDir
from diagbench.spec.plan import PlannedAttempt
from diagbench.vocab import Outcome

__all__ = ["TRACEBACK", "Executor", "Gate", "Scheduled", "run_attempts"]


class Executor(Protocol):
    """Runs one attempt to its record, on this host or elsewhere.

    Called from a worker thread, which lives until the attempt has ended (a parent-death
    signal of a server it launches is tied to it). A server that fails is an outcome in
    the record; a WriteError out of `run` stops the run (the disk, not the attempt); any
    other exception is diagbench's own failure, recorded as `internal_error`."""

    def run(self, item: PlannedAttempt, slot: Slot, cancel: Cancel, events: RunEvents) -> AttemptRecord: ...


TRACEBACK = "diagbench-error.txt"  # in the attempt's folder, when diagbench itself failed there

# Before each launch: a reason not to launch it (it can no longer change a verdict), or None.
Gate = Callable[[PlannedAttempt, Sequence[AttemptRecord]], "str | None"]


@dataclass
class Scheduled:
    records: list[AttemptRecord] = field(default_factory=list)
    interrupted: bool = False
    harness_errors: list[str] = field(default_factory=list)
    write_error: WriteError | None = None  # the first record or log that could not be written


def run_attempts(
    todo: Sequence[PlannedAttempt],
    executor: Executor,
    slots: Sequence[Slot],
    run_dir: RunDir,
    events: RunEvents,
    cancel: Cancel,
    gate: Gate | None = None,
    done: Sequence[AttemptRecord] = (),
    secrets: Redactor | None = None,
) -> Scheduled:
    """Launch every attempt in `todo` in order, at most one per slot at a time. `secrets`
    (the server's own env and command) are blanked out of a diagbench bug's traceback."""
    run = _Run(executor, run_dir, events, cancel, done)
    run.secrets = secrets or Redactor.of()
    for slot in slots:
        run.free.put(slot)
    futures: list[Future[AttemptRecord]] = []
    with ThreadPoolExecutor(max_workers=max(1, len(slots)), thread_name_prefix="attempt") as pool:
        try:
            run.launch_in_order(todo, pool, gate, futures)
        except KeyboardInterrupt:
            cancel.interrupt()
        launched = {r.attempt for r in _wait_all(futures, cancel)}
        for item in todo:
            if item.name not in launched:
                reason = f"not started: {cancel.reason or 'the run was interrupted'}"
                futures.append(_done_future(run.finish(item, not_launched(item, Outcome.CANCELLED, reason))))
        run.result.records = _wait_all(futures, cancel)
    run.result.interrupted = cancel.interrupted
    return run.result


class _Run:
    """One scheduling's shared state: free slots, records so far, and the first write error."""

    def __init__(
        self, executor: Executor, run_dir: RunDir, events: RunEvents, cancel: Cancel, done: Sequence[AttemptRecord]
    ):
        self.executor, self.run_dir, self.events, self.cancel = executor, run_dir, events, cancel
        self.result = Scheduled()
        self.free: queue.Queue[Slot] = queue.Queue()
        self.lock = threading.Lock()
        self.finished: list[AttemptRecord] = list(done)
        self.secrets = Redactor.of()

    def launch_in_order(
        self,
        todo: Sequence[PlannedAttempt],
        pool: ThreadPoolExecutor,
        gate: Gate | None,
        futures: list[Future[AttemptRecord]],
    ) -> None:
        for item in todo:
            slot = self.free.get()  # blocks until an attempt ends; Ctrl-C interrupts it
            if self.cancel.is_set():
                self.free.put(slot)
                return
            with self.lock:
                reason = gate(item, list(self.finished)) if gate else None
            if reason is not None:
                self.free.put(slot)
                futures.append(_done_future(self.finish(item, not_launched(item, Outcome.SKIPPED, reason))))
                continue
            futures.append(pool.submit(self.one, item, slot))

    def one(self, item: PlannedAttempt, slot: Slot) -> AttemptRecord:
        """Run one attempt on `slot` (in a worker thread) and record it."""
        try:
            try:
                record = self.executor.run(item, slot, self.cancel, self.events)
            except WriteError as exc:
                self.stop_writing(exc)
                record = not_launched(item, Outcome.CANCELLED, f"stopped: {exc}")
            except Exception as exc:  # a diagbench bug in one attempt is recorded, not fatal to the matrix  # noqa: BLE001
                record = self.internal_error(item, exc)
            return self.finish(item, record)
        finally:
            self.free.put(slot)  # only now: the record is in before the next launch (and the gate sees it)

    def internal_error(self, item: PlannedAttempt, exc: Exception) -> AttemptRecord:
        """diagbench's own failure in one attempt: its record, and its traceback for the bug report."""
        secrets = Redactor(self.secrets.known | Redactor.of([item.cell.env], [item.cell.args]).known)
        what = secrets.log(f"{type(exc).__name__}: {exc}")
        where = self.run_dir.cells / item.name / TRACEBACK
        with contextlib.suppress(OSError, WriteError):  # the record matters more than the traceback
            self.run_dir.attempt_dir(item.name)
            self.run_dir.write_document(f"cells/{item.name}/{TRACEBACK}", secrets.log(traceback.format_exc()))
        with self.lock:
            self.result.harness_errors.append(f"{item.name}: {what} (traceback: {where})")
        return not_launched(item, Outcome.INTERNAL_ERROR, f"diagbench failed: {what}")

    def finish(self, item: PlannedAttempt, record: AttemptRecord) -> AttemptRecord:
        try:
            self.run_dir.write_result(record)
        except WriteError as exc:
            self.stop_writing(exc)
        with self.lock:
            self.finished.append(record)
        self.events.on_done(item, record)
        return record

    def stop_writing(self, exc: WriteError) -> None:
        """The first failed write stops the run: what runs is torn down, nothing more starts."""
        with self.lock:
            if self.result.write_error is None:
                self.result.write_error = exc
        self.cancel.set(f"the run stopped: {exc}")


def _wait_all(futures: Sequence[Future[AttemptRecord]], cancel: Cancel) -> list[AttemptRecord]:
    """Every attempt's record, however many times Ctrl-C is pressed meanwhile (where no
    signal handler turns it into `cancel` first): each press only hurries the teardowns."""
    while True:
        try:
            return [f.result() for f in futures]
        except KeyboardInterrupt:
            cancel.interrupt()


def _done_future(record: AttemptRecord) -> Future[AttemptRecord]:
    future: Future[AttemptRecord] = Future()
    future.set_result(record)
    return future
