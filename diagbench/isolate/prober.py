"""Launching an isolation's configurations: each through the scheduler as attempts of the run,
memoised by what is launched (argv, environment, working directory): a configuration the
search has seen is launched again only when the search asks for it again. Its records are
kept as steps. Core only."""

from __future__ import annotations

import contextlib
import re
from collections import Counter
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from diagbench.errors import WriteError
from diagbench.execute.cancel import Cancel
from diagbench.execute.choice import Placement, place
from diagbench.execute.events import RunEvents
from diagbench.execute.plugin import Build
from diagbench.execute.scheduler import run_attempts
from diagbench.execute.slots import SlotPlan
from diagbench.isolate.problem import Problem
from diagbench.isolate.record import FILENAME, Isolation, Status, Step
from diagbench.isolate.search import Judged, Probe, Result, Target, judge_launches
from diagbench.launch.envs import Built
from diagbench.records.record import AttemptRecord
from diagbench.records.redact import server_redactor
from diagbench.records.store import RunDir, write_json
from diagbench.spec.executor import LOCAL, ExecutorSpec
from diagbench.spec.gpus import GpuRequest
from diagbench.spec.matrix import Cell
from diagbench.spec.plan import PlannedAttempt
from diagbench.vocab import Outcome

__all__ = [
    "Interrupted",
    "IsolateEvents",
    "IsolateOptions",
    "ProbeCell",
    "Prober",
    "WriteFailed",
    "make_step",
]

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
    executor: ExecutorSpec = field(default_factory=lambda: ExecutorSpec(LOCAL))
    good_first: bool = False  # launch the good side beside the bad one, not only where the search needs it


class IsolateEvents(RunEvents, Protocol):
    def on_step(self, step: Step) -> None:
        """A configuration finished all its launches (the bad launch first)."""


@dataclass(frozen=True)
class ProbeCell(Cell):
    """A probe's cell: its id and folder are named by the factors it applies."""

    @property
    def slug(self) -> str:
        return _UNSAFE.sub("_", "+".join(name.lstrip("-") for name in self.id.split("+")))[:100] or "probe"


class Interrupted(Exception):
    """The user stopped the search: what finished is recorded."""


class WriteFailed(Exception):
    """A record or log could not be written (a full disk): the search stops, said as such."""


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

    def test(self, batch: Sequence[Probe], again: bool = False) -> list[Judged]:
        """The search's callback: each probe judged over all the launches of its configuration.
        A configuration already launched (for this probe or another that makes the same launch)
        is not launched again unless `again`; then each is launched once more (`repeat` times)."""
        assert self.target is not None
        applied = [tuple(sorted(probe, key=self.order.__getitem__)) for probe in batch]
        todo, keys = [], set()
        for names in applied:  # each configuration once, whichever factor sets make it
            key = self.key(names)
            if key not in keys and key not in (self.unbuilt if again else self.launched):
                todo.append(names)
                keys.add(key)
        fresh = dict(zip(todo, self.launch([(a, None if a else "good") for a in todo]), strict=True))
        out = []
        for names in applied:
            key = self.key(names)
            records = self.launched[key]
            unbuilt = key in self.unbuilt
            out.append(Judged(Result.UNRESOLVED, unbuildable=True) if unbuilt else judge_launches(records, self.target))
            self.add_step(names, fresh.get(names, records), None if names else "good")
        return out

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
            self.launched.setdefault(self.key(applied), []).extend(records)  # a launch again adds to them
        if scheduled.interrupted or scheduled.write_error is not None:
            for (applied, baseline), records in zip(probes, out, strict=True):
                self.add_step(applied, records, baseline)
            if scheduled.write_error is not None:  # a full disk stopped it, not a signal
                raise WriteFailed(str(scheduled.write_error))
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

    def key(self, applied: Collection[str]) -> tuple[object, ...]:
        """What is launched, exactly: two factor sets that make the same launch share its result,
        and two that differ in any word, variable (set, emptied or unset) or folder never do."""
        config = self.problem.space.configuration(applied)
        env = tuple(sorted(config.env.items(), key=lambda kv: kv[0]))
        return (str(self.problem.server.cwd), tuple(config.args), env)

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
