"""Many attempts over a few slots: launch in plan order as slots free up, ask the gate
before each launch, record each the moment it ends, and stop cleanly on Ctrl-C.

Where an attempt runs is the executor's business (this host, a Slurm job); the
scheduler only owns order, concurrency and the records of what never ran.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Protocol

from diagbench.execute.cancel import Cancel
from diagbench.execute.events import RunEvents
from diagbench.execute.slots import Slot
from diagbench.records.record import AttemptRecord
from diagbench.records.store import RunDir
from diagbench.spec.plan import PlannedAttempt
from diagbench.vocab import Outcome


class Executor(Protocol):
    """Runs one attempt to its record, on this host or elsewhere.

    Called from a worker thread. A server that fails is an outcome in the record; an
    exception out of `run` is diagbench's own failure, recorded as `internal_error`."""

    def run(self, item: PlannedAttempt, slot: Slot, cancel: Cancel, events: RunEvents) -> AttemptRecord: ...


# Before each launch: a reason not to launch it (it can no longer change a verdict), or None.
Gate = Callable[[PlannedAttempt, Sequence[AttemptRecord]], "str | None"]


@dataclass
class Scheduled:
    records: list[AttemptRecord] = field(default_factory=list)
    interrupted: bool = False
    harness_errors: list[str] = field(default_factory=list)


def run_attempts(
    todo: Sequence[PlannedAttempt],
    executor: Executor,
    slots: Sequence[Slot],
    run_dir: RunDir,
    events: RunEvents,
    cancel: Cancel,
    gate: Gate | None = None,
    done: Sequence[AttemptRecord] = (),
) -> Scheduled:
    """Launch every attempt in `todo` in order, at most one per slot at a time."""
    result = Scheduled()
    free: queue.Queue[Slot] = queue.Queue()
    for slot in slots:
        free.put(slot)
    lock = threading.Lock()
    finished: list[AttemptRecord] = list(done)

    def one(item: PlannedAttempt, slot: Slot) -> AttemptRecord:
        try:
            try:
                record = executor.run(item, slot, cancel, events)
            except Exception as exc:  # a diagbench bug in one attempt is recorded, not fatal to the matrix
                with lock:
                    result.harness_errors.append(f"{item.name}: {type(exc).__name__}: {exc}")
                record = not_run(item, Outcome.INTERNAL_ERROR, f"diagbench failed: {type(exc).__name__}: {exc}")
            return _finish(item, record)
        finally:  # the slot frees once the record is in: the gate of the next launch sees it
            free.put(slot)

    def _finish(item: PlannedAttempt, record: AttemptRecord) -> AttemptRecord:
        run_dir.write_result(record)
        with lock:
            finished.append(record)
        events.on_done(item, record)
        return record

    futures: list[Future[AttemptRecord]] = []
    with ThreadPoolExecutor(max_workers=max(1, len(slots)), thread_name_prefix="attempt") as pool:
        try:
            for item in todo:
                slot = free.get()  # blocks until an attempt ends; Ctrl-C interrupts it
                if cancel.is_set():
                    free.put(slot)
                    break
                with lock:
                    reason = gate(item, list(finished)) if gate else None
                if reason is not None:
                    free.put(slot)
                    futures.append(_done_future(_finish(item, not_run(item, Outcome.SKIPPED, reason))))
                    continue
                futures.append(pool.submit(one, item, slot))
        except KeyboardInterrupt:
            result.interrupted = True
            cancel.set()
        launched = {f.result().attempt for f in futures}
        for item in todo:
            if item.name not in launched:
                record = not_run(item, Outcome.CANCELLED, "not started: the run was interrupted")
                futures.append(_done_future(_finish(item, record)))
        result.records = [f.result() for f in futures]
    return result


def _done_future(record: AttemptRecord) -> Future[AttemptRecord]:
    future: Future[AttemptRecord] = Future()
    future.set_result(record)
    return future


def not_run(item: PlannedAttempt, outcome: Outcome, reason: str) -> AttemptRecord:
    """The record of an attempt that has no server outcome: skipped, cancelled, or a diagbench bug."""
    return AttemptRecord(
        cell_id=item.cell.id,
        repeat=item.repeat,
        attempt=item.name,
        params=dict(item.cell.params),
        command=[],
        env_changes={},
        outcome=outcome,
        reason=reason,
    )
