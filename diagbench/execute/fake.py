"""An in-process executor, for the executor contract tests and as the smallest example of a
plugin (docs/executors.md): it launches nothing; each attempt's server log is given as text
and classified with the spec's own signatures, so its records are real records.

Not registered by default: `register(FakePlugin(logs))` makes `kind: fake` available."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import datetime, timezone
from pathlib import Path

from diagbench.execute.cancel import Cancel
from diagbench.execute.events import RunEvents
from diagbench.execute.plugin import Build, ExecutorOption, PluginBase, Settled
from diagbench.execute.scheduler import Executor
from diagbench.execute.slots import Slot, SlotPlan, plain_slots
from diagbench.launch.gpu import GpuOffer
from diagbench.logs.classify import classify_file
from diagbench.records import sink
from diagbench.records.parts import Placement
from diagbench.records.record import AttemptRecord, not_launched
from diagbench.records.store import RunDir
from diagbench.spec.executor import ExecutorKey, ExecutorSpec
from diagbench.spec.gpus import GpuRequest
from diagbench.spec.load import ServerSpec, Spec
from diagbench.spec.plan import PlannedAttempt
from diagbench.vocab import Evidence, Outcome

__all__ = ["FAKE", "FakeExecutor", "FakePlugin", "Logs"]

FAKE = "fake"
# the log an attempt's server would write, as text
Logs = Callable[[PlannedAttempt], str]


class FakeExecutor:
    """Runs each attempt in this process: writes its log, classifies it, records the outcome
    (a log that decides nothing is a timeout). `seconds`: how long each attempt takes."""

    def __init__(self, server: ServerSpec, run_dir: RunDir, logs: Logs, seconds: float = 0.0):
        self.server, self.run_dir, self.logs, self.seconds = server, run_dir, logs, seconds

    def run(self, item: PlannedAttempt, slot: Slot, cancel: Cancel, events: RunEvents) -> AttemptRecord:
        if cancel.is_set():
            return not_launched(item, Outcome.CANCELLED, f"not started: {cancel.reason}")
        folder = self.run_dir.attempt_dir(item.name)
        started = time.monotonic()
        events.on_start(item, slot)
        log = folder / "server.log"
        sink.write_document(log, self.logs(item))  # a server.log: a sink as a real one is
        if cancel.event.wait(self.seconds):
            return self._record(item, log, started, Outcome.CANCELLED, f"stopped: {cancel.reason}")
        found = classify_file(log, self.server.signatures)
        if found.phase:
            events.on_phase(item, found.phase)
        outcome = {"ready": Outcome.READY, "failed": Outcome.FAILED}.get(found.outcome, Outcome.TIMEOUT)
        record = self._record(item, log, started, outcome, found.line or "no line decided")
        evidence = Evidence(found.line_no, found.line) if found.line_no and found.line is not None else None
        return _with(record, found.failure_class, found.signature, evidence, found.lines)

    def _record(self, item: PlannedAttempt, log: Path, started: float, outcome: Outcome, reason: str) -> AttemptRecord:
        elapsed = round(time.monotonic() - started, 4)
        return AttemptRecord(
            cell_id=item.cell.id,
            repeat=item.repeat,
            attempt=item.name,
            params=dict(item.cell.params),
            command=[*self.server.command, *item.cell.args],
            env_changes=dict(item.cell.env),
            outcome=outcome,
            reason=reason,
            time_to_outcome_s=elapsed,
            duration_s=elapsed,
            ended_at=datetime.now(timezone.utc).isoformat(timespec="milliseconds"),
            log_bytes=log.stat().st_size,
            log_kept_bytes=log.stat().st_size,
            executor=Placement(FAKE, None, "in-process"),
        )


def _with(
    record: AttemptRecord, failure_class: str | None, signature: str | None, evidence: Evidence | None, lines: int
) -> AttemptRecord:
    return replace(record, failure_class=failure_class, signature=signature, evidence=evidence, log_lines=lines)


@dataclass
class FakePlugin(PluginBase):
    """`kind: fake`: attempts run by FakeExecutor, as many at once as --parallel says (default all)."""

    logs: Logs
    seconds: float = 0.0
    kind: str = FAKE
    on_this_host: bool = True
    keys: tuple[ExecutorKey, ...] = ()
    options: tuple[ExecutorOption, ...] = field(default=())

    def check(self, spec: Spec, layers: ExecutorSpec, folder: Path) -> Settled:
        return Settled(None, {"in_process": True})

    def notes(
        self, spec: Spec, layers: ExecutorSpec, given: ExecutorSpec, parallel: int | None, gpus: bool
    ) -> list[str]:
        return ["--gpus: the fake executor hands out no GPU"] if gpus else []

    def slots(
        self, spec: Spec, given: SlotPlan | None, gpus: GpuRequest | None, parallel: int | None, attempts: int
    ) -> SlotPlan:
        count = parallel or max(1, attempts)
        return SlotPlan(tuple(plain_slots(count)), 0, GpuOffer((), "in-process: no GPU"), ())

    def build(self, run: Build) -> Executor:
        return FakeExecutor(run.spec.server, run.run_dir, self.logs, self.seconds)
