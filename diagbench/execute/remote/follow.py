"""Following one submitted job to its record, whatever the scheduler: show where it is, stop
it when asked or when it can no longer matter, and when it ends without a record, say so in
the scheduler's words. The scheduler is a `Queue`, given by its plugin."""

from __future__ import annotations

import contextlib
import dataclasses
import json
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Protocol

from diagbench.errors import RecordError
from diagbench.execute.cancel import INTERRUPTED, Cancel
from diagbench.execute.events import RunEvents
from diagbench.execute.remote.files import PROGRESS_FILE, Progress
from diagbench.execute.scheduler import Gate
from diagbench.records.parts import Placement
from diagbench.records.record import AttemptRecord, not_launched
from diagbench.spec.plan import PlannedAttempt
from diagbench.vocab import Outcome
from diagbench.yamlsrc import write_duration

__all__ = [
    "FINAL_STATE_WAIT_S",
    "LOOK_EVERY_S",
    "RECORD_LAG_S",
    "STOP_MARGIN_S",
    "Follow",
    "Gatekeeper",
    "JobState",
    "Queue",
    "StillMatters",
]

LOOK_EVERY_S = 0.5  # how often the run directory is looked at for the worker's files
STOP_MARGIN_S = 20.0  # after the worker's grace: then the whole job is cancelled
# a record a node wrote may show up late on a network file system (attribute caches)
RECORD_LAG_S = 10.0
FINAL_STATE_WAIT_S = 15.0  # a job whose worker recorded a cancel: how long to wait for the scheduler's final word
# a reason not to run this attempt any more, given the records so far (the scheduler's Gate)
StillMatters = Callable[[PlannedAttempt], "str | None"]


class Gatekeeper:
    """A remote executor's records so far, and the scheduler's gate over them, asked again while a
    job waits or runs only when a new record has come in: a reason to stop it, or None."""

    def __init__(self, gate: Gate | None, done: Sequence[AttemptRecord]):
        self.gate = gate
        self._lock = threading.Lock()
        self._finished = list(done)
        self._asked: dict[str, int] = {}  # attempt -> how many records there were when last asked

    def finished(self, record: AttemptRecord) -> AttemptRecord:
        with self._lock:
            self._finished.append(record)
        return record

    def still_matters(self, item: PlannedAttempt) -> str | None:
        if self.gate is None:
            return None
        with self._lock:
            if self._asked.get(item.name) == len(self._finished):
                return None
            self._asked[item.name] = len(self._finished)
            records = list(self._finished)
        return self.gate(item, records)


class JobState(Protocol):
    """What the scheduler says of one job (its plugin's own type)."""

    @property
    def state(self) -> str: ...  # the scheduler's word: RUNNING, TIMEOUT, CANCELLED, ...

    @property
    def reason(self) -> str: ...

    @property
    def node(self) -> str: ...

    @property
    def limit(self) -> str: ...  # its time limit in the scheduler's words ("" if not said)

    @property
    def active(self) -> bool: ...  # it may still leave the queue on its own

    @property
    def running(self) -> bool: ...

    def describe(self) -> str: ...


class Queue(Protocol):
    """A scheduler, as following a job needs it."""

    kind: str  # the executor's kind, in the records it writes
    name: str  # in messages: "<name> job 31 ended ..."

    def state(self, job_id: str) -> JobState | None:
        """The job's latest state; None when the scheduler cannot say now (ask again later)."""
        ...

    def limit_s(self, state: JobState) -> float | None:
        """The job's time limit as the scheduler says it, if it does."""
        ...

    def stop_worker(self, job_id: str) -> None:
        """Ask the worker to tear its server down and record (it has its grace)."""
        ...

    def kill(self, job_id: str) -> None:
        """End the job outright (still queued, or its worker overran its grace)."""
        ...

    def ended_as(self, state: JobState) -> Outcome:
        """How a job that ended in `state` is recorded: CANCELLED, TIMEOUT, or LAUNCH_ERROR."""
        ...

    def completed(self, state: JobState) -> bool:
        """It ended on its own (its worker's record stands)."""
        ...

    def output_tail(self, folder: Path) -> str:
        """The last lines the job itself wrote, with where they come from (`<file>: ...`)."""
        ...


@dataclasses.dataclass
class _Stop:
    outcome: Outcome  # CANCELLED (interrupted) or SKIPPED (can no longer matter)
    reason: str
    at: float
    forced: bool = False


class Follow:
    """One attempt's job, from submission to record."""

    def __init__(
        self,
        item: PlannedAttempt,
        job_id: str,
        folder: Path,
        queue: Queue,
        grace_s: float,
        cancel: Cancel,
        events: RunEvents,
        still_matters: StillMatters,
        limit_s: float,
    ):
        self.item, self.job_id, self.folder, self.queue = item, job_id, folder, queue
        self.grace_s, self.cancel, self.events, self.still_matters = grace_s, cancel, events, still_matters
        self.limit_s = limit_s  # the job's time limit: as asked, then as the scheduler says (its own option wins)
        self.stop: _Stop | None = None
        self.shown = ""
        self.worker_seen = False
        self.node = ""
        self.progress: Progress | None = None
        self.progress_stamp = 0

    def until_record(self) -> AttemptRecord:
        """Wait for the worker's record, or for the job to end without one."""
        while True:
            record = self._record()
            if record is not None:
                return self._settle(record)
            state = self.queue.state(self.job_id)
            self._show(state)
            if state is not None:
                self.limit_s = self.queue.limit_s(state) or self.limit_s
            if state is not None and not state.active:
                return self._ended(state)
            self._maybe_stop(state)
            self._pause()

    # -- the record ------------------------------------------------------------------

    def _record(self) -> AttemptRecord | None:
        """This job's result.json, once the worker has written it (an older one is ignored)."""
        path = self.folder / "result.json"
        with contextlib.suppress(OSError, ValueError, RecordError):
            record = AttemptRecord.from_json(json.loads(path.read_text(encoding="utf-8")))
            if record.executor is not None and record.executor.job_id == self.job_id:
                return record
        return None

    def _settle(self, record: AttemptRecord) -> AttemptRecord:
        if record.outcome is not Outcome.CANCELLED:
            return record  # a real outcome stands, even if a stop was on its way
        if self.stop is not None:
            reason = f"{self.stop.reason} (diagbench stopped {self.queue.name} job {self.job_id})"
            return dataclasses.replace(record, outcome=self.stop.outcome, reason=reason)  # its log and teardown kept
        # the worker was signalled by someone else: the scheduler's final word says by what
        state = self._final_state()
        if state is None or self.queue.completed(state):
            return record
        outcome = self.queue.ended_as(state)
        if outcome is Outcome.TIMEOUT:  # it ran, and the scheduler ended it: its log and teardown are kept
            return dataclasses.replace(record, outcome=Outcome.TIMEOUT, reason=self._timed_out(record.phase))
        return dataclasses.replace(record, outcome=outcome, reason=self._ended_words(state, with_record=True))

    def _final_state(self) -> JobState | None:
        deadline = time.monotonic() + FINAL_STATE_WAIT_S
        while time.monotonic() < deadline:
            state = self.queue.state(self.job_id)
            if state is not None and not state.active:
                return state
            time.sleep(LOOK_EVERY_S)
        return None

    def _ended(self, state: JobState) -> AttemptRecord:
        """The job left the queue: its record (late on a shared file system), or the scheduler's words."""
        deadline = time.monotonic() + (RECORD_LAG_S if self.worker_seen else LOOK_EVERY_S)
        while time.monotonic() < deadline:
            record = self._record()
            if record is not None:
                return self._settle(record)
            time.sleep(LOOK_EVERY_S)
        self.node = self.node or state.node
        if self.stop is not None:
            return self._not_run(
                self.stop.outcome, f"{self.stop.reason} ({self.queue.name} job {self.job_id} {state.state})"
            )
        outcome = self.queue.ended_as(state)
        if outcome is Outcome.TIMEOUT and self._worker_started():  # killed before it could write a record
            phase = self.progress.phase if self.progress is not None else None
            return dataclasses.replace(self._not_run(Outcome.TIMEOUT, self._timed_out(phase)), phase=phase)
        outcome = Outcome.LAUNCH_ERROR if outcome is Outcome.TIMEOUT else outcome
        return self._not_run(outcome, self._ended_words(state, with_record=False))

    def _worker_started(self) -> bool:
        """The worker ran on its node: it wrote its progress, or its server a log."""
        return self.worker_seen or self._progress() is not None or (self.folder / "server.log").is_file()

    def _timed_out(self, phase: str | None) -> str:
        where = f"in phase {phase}" if phase and phase != "starting" else "before its first phase"
        limit = write_duration(self.limit_s)
        return f"the {self.queue.name} job's time limit ({limit}) ended it {where} (job {self.job_id})"

    def _ended_words(self, state: JobState, with_record: bool) -> str:
        words = f"{self.queue.name} job {self.job_id} ended {state.describe()}"
        if state.state == "CANCELLED":
            words += ", cancelled outside diagbench"
        if not with_record:
            words += " without a record"
            tail = self.queue.output_tail(self.folder)
            if tail:
                words += f"; {tail}"
        return words

    def _not_run(self, outcome: Outcome, reason: str) -> AttemptRecord:
        record = not_launched(self.item, outcome, reason)
        return dataclasses.replace(record, executor=Placement(self.queue.kind, self.job_id, self.node))

    # -- showing and stopping --------------------------------------------------------

    def _show(self, state: JobState | None) -> None:
        progress = self._progress()
        if progress is not None:
            self.worker_seen, self.node = True, progress.node
            text = f"job {self.job_id} on {progress.node}: {progress.phase}"
        elif state is None:
            text = f"job {self.job_id} submitted"
        elif not state.running:
            text = f"job {self.job_id} {state.state.lower()}" + (f" ({state.reason})" if state.reason else "")
        else:
            text = f"job {self.job_id} on {state.node}: starting"
        if text != self.shown:
            self.shown = text
            self.events.on_phase(self.item, text)

    def _progress(self) -> Progress | None:
        """The worker's progress.json, read again only when it changed."""
        try:
            stamp = (self.folder / PROGRESS_FILE).stat().st_mtime_ns
        except OSError:
            return None
        if stamp != self.progress_stamp:
            self.progress_stamp, self.progress = stamp, Progress.read(self.folder) or self.progress
        return self.progress

    def _maybe_stop(self, state: JobState | None) -> None:
        if self.stop is None:
            if self.cancel.is_set():
                self._ask_stop(Outcome.CANCELLED, self.cancel.reason or INTERRUPTED, state)
            elif (reason := self.still_matters(self.item)) is not None:
                self._ask_stop(Outcome.SKIPPED, reason, state)
        elif not self.stop.forced and (self.cancel.urgent.is_set() or self._overdue()):
            self.stop.forced = True  # hurried (a second Ctrl-C), or the worker's teardown overran
            self.queue.kill(self.job_id)

    def _overdue(self) -> bool:
        return self.stop is not None and time.monotonic() - self.stop.at > self.grace_s + STOP_MARGIN_S

    def _ask_stop(self, outcome: Outcome, reason: str, state: JobState | None) -> None:
        self.stop = _Stop(outcome, reason, time.monotonic())
        started = self._progress() is not None  # looked at now: the last look may be half a second old
        if started or (state is not None and state.running):
            self.queue.stop_worker(self.job_id)  # the worker tears down on its own grace, and records
        else:
            self.queue.kill(self.job_id)  # still queued: nothing runs yet

    def _pause(self) -> None:
        if self.cancel.is_set():
            time.sleep(LOOK_EVERY_S)
        else:
            self.cancel.event.wait(LOOK_EVERY_S)
