"""A triage run: launch the command; if it fails, pre-register the remedies that apply as
hypotheses, launch them (pairs only when no single one comes up), price those that come
up, and recommend the cheapest. A normal run directory with `triage.json` beside the
attempts. Core only: it never prints."""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from diagbench.debug.sets import DebugCatalogue
from diagbench.execute.cancel import Cancel
from diagbench.execute.events import RunEvents
from diagbench.execute.local import LocalExecutor
from diagbench.execute.scheduler import run_attempts
from diagbench.execute.slots import SlotPlan, resolve_slots
from diagbench.isolate.run import ProbeCell
from diagbench.judge.verdicts import judge
from diagbench.launch import host
from diagbench.records.build_manifest import build_manifest
from diagbench.records.manifest import RunSettings
from diagbench.records.record import AttemptRecord
from diagbench.records.redact import server_redactor, spec_redactor
from diagbench.records.store import RunDir, open_new_run, open_run, write_json
from diagbench.spec.gpus import GpuRequest
from diagbench.spec.hypotheses import Hypothesis
from diagbench.spec.load import ServerSpec
from diagbench.spec.plan import PlannedAttempt
from diagbench.spec.ready import PriceLoad
from diagbench.triage.apply import Launch
from diagbench.triage.choose import (
    Candidate,
    candidates,
    hypothesis_of,
    pairs,
    recommend,
    tried_of,
    unapplied,
    unserved,
)
from diagbench.triage.problem import TriageProblem
from diagbench.triage.record import FILENAME, Status, Target, Triage, Tried
from diagbench.vocab import Outcome

__all__ = ["AXIS", "DEBUG", "TriageOptions", "TriageResult", "triage", "triage_slots"]

AXIS = "remedy"  # the one parameter of a triage's cells: which remedy it applies ("none": the command)
DEBUG = "debug"  # the cell of --debug's launch: the command with the debug settings


@dataclass(frozen=True)
class TriageOptions:
    runs_dir: Path = Path("runs")
    run_id: str | None = None
    repeat: int = 1
    parallel: int | None = 1
    gpus: GpuRequest | None = None
    first: bool = False  # stop at the first remedy that comes up
    slots: SlotPlan | None = None
    debug: DebugCatalogue | None = None  # --debug: the failing command is launched once more with debug settings first
    sanitizer: bool = False  # --sanitizer: debug sets that wrap the command may be used


@dataclass(frozen=True)
class TriageResult:
    run_dir: RunDir
    triage: Triage
    harness_errors: tuple[str, ...] = ()


class _Interrupted(Exception):
    pass


def triage_slots(problem: TriageProblem, options: TriageOptions) -> SlotPlan:
    return resolve_slots(problem.spec, options.gpus, options.parallel)


def triage(
    problem: TriageProblem, options: TriageOptions, events: RunEvents, cancel: Cancel | None = None
) -> TriageResult:
    """Open the run, launch the command, then its remedies; write triage.json (interrupted or not)."""
    slots = options.slots or triage_slots(problem, options)
    runner = _Runner(problem, options, slots, events, cancel or Cancel())
    try:
        result = runner.run()
    finally:
        if cancel is None:
            runner.cancel.close()
    runner.finish(result)
    return TriageResult(runner.run_dir, result, tuple(runner.harness_errors))


class _Runner:
    def __init__(
        self, problem: TriageProblem, options: TriageOptions, slots: SlotPlan, events: RunEvents, cancel: Cancel
    ):
        self.problem, self.options, self.slots, self.events, self.cancel = problem, options, slots, events, cancel
        self.records: list[AttemptRecord] = []
        self.harness_errors: list[str] = []
        self.hypotheses: list[Hypothesis] = []
        self.cells: list[ProbeCell] = []
        self.launched: list[Candidate] = []
        self.target: Target | None = None
        self.server: str | None = problem.server
        self.run_dir = (
            open_run(options.runs_dir, options.run_id) if options.run_id else open_new_run(options.runs_dir, "triage")
        )
        self._write_manifest()
        events.on_open(self.run_dir, [])
        self.plain = LocalExecutor(problem.server_spec, self.run_dir, slots)
        self.priced: LocalExecutor | None = None
        self.notes: list[str] = []

    def _write_manifest(self) -> None:
        """The manifest as it stands: rewritten with each batch's hypotheses before the batch launches."""
        spec = dataclasses.replace(self.problem.spec, hypotheses=tuple(self.hypotheses), cells=tuple(self.cells))
        settings = RunSettings(
            repeat=self.options.repeat,
            parallel=self.options.parallel,
            gpus=tuple(self.slots.offer.ids),
            gpus_per_attempt=self.slots.per_attempt,
            slots=tuple(tuple(slot.gpus) for slot in self.slots.slots),
            triage={"first": self.options.first, "price": self.problem.price},
        )
        facts = host.collect(self.problem.spec.path.resolve().parent)
        self.run_dir.write_manifest(build_manifest(spec, [], self.run_dir.path.name, settings, facts))

    def run(self) -> Triage:
        try:
            return self._run()
        except (_Interrupted, KeyboardInterrupt):
            return self.result(Status.INTERRUPTED, "interrupted: the launches that finished are recorded")

    def _run(self) -> Triage:
        base = Candidate("none", (), "", "", 0, self.problem.launch, ())
        self.cells.append(self._cell(base))
        self._write_manifest()
        records = self.launch([base], self.plain)
        self.target, self.server = self._target(records), self.server or self._detected(records)
        if all(r.outcome is Outcome.READY for r in records):
            return self.result(Status.COMES_UP, "the command comes up as it is: nothing to triage")
        if self.options.debug is not None:
            self._debug(self.options.debug, records)
        singles = candidates(self.problem, self.server, self.target)
        if not singles:
            return self.result(Status.NO_REMEDY, self._no_remedy())
        self.register(singles)
        self.launch(singles, self._priced())
        if not any(c.works(self.records) for c in singles) and len(singles) > 1:
            combos = pairs(singles, self.problem.launch)
            if combos:
                self.register(combos)
                self.launch(combos, self._priced())
        if any(c.works(self.records) for c in self.launched):
            return self.result(Status.FOUND, "")
        return self.result(Status.NONE_WORKED, f"none of the {len(self.launched)} remedies tried came up")

    def _debug(self, catalogue: DebugCatalogue, records: Sequence[AttemptRecord]) -> None:
        """--debug: the command's failure launched once more with the debug settings it calls for,
        before any remedy; debug.json beside triage.json (the issue report carries it)."""
        from diagbench.debug.record import FILENAME as DEBUG_FILE
        from diagbench.debug.record import Debug
        from diagbench.debug.run import debug_failure

        failing = next((r for r in records if r.outcome is not Outcome.READY and r.outcome.ran), None)
        if failing is None:
            return

        def relaunch(launch: Launch) -> tuple[AttemptRecord, Path]:
            candidate = Candidate(DEBUG, (), "", "", 0, launch, ())
            self.cells.append(self._cell(candidate))
            self._write_manifest()
            record = self.launch([candidate], self.plain)[0]
            return record, self.run_dir.cells / record.attempt / "server.log"

        before = (failing, self.run_dir.cells / failing.attempt / "server.log")
        secrets = spec_redactor(dataclasses.replace(self.problem.spec, cells=tuple(self.cells)))
        shown = secrets.log(self.problem.shown())
        path = self.run_dir.path / DEBUG_FILE

        def keep(partial: Debug) -> None:  # on disk before the debug launch: a Ctrl-C there leaves it
            write_json(path, partial.to_json())

        found = debug_failure(
            catalogue, self.options.sanitizer, self.problem.launch, self.server, before, relaunch, secrets, shown, keep
        )
        write_json(path, found.to_json())

    def register(self, batch: Sequence[Candidate]) -> None:
        """Pre-register the batch's claims in the manifest before any of it launches."""
        for candidate in batch:
            self.cells.append(self._cell(candidate))
            self.hypotheses.append(hypothesis_of(candidate, AXIS))
        self._write_manifest()

    def launch(self, batch: Sequence[Candidate], executor: LocalExecutor) -> list[AttemptRecord]:
        todo = [PlannedAttempt(self._cell(c), r) for c in batch for r in range(1, self.options.repeat + 1)]
        self.launched += [c for c in batch if c.id not in ("none", DEBUG)]
        secrets = server_redactor(self.problem.server_spec)
        scheduled = run_attempts(
            todo, executor, self.slots.slots, self.run_dir, self.events, self.cancel, self._gate, secrets=secrets
        )
        self.harness_errors += scheduled.harness_errors
        self.records += scheduled.records
        self._write_partial()
        if scheduled.interrupted:
            raise _Interrupted
        return list(scheduled.records)

    def _gate(self, item: PlannedAttempt, done: Sequence[AttemptRecord]) -> str | None:
        """Skip what can no longer change the answer: a remedy already refuted, or (--first)
        anything once a remedy came up."""
        mine = [r for r in done if r.cell_id == item.cell.id]
        if any(r.outcome in (Outcome.FAILED, Outcome.CRASHED) for r in mine):
            return "its remedy already failed: its verdict is decided"
        seen = [*self.records, *done]
        if self.options.first and any(c.works(seen) for c in self.launched if c.id != item.cell.id):
            return "--first: a remedy already came up"
        return None

    def _cell(self, candidate: Candidate) -> ProbeCell:
        known = {c.id: c for c in self.cells}
        if candidate.id in known:
            return known[candidate.id]
        index = len(self.cells)  # the command is 0, then each remedy in the order registered
        launch = candidate.launch
        return ProbeCell(index, candidate.id, {AXIS: candidate.id}, tuple(launch.argv), dict(launch.env))

    def _priced(self) -> LocalExecutor:
        """The remedies' executor: with --price, each launch that comes up is priced before its teardown."""
        if self.priced is None:
            server: ServerSpec = self.problem.server_spec
            request = self.problem.request or self.problem.catalogue.requests.get(self.server or "")
            if self.problem.price and request is not None:
                server = dataclasses.replace(server, price=PriceLoad(request, self.problem.price))
            elif self.problem.price:
                self.notes.append(
                    f"--price {self.problem.price}: no pricing request is known for {self.server or 'this server'} "
                    "(a remedies file's price_request names one): start-up times only"
                )
            self.priced = LocalExecutor(server, self.run_dir, self.slots)
        return self.priced

    def _target(self, records: Sequence[AttemptRecord]) -> Target:
        failing = [r for r in records if r.outcome is not Outcome.READY and r.outcome.ran] or list(records)
        label = Counter(r.label for r in failing).most_common(1)[0][0]
        first = next(r for r in failing if r.label == label)
        hits = sum(r.label == label for r in records)
        flaky = f"{hits} of {len(records)} launches were {label}" if hits < len(records) else None
        return Target(
            first.outcome,
            first.failure_class,
            cause=first.cause,
            signature=first.signature,
            evidence=first.evidence,
            attempts=tuple(r.attempt for r in records),
            flaky=flaky,
        )

    def _detected(self, records: Sequence[AttemptRecord]) -> str | None:
        from diagbench.logs.classify import classify_file

        for record in records:
            log = self.run_dir.cells / record.attempt / "server.log"
            if log.is_file():
                found = classify_file(log, self.problem.server_spec.signatures).server
                if found:
                    return found
        return None

    def _no_remedy(self) -> str:
        assert self.target is not None
        label = self.target.outcome + (f":{self.target.failure_class}" if self.target.failure_class else "")
        server = self.server or "an unknown server"
        fix = f"diagbench remedies --server {self.server}" if self.server else "pass --server NAME"
        if known := unapplied(self.problem, self.server, self.target):
            return (
                f"no remedy applies to {label} of {server}: those known for it ({', '.join(known)}) change nothing "
                "in this command (it sets each so already, at its bound, or to a value that is no number); "
                "add your own with --remedies FILE"
            )
        return f"no remedy known for {label} of {server} (see {fix}; add your own with --remedies FILE)"

    def result(self, status: Status, reason: str) -> Triage:
        tried: list[Tried] = [tried_of(c, self.records, self.problem) for c in self.launched]
        best = recommend(tried, self.problem) if status is Status.FOUND else None
        notes = (*self.notes, *([self.target.flaky] if self.target and self.target.flaky else []))
        if silent := [t.id for t in tried if t.works and unserved(t)]:
            notes = (*notes, f"came up but answered no pricing request, so never recommended: {', '.join(silent)}")
        return Triage(status, reason, self.problem.shown(), self.server, self.target, tuple(tried), best, notes)

    def _write_partial(self) -> None:
        """On disk after each batch: a diagbench killed mid-triage leaves a triage `report` can read."""
        partial = self.result(Status.INTERRUPTED, "stopped before the triage ended (diagbench was killed?)")
        write_json(self.run_dir.path / FILENAME, partial.to_json())

    def finish(self, result: Triage) -> None:
        write_json(self.run_dir.path / FILENAME, result.to_json())
        verdicts = [judge(h, self.cells, self.records).to_json() for h in self.hypotheses]
        self.run_dir.write_verdicts(verdicts)
