"""The run pipeline: select cells, plan attempts, open the run and pre-register the
hypotheses, schedule the attempts on an executor, judge. Core only: it never prints."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from diagbench.errors import UserError
from diagbench.execute.cancel import Cancel
from diagbench.execute.choice import place
from diagbench.execute.events import RunEvents
from diagbench.execute.scheduler import run_attempts
from diagbench.execute.slots import plain_slots
from diagbench.judge.verdicts import Verdict, Violation, check_expectations, judge
from diagbench.launch import host
from diagbench.records.manifest import build_manifest
from diagbench.records.record import AttemptRecord
from diagbench.records.store import (
    RunDir,
    load_run,
    new_run_id,
    open_run,
)
from diagbench.spec.executor import ExecutorKind, ExecutorSpec
from diagbench.spec.load import Spec
from diagbench.spec.matrix import parse_only, select_cells
from diagbench.spec.plan import PlannedAttempt, plan_attempts
from diagbench.vocab import Outcome


@dataclass
class RunResult:
    run_dir: RunDir
    records: list[AttemptRecord]
    verdicts: list[Verdict] = field(default_factory=list)
    violations: list[Violation] = field(default_factory=list)
    interrupted: bool = False
    harness_errors: list[str] = field(default_factory=list)


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
    parallel: int | None = None  # None: 1 here, every attempt at once on Slurm (its queue decides)
    resume: Path | None = None  # an interrupted run directory to finish
    executor: ExecutorSpec = field(default_factory=ExecutorSpec)  # the command line's; over the spec's


def execute(
    spec: Spec,
    options: RunOptions,
    events: RunEvents,
) -> RunResult:
    """The run pipeline: select cells, plan, open the run, pre-register, launch, judge."""
    placement = place(spec, options.executor, options.runs_dir, options.resume)  # Slurm: checked here
    local = placement.kind is ExecutorKind.LOCAL
    if local and (options.parallel or 1) > 1 and spec.server.port is not None:
        raise UserError(
            f"--parallel {options.parallel} needs server.port: auto (cells cannot share port {spec.server.port})"
        )
    if options.resume is not None:
        run_dir, planned, done = reopen_run(spec, options.resume)
    else:
        planned = plan_attempts(select_cells(spec.cells, parse_only(options.only, spec.axes)), options.repeat)
        run_dir, done = open_run(options.runs_dir, options.run_id or new_run_id(spec.name)), []
        settings = {"only": list(options.only), "repeat": options.repeat, "parallel": options.parallel}
        settings["executor"] = placement.to_json()
        facts = host.collect(spec.path.resolve().parent)
        run_dir.write_manifest(build_manifest(spec, planned, run_dir.path.name, settings, facts))
    events.on_open(run_dir, planned)
    finished = {r.attempt for r in done}
    cancel = Cancel()
    todo = [p for p in planned if p.name not in finished]
    executor = placement.executor(spec, run_dir, run_dir.path.name, None, done, todo)
    slots = plain_slots(options.parallel or (1 if local else len(todo)))
    try:
        scheduled = run_attempts(todo, executor, slots, run_dir, events, cancel, done=done)
    finally:
        cancel.close()
    order = {p.name: i for i, p in enumerate(planned)}
    records = sorted([*done, *scheduled.records], key=lambda r: order.get(r.attempt, 0))
    result = RunResult(run_dir, records, interrupted=scheduled.interrupted, harness_errors=scheduled.harness_errors)
    result.verdicts, result.violations = judge_run(spec, records)
    run_dir.write_verdicts([v.to_json() for v in result.verdicts])
    return result


def reopen_run(spec: Spec, path: Path) -> tuple[RunDir, list[PlannedAttempt], list[AttemptRecord]]:
    """An interrupted run to finish: same spec (by hash), its plan, and what already ended."""
    loaded = load_run(path)
    if loaded.manifest.get("spec_sha256") != spec.sha256:
        raise UserError(
            f"{path}: the spec changed since this run started (its sha256 differs); "
            "resume with the spec it was started with, or start a new run"
        )
    cells = {c.id: c for c in spec.cells}
    planned = [
        PlannedAttempt(cells[a["cell_id"]], int(a["repeat"]))
        for a in loaded.manifest.get("attempts", [])
        if a.get("cell_id") in cells
    ]
    done = [r for r in loaded.records if r.outcome not in (Outcome.CANCELLED, Outcome.INTERNAL_ERROR)]
    return RunDir(loaded.path), planned, done
