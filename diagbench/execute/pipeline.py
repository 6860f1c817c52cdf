"""The run pipeline: select cells, plan attempts, open the run and pre-register the
hypotheses, schedule the attempts on an executor, judge. Core only: it never prints."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

from diagbench.errors import UserError, WriteError
from diagbench.execute.cancel import Cancel
from diagbench.execute.choice import Placement, place
from diagbench.execute.events import RunEvents
from diagbench.execute.plugin import Build
from diagbench.execute.resume import check_same_spec
from diagbench.execute.scheduler import run_attempts
from diagbench.execute.slots import SlotPlan
from diagbench.judge.decide import Decider, decision_order
from diagbench.judge.verdicts import Verdict, Violation, check_expectations, judge
from diagbench.launch import host
from diagbench.launch.environment import attempt_environments
from diagbench.records.build_manifest import build_manifest
from diagbench.records.manifest import RunSettings
from diagbench.records.record import AttemptRecord
from diagbench.records.redact import server_redactor
from diagbench.records.store import (
    RunDir,
    load_run,
    open_existing_run,
    open_new_run,
    open_run,
)
from diagbench.spec.executor import ExecutorSpec
from diagbench.spec.gpus import GpuRequest
from diagbench.spec.load import Spec
from diagbench.spec.matrix import parse_only, select_cells
from diagbench.spec.plan import PlannedAttempt, plan_attempts
from diagbench.vocab import Outcome

__all__ = ["RunOptions", "RunResult", "check_decision_options", "execute", "judge_run", "reopen_run"]


@dataclass
class RunResult:
    run_dir: RunDir
    records: list[AttemptRecord]
    verdicts: list[Verdict] = field(default_factory=list)
    violations: list[Violation] = field(default_factory=list)
    interrupted: bool = False
    harness_errors: list[str] = field(default_factory=list)
    write_error: WriteError | None = None  # the run stopped: a record or log could not be written


def judge_run(spec: Spec, records: Sequence[AttemptRecord]) -> tuple[list[Verdict], list[Violation]]:
    verdicts = [judge(h, spec.cells, records) for h in spec.hypotheses]
    return verdicts, check_expectations(spec.expectations, records)


@dataclass(frozen=True)
class RunOptions:
    """What `diagbench run` was asked for, beyond the spec."""

    runs_dir: Path = Path("runs")
    run_id: str | None = None
    only: tuple[str, ...] = ()
    repeat: int = 1
    parallel: int | None = None  # attempts at once; None: one per GPU slot (one without GPUs); on a cluster, all
    resume: Path | None = None  # an interrupted run directory to finish
    gpus: GpuRequest | None = None  # None: the spec's `gpus:`, else every visible GPU
    stop_when_decided: bool = False  # skip attempts that can no longer change a verdict or an expect
    fail_fast: bool = False  # skip everything after the first violated expect
    slots: SlotPlan | None = None  # resolved already (the CLI does, to show its notes first)
    executor: ExecutorSpec = field(default_factory=ExecutorSpec)  # the command line's; over the spec's


def execute(
    spec: Spec,
    options: RunOptions,
    events: RunEvents,
    cancel: Cancel | None = None,
) -> RunResult:
    """The run pipeline: select cells, plan, open the run, pre-register, launch, judge.
    `cancel` stops it early (the CLI sets it on Ctrl-C, SIGTERM and SIGHUP)."""
    placement = place(spec, options.executor, options.runs_dir, options.resume)  # a cluster: checked here
    check_decision_options(spec, options.stop_when_decided, options.fail_fast)
    slots: SlotPlan | None = None
    if options.resume is not None:
        run_dir, planned, done = reopen_run(spec, options.resume)
    else:
        planned = plan_attempts(select_cells(spec.cells, parse_only(options.only, spec.axes)), options.repeat)
        slots = placement.slots(spec, options.slots, options.gpus, options.parallel, len(planned))
        run_dir = (
            open_run(options.runs_dir, options.run_id) if options.run_id else open_new_run(options.runs_dir, spec.name)
        )
        done = []
    own_cancel = cancel is None
    cancel = cancel or Cancel()
    try:  # the run directory is locked from here on: released however this ends
        if slots is None:
            slots = placement.slots(spec, options.slots, options.gpus, options.parallel, len(planned) - len(done))
        if options.resume is None:
            facts = host.collect(spec.path.resolve().parent)
            settings = replace(_settings(options, slots), executor=placement.to_json())
            # the server's interpreters, each asked once, where the servers run: a cluster's worker asks on
            # its node (cells/<attempt>/environment.json), never this host, which may have another one
            environment = (
                attempt_environments(spec.server, planned, events.on_helpers, cancel.event)
                if placement.plugin.on_this_host
                else (None, {})
            )
            manifest = build_manifest(spec, planned, run_dir.path.name, settings, facts, environment=environment)
            run_dir.write_manifest(manifest)
        events.on_open(run_dir, planned, done)  # resumed: what finished before counts as done
        result = _launch_and_judge(spec, options, placement, slots, run_dir, planned, done, events, cancel)
    finally:
        run_dir.release()
        if own_cancel:
            cancel.close()
    return result


def check_decision_options(spec: Spec, stop_when_decided: bool, fail_fast: bool) -> list[str]:
    """--stop-when-decided with nothing to decide is a usage error (nothing would run); the
    notes to tell, such as --fail-fast with no expect to fail on."""
    if stop_when_decided and not (spec.hypotheses or spec.expectations):
        raise UserError("--stop-when-decided needs hypotheses or an expect in the spec: without, nothing would run")
    if fail_fast and not spec.expectations:
        return ["--fail-fast: the spec has no expect, nothing to fail fast on"]
    return []


def _launch_and_judge(
    spec: Spec,
    options: RunOptions,
    placement: Placement,
    slots: SlotPlan,
    run_dir: RunDir,
    planned: list[PlannedAttempt],
    done: list[AttemptRecord],
    events: RunEvents,
    cancel: Cancel,
) -> RunResult:
    finished = {r.attempt for r in done}
    decider = Decider(spec.hypotheses, spec.expectations, options.stop_when_decided, options.fail_fast, options.repeat)
    todo = [p for p in planned if p.name not in finished]
    if options.stop_when_decided:
        todo = decision_order(todo, spec.hypotheses, spec.expectations)
    executor = placement.executor(Build(spec, run_dir, slots, decider, done, todo))
    secrets = server_redactor(spec.server)
    scheduled = run_attempts(todo, executor, slots.slots, run_dir, events, cancel, decider, done, secrets)
    order = {p.name: i for i, p in enumerate(planned)}
    records = sorted([*done, *scheduled.records], key=lambda r: order.get(r.attempt, 0))
    result = RunResult(run_dir, records, interrupted=scheduled.interrupted, harness_errors=scheduled.harness_errors)
    result.write_error = scheduled.write_error
    result.verdicts, result.violations = judge_run(spec, records)
    try:
        run_dir.write_verdicts([v.to_json() for v in result.verdicts])
    except WriteError as exc:
        result.write_error = result.write_error or exc
    return result


def _settings(options: RunOptions, slots: SlotPlan) -> RunSettings:
    """The options a run was started with, for its manifest."""
    return RunSettings(
        only=options.only,
        repeat=options.repeat,
        parallel=options.parallel,
        gpus=tuple(slots.offer.ids),
        gpus_per_attempt=slots.per_attempt,
        slots=tuple(tuple(slot.gpus) for slot in slots.slots),
        stop_when_decided=options.stop_when_decided,
        fail_fast=options.fail_fast,
    )


def reopen_run(spec: Spec, path: Path) -> tuple[RunDir, list[PlannedAttempt], list[AttemptRecord]]:
    """An interrupted run to finish, locked for this diagbench: same spec (by hash), its
    plan, and what already ended."""
    run_dir = open_existing_run(path)
    try:
        loaded = load_run(path)
        if loaded.unreadable:  # relaunching would overwrite it: what it holds is not ours to lose
            raise UserError("\n".join(f"{u}; resume would overwrite it: move it away first" for u in loaded.unreadable))
        check_same_spec(path, loaded.manifest, spec)
    except BaseException:
        run_dir.release()
        raise
    cells = {c.id: c for c in spec.cells}
    planned = [PlannedAttempt(cells[a.cell_id], a.repeat) for a in loaded.manifest.attempts if a.cell_id in cells]
    done = [r for r in loaded.records if r.outcome not in (Outcome.CANCELLED, Outcome.INTERNAL_ERROR)]
    return run_dir, planned, done
