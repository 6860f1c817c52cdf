"""An isolation run: launch the good and the bad configuration, then delta-debug the factors
between them. It is a normal run directory: every probe an attempt launched through the
scheduler (named by the factors it applies), with `isolation.json` beside them. Core
only: it never prints."""

from __future__ import annotations

import contextlib
import os
import re
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from diagbench.errors import WriteError
from diagbench.execute.cancel import Cancel
from diagbench.execute.choice import Placement, place
from diagbench.execute.events import RunEvents
from diagbench.execute.plugin import Build
from diagbench.execute.scheduler import run_attempts
from diagbench.execute.slots import SlotPlan, resolve_slots
from diagbench.isolate.problem import Problem
from diagbench.isolate.record import FILENAME, Isolation, Status, Step
from diagbench.isolate.search import (
    Judged,
    Probe,
    Result,
    Target,
    companions,
    conclude,
    ddmin,
    judge_launches,
    suspects,
)
from diagbench.launch import host
from diagbench.launch.environment import attempt_environments
from diagbench.launch.envs import Built
from diagbench.records.manifest import RunSettings, build_manifest
from diagbench.records.record import AttemptRecord
from diagbench.records.redact import server_redactor
from diagbench.records.store import LATEST_ISOLATION, RunDir, new_run_id, open_run, write_json
from diagbench.spec.executor import ExecutorKind, ExecutorSpec
from diagbench.spec.gpus import GpuRequest
from diagbench.spec.matrix import Cell
from diagbench.spec.plan import PlannedAttempt
from diagbench.spec.ready import ISOLATE_READY_FIX, READY_FIX
from diagbench.vocab import Outcome

_UNSAFE = re.compile(r"[^A-Za-z0-9_.+=-]+")


@dataclass(frozen=True)
class IsolateOptions:
    runs_dir: Path = Path("runs")
    run_id: str | None = None
    repeat: int = 1  # launches per probe
    parallel: int | None = 1  # launches at once; None: one per GPU slot (one without GPUs)
    gpus: GpuRequest | None = None  # None: the spec's `gpus:`, else every visible GPU
    slots: SlotPlan | None = None  # resolved already (the CLI does, to show its notes first)
    # where the probes run, placed as `run` places attempts; on this host: a probe's cell is made
    # during the search, and a remote worker finds its cell in the spec file
    executor: ExecutorSpec = field(default_factory=lambda: ExecutorSpec(ExecutorKind.LOCAL))


class IsolateEvents(RunEvents, Protocol):
    def on_step(self, step: Step) -> None:
        """A configuration finished all its launches (the baselines first)."""


@dataclass(frozen=True)
class IsolateResult:
    run_dir: RunDir
    isolation: Isolation
    harness_errors: tuple[str, ...] = ()


@dataclass(frozen=True)
class ProbeCell(Cell):
    """A probe's cell: its id and folder are named by the factors it applies."""

    @property
    def slug(self) -> str:
        return _UNSAFE.sub("_", "+".join(name.lstrip("-") for name in self.id.split("+")))[:100] or "probe"


class Interrupted(Exception):
    """The user stopped the search: what finished is recorded."""


class _WriteFailed(Exception):
    """A record or log could not be written (a full disk): the search stops, said as such."""


RESERVE = ".isolation-reserve"  # room kept for the last isolation.json: freed just before it is written
RESERVE_BYTES = 256 << 10


def _reserve(folder: Path) -> None:
    """Hold some room on the run's file system, so that a disk the servers' logs fill up still
    takes the isolation.json that says so (best effort: nothing if it cannot be had)."""
    with contextlib.suppress(OSError):
        fd = os.open(folder / RESERVE, os.O_WRONLY | os.O_CREAT | os.O_CLOEXEC, 0o600)
        try:
            os.posix_fallocate(fd, 0, RESERVE_BYTES)
        finally:
            os.close(fd)


def isolate(
    problem: Problem, options: IsolateOptions, events: IsolateEvents, cancel: Cancel | None = None
) -> IsolateResult:
    """Open the run, launch the baselines, search, and write isolation.json (interrupted or not).
    `cancel` stops it early (the CLI sets it on Ctrl-C, SIGTERM and SIGHUP)."""
    placement = place(problem.spec, options.executor, options.runs_dir, None)
    slots = options.slots or isolation_slots(problem, options)
    run_dir = open_isolation(problem, options, slots, events, placement)
    _reserve(run_dir.path)
    prober = Prober(problem, options, run_dir, events, slots, cancel or Cancel(), placement)
    try:
        isolation = _search(problem, prober, options)
    finally:
        if cancel is None:
            prober.cancel.close()
    (run_dir.path / RESERVE).unlink(missing_ok=True)
    write_json(run_dir.path / FILENAME, isolation.to_json())
    run_dir.write_verdicts([])  # a normal run directory, though an isolation judges no hypothesis
    return IsolateResult(run_dir, isolation, tuple(prober.harness_errors))


def isolation_slots(problem: Problem, options: IsolateOptions) -> SlotPlan:
    """Where launches run at once: the run's GPU slots (plain slots on a host without GPUs)."""
    return resolve_slots(problem.spec, options.gpus, problem.usable_parallel(options.parallel))


def open_isolation(
    problem: Problem, options: IsolateOptions, slots: SlotPlan, events: RunEvents, placement: Placement | None = None
) -> RunDir:
    """A new run directory whose manifest records the request and its factors (no attempt is planned ahead)."""
    placement = placement or place(problem.spec, options.executor, options.runs_dir, None)
    run_id = options.run_id or new_run_id(problem.run_name)
    run_dir = open_run(options.runs_dir, run_id, LATEST_ISOLATION)  # runs/latest stays the newest matrix run
    settings = RunSettings(
        repeat=options.repeat,
        parallel=options.parallel,
        gpus=tuple(slots.offer.ids),
        gpus_per_attempt=slots.per_attempt,
        slots=tuple(tuple(slot.gpus) for slot in slots.slots),
        executor=placement.to_json(),
        isolate=True,
    )
    facts = host.collect(problem.spec.path.resolve().parent)
    good = problem.space.configuration(())
    cell = ProbeCell(0, "good", dict(good.params), tuple(good.args), dict(good.env))
    environment = attempt_environments(problem.server, [PlannedAttempt(cell, 1)])  # the good launch's
    factors = [f.to_json() for f in problem.space.factors]
    run_dir.write_manifest(build_manifest(problem.spec, [], run_id, settings, facts, factors, environment))
    events.on_open(run_dir, [])
    return run_dir


def _search(problem: Problem, prober: Prober, options: IsolateOptions) -> Isolation:
    names = [f.name for f in problem.space.factors]
    try:
        good, bad = prober.launch([((), "good"), (tuple(names), "bad")])
        prober.target, trouble, notes = check_baselines(good, bad)
        if prober.key(tuple(names)) in prober.unbuilt:  # not a failure of the server: nothing to isolate
            trouble = "the bad environment does not install: " + bad[0].reason.split(": ", 1)[-1]
        prober.add_step((), good, "good")
        prober.add_step(tuple(names), bad, "bad")
        if trouble:
            return prober.isolation(Status.BAD_BASELINE, trouble, (), notes)
        culprit, known = ddmin(names, prober.test, width=max(1, len(prober.slots) // options.repeat))
        if options.repeat == 1 and culprit:  # single launches decided it: launch it again before naming it
            unconfirmed, note = prober.confirm(tuple(culprit), names)
            unconfirmed = unconfirmed or contradicted(culprit, known)
            notes = (*notes, note) if note else notes
            if unconfirmed:
                return prober.isolation(Status.NOT_ISOLABLE, unconfirmed, (), notes, suspects(names, known))
    except _WriteFailed as failed:
        return prober.isolation(Status.WRITE_FAILED, f"stopped: {failed}", ())
    except (Interrupted, KeyboardInterrupt):
        reason = "interrupted: the launches that finished are recorded, the rest are 'cancelled'"
        return prober.isolation(Status.INTERRUPTED, reason, ())
    known[frozenset(names)] = judge_launches(bad, prober.target)  # the search took it as failing; was it steady?
    conclusion = conclude(culprit, known)
    if not conclusion.isolated:
        return prober.isolation(Status.NOT_ISOLABLE, conclusion.reason, (), notes, suspects(names, known))
    together = tuple(_together(problem, g, rest) for g, rest in companions(culprit, known))
    return prober.isolation(Status.FOUND, "", culprit, notes, together=together)


def _together(problem: Problem, needed: str, rest: Sequence[str]) -> str:
    """`urllib3 2.0.7 does not install without requests 2.31.0: applied together`."""
    factors = {f.name: f for f in problem.space.factors}

    def bad(name: str) -> str:
        return f"{name} {factors[name].label(True)}"

    return f"{', '.join(bad(n) for n in rest)} does not install without {bad(needed)}: applied together"


def contradicted(culprit: Sequence[str], known: Mapping[Probe, Judged]) -> str | None:
    """Why the launches so far contradict a culprit (as a flaky target does), or None: a
    launch holding all of it (and more) that came up."""
    whole = frozenset(culprit)
    for probe, judged in known.items():
        if whole <= probe and judged.result is Result.PASS:
            return f"flaky: a launch with {' + '.join(culprit)} came up (try a larger --repeat)"
    return None


def check_baselines(good: Sequence[AttemptRecord], bad: Sequence[AttemptRecord]) -> tuple[Target, str, tuple[str, ...]]:
    """The target (the bad launch's outcome and class), what is wrong with the baselines, and notes."""
    trouble = []
    ready = sum(r.outcome is Outcome.READY for r in good)
    if ready < len(good):
        first = next(r for r in good if r.outcome is not Outcome.READY)
        shown = f" in {len(good) - ready} of {len(good)} launches" if len(good) > 1 else ""
        trouble.append(f"the good launch did not come up{shown}: {first.label} ({_why(first)})")
    failing = [r for r in bad if r.outcome is not Outcome.READY and r.outcome.ran]
    label = Counter(r.label for r in failing or bad).most_common(1)[0][0]
    first = next(r for r in failing or bad if r.label == label)
    target = Target(first.outcome, first.failure_class)  # what the bad launch did, even when it came up
    if not failing:
        trouble.append("the bad launch came up: there is no failure to isolate")
        return target, "; ".join(trouble), ()
    hits = sum(target.matches(r) for r in bad)
    notes = (f"the bad launch is flaky: {hits} of {len(bad)} launches were {label}",) if hits < len(bad) else ()
    return target, "; ".join(trouble), notes


def _why(record: AttemptRecord) -> str:
    if record.evidence:
        return f"L{record.evidence.line_no}: {record.evidence.text}"
    return record.reason.replace(READY_FIX, ISOLATE_READY_FIX)  # a timeout with no ready rule: isolate's own fix


class Prober:
    """Launches configurations through the scheduler, once each, and keeps their steps.

    `test` is the search's callback; a benchmark may ask it other questions (one factor at a time)."""

    def __init__(
        self,
        problem: Problem,
        options: IsolateOptions,
        run_dir: RunDir,
        events: IsolateEvents,
        slots: SlotPlan,
        cancel: Cancel,
        placement: Placement | None = None,
    ):
        placement = placement or place(problem.spec, options.executor, options.runs_dir, None)
        self.problem, self.options, self.run_dir, self.events = problem, options, run_dir, events
        self.cancel = cancel
        self.executor = placement.executor(Build(problem.spec, run_dir, slots))
        self.slots = list(slots.slots)
        self.order = {f.name: i for i, f in enumerate(problem.space.factors)}
        self.target: Target | None = None
        self.steps: list[Step] = []
        self.launched: dict[tuple[object, ...], list[AttemptRecord]] = {}  # configuration -> its launches
        self.records: list[AttemptRecord] = []
        self.harness_errors: list[str] = []
        self.count = 0
        self.unbuilt: dict[tuple[object, ...], frozenset[str]] = {}  # configurations whose environment did not install

    def test(self, batch: Sequence[Probe]) -> list[Judged]:
        """The search's callback: launch each new configuration `repeat` times, judge each probe."""
        assert self.target is not None
        applied = [tuple(sorted(probe, key=self.order.__getitem__)) for probe in batch]
        new = list(dict.fromkeys(a for a in applied if self.key(a) not in self.launched))
        self.launch([(a, None) for a in new])
        out = []
        for names in applied:
            records = self.launched[self.key(names)]
            unbuilt = self.key(names) in self.unbuilt
            out.append(Judged(Result.UNRESOLVED, unbuildable=True) if unbuilt else judge_launches(records, self.target))
            self.add_step(names, records, None)
        return out

    def confirm(self, culprit: tuple[str, ...], names: Sequence[str]) -> tuple[str | None, str | None]:
        """At --repeat 1 a flaky target can make the search keep an innocent factor (the launch
        without it happened to come up). So the culprit is launched twice more, without each
        of its factors once more, and its complement once: (why it does not stand, a note)."""
        assert self.target is not None
        rest = tuple(n for n in names if n not in culprit)
        less = [tuple(n for n in culprit if n != f) for f in culprit] if len(culprit) > 1 else []
        probes = [tuple(sorted(p, key=self.order.__getitem__)) for p in [culprit, culprit, *less, rest]]
        results = self.launch([(p, None) for p in probes])
        for probe, records in zip(probes, results, strict=True):
            self.add_step(probe, records, None)
        shown, retry = " + ".join(culprit), "(try a larger --repeat)"
        if judge_launches([*results[0], *results[1]], self.target).result is not Result.FAIL:
            return f"flaky: {shown} did not bring the target again when launched again {retry}", None
        for factor, records in zip(culprit, results[2 : 2 + len(less)], strict=False):
            if judge_launches(records, self.target).reproduced:
                return f"flaky: without {factor} the target came too, when launched again {retry}", None
        if rest and judge_launches(results[-1], self.target).reproduced:
            return None, f"the target also came without {shown}: another cause may be among the other factors"
        return None, None

    def launch(self, probes: Sequence[tuple[tuple[str, ...], str | None]]) -> list[list[AttemptRecord]]:
        """Launch each (applied factors, baseline name) `repeat` times at once; their records, per probe."""
        groups = [self._plan(applied, baseline) for applied, baseline in probes]
        unbuilt = {
            i: self._not_built(groups[i], error) for i, (a, _) in enumerate(probes) if (error := self._prepare(a))
        }
        todo = [item for i, group in enumerate(groups) if i not in unbuilt for item in group]
        secrets = server_redactor(self.problem.server)
        run_dir, events, cancel = self.run_dir, self.events, self.cancel
        scheduled = run_attempts(todo, self.executor, self.slots, run_dir, events, cancel, secrets=secrets)
        self.harness_errors.extend(scheduled.harness_errors)
        self.records.extend(scheduled.records)
        by_name = {r.attempt: r for r in scheduled.records}
        out = [unbuilt.get(i) or [by_name[item.name] for item in group] for i, group in enumerate(groups)]
        for (applied, _), records in zip(probes, out, strict=True):
            self.launched[self.key(applied)] = records
        if scheduled.interrupted or scheduled.write_error is not None:
            for (applied, baseline), records in zip(probes, out, strict=True):
                self.add_step(applied, records, baseline)
            if scheduled.write_error is not None:  # a full disk stopped it, not a signal
                raise _WriteFailed(str(scheduled.write_error))
            raise Interrupted
        return out

    def _prepare(self, applied: tuple[str, ...]) -> str | None:
        """Build the configuration's environment where the factors are packages; why not, when it did not install."""
        prepare = getattr(self.problem.space, "prepare", None)
        if prepare is None:
            return None
        if self.cancel.is_set():
            raise Interrupted
        built: Built = prepare(applied)
        if self.cancel.is_set():  # Ctrl-C reached uv too: its failure says nothing of the set
            raise Interrupted
        if built.ok:
            return None
        self.unbuilt[self.key(applied)] = frozenset(applied)
        return built.error or "it did not install"

    def _not_built(self, group: Sequence[PlannedAttempt], error: str) -> list[AttemptRecord]:
        """The records of launches that never happened: their environment did not resolve or install."""
        records = []
        for item in group:
            record = AttemptRecord(
                cell_id=item.cell.id,
                repeat=item.repeat,
                attempt=item.name,
                params=dict(item.cell.params),
                command=list(item.cell.args),
                env_changes={},
                outcome=Outcome.LAUNCH_ERROR,
                reason="its environment did not resolve or install: " + error.splitlines()[0][:300],
            )
            self.run_dir.write_result(record)
            records.append(record)
        return records

    def _plan(self, applied: tuple[str, ...], baseline: str | None) -> list[PlannedAttempt]:
        self.count += 1
        config = self.problem.space.configuration(applied)
        name = baseline or "+".join(applied)
        cell = ProbeCell(self.count, name, dict(config.params), tuple(config.args), dict(config.env))
        return [PlannedAttempt(cell, r) for r in range(1, self.options.repeat + 1)]

    def key(self, applied: tuple[str, ...]) -> tuple[object, ...]:
        """What is launched, so two factor sets that make the same launch share its result."""
        config = self.problem.space.configuration(applied)
        return (config.args, tuple(sorted(config.env.items(), key=lambda kv: kv[0])))

    def add_step(self, applied: tuple[str, ...], records: Sequence[AttemptRecord], baseline: str | None) -> None:
        step = make_step(applied, records, self.target, baseline)
        self.steps.append(step)
        # on disk at once: a diagbench killed mid-search leaves an isolation `report` can read
        partial = self.isolation(Status.INTERRUPTED, "stopped before the search ended (diagbench was killed?)", ())
        with contextlib.suppress(WriteError):  # a full disk: the search stops on the launches' own write error
            write_json(self.run_dir.path / FILENAME, partial.to_json())
        self.events.on_step(step)

    def isolation(
        self,
        status: Status,
        reason: str,
        culprit: Sequence[str],
        notes: Sequence[str] = (),
        hints: Sequence[str] = (),
        together: Sequence[str] = (),
    ) -> Isolation:
        space = self.problem.space
        everything = [f.name for f in space.factors]
        return Isolation(
            status=status,
            reason=reason,
            target=self.target or Target(Outcome.CANCELLED, None),  # stopped before the bad launch ended
            factors=space.factors,
            culprit=tuple(culprit),
            launches=sum(r.started_at is not None for r in self.records),
            steps=tuple(self.steps),
            repeat=self.options.repeat,
            suspects=tuple(hints),
            notes=(*space.notes, *notes),
            commands={"good": self.problem.shown(()), "bad": self.problem.shown(everything)},
            together=tuple(together),
        )


def make_step(
    applied: tuple[str, ...], records: Sequence[AttemptRecord], target: Target | None, baseline: str | None
) -> Step:
    """One configuration's launches as a step: the commonest outcome, and fail/pass/unresolved."""
    label = Counter(r.label for r in records).most_common(1)[0][0]
    first = next(r for r in records if r.label == label)
    if target is not None and target.outcome is not Outcome.READY:
        judged = judge_launches(records, target)
    else:  # no failure to compare with (a bad launch that came up, or none yet): did it come up?
        ready = all(r.outcome is Outcome.READY for r in records)
        judged = Judged(Result.PASS if ready else Result.UNRESOLVED, flaky=len({r.label for r in records}) > 1)
    return Step(
        applied=applied,
        outcome=first.outcome,
        failure_class=first.failure_class,
        result=judged.result,
        flaky=judged.flaky,
        outcomes=tuple(r.label for r in records),
        attempts=tuple(r.attempt for r in records),
        evidence=first.evidence,
        baseline=baseline,
        reason=first.reason or "",
    )
