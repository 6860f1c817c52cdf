"""An isolation run: launch the good and the bad configuration, then delta-debug the factors
between them. It is a normal run directory: every probe an attempt launched through the
scheduler (named by the factors it applies), with `isolation.json` beside them. Core
only: it never prints."""

from __future__ import annotations

import contextlib
import os
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from diagbench.execute.cancel import Cancel
from diagbench.execute.choice import Placement, place
from diagbench.execute.events import RunEvents
from diagbench.execute.slots import SlotPlan, resolve_slots
from diagbench.isolate.prober import (
    Interrupted,
    IsolateEvents,
    IsolateOptions,
    ProbeCell,
    Prober,
    WriteFailed,
    make_step,
)
from diagbench.isolate.problem import Problem
from diagbench.isolate.record import FILENAME, Isolation, Status, Step
from diagbench.isolate.search import (
    GOOD,
    Judged,
    Probe,
    Result,
    Target,
    companions,
    conclude,
    judge_launches,
    search,
    suspects,
)
from diagbench.launch import host
from diagbench.launch.environment import attempt_environments
from diagbench.records.build_manifest import build_manifest
from diagbench.records.manifest import RunSettings
from diagbench.records.record import AttemptRecord
from diagbench.records.store import LATEST_ISOLATION, RunDir, open_new_run, open_run, write_json
from diagbench.spec.plan import PlannedAttempt
from diagbench.spec.ready import ISOLATE_READY_FIX, READY_FIX
from diagbench.vocab import Outcome

__all__ = [
    "Interrupted",
    "IsolateEvents",
    "IsolateOptions",
    "IsolateResult",
    "ProbeCell",
    "Prober",
    "check_bad",
    "check_baselines",
    "check_good",
    "isolate",
    "isolation_slots",
    "make_step",
    "open_isolation",
]


@dataclass(frozen=True)
class IsolateResult:
    run_dir: RunDir
    isolation: Isolation
    harness_errors: tuple[str, ...] = ()


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
    """Open the run, launch the bad one, search, and write isolation.json (interrupted or not).
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
    if options.run_id:  # runs/latest stays the newest matrix run
        run_dir = open_run(options.runs_dir, options.run_id, LATEST_ISOLATION)
    else:
        run_dir = open_new_run(options.runs_dir, problem.run_name, LATEST_ISOLATION)
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
    environment = attempt_environments(problem.server, [PlannedAttempt(cell, 1)], events.on_helpers)  # the good one's
    factors = [f.to_json() for f in problem.space.factors]
    run_dir.write_manifest(build_manifest(problem.spec, [], run_dir.path.name, settings, facts, factors, environment))
    events.on_open(run_dir, [])
    return run_dir


def _search(problem: Problem, prober: Prober, options: IsolateOptions) -> Isolation:
    names = [f.name for f in problem.space.factors]
    try:
        first, trouble, notes = _first_launches(names, prober, options.good_first)
        if trouble:
            return prober.isolation(Status.BAD_BASELINE, trouble, (), notes)
        assert prober.target is not None  # what the bad launch did
        width = max(1, len(prober.slots) // options.repeat)
        found = search(names, prober.test, width, confirm=options.repeat == 1, known=first)
        culprit, known = found.culprit, found.known
        good = prober.launched.get(prober.key(())) if GOOD in known else None  # where the search needed it
        if good is not None and (trouble := check_good(good)):
            return prober.isolation(Status.BAD_BASELINE, trouble, (), notes)
        notes = (*notes, *_stood_for_good(prober.steps)) if good is None else notes
        if found.trouble:
            return prober.isolation(Status.NOT_ISOLABLE, found.trouble, (), notes, suspects(names, known))
    except WriteFailed as failed:
        return prober.isolation(Status.WRITE_FAILED, f"stopped: {failed}", ())
    except (Interrupted, KeyboardInterrupt):
        reason = "interrupted: the launches that finished are recorded, the rest are 'cancelled'"
        return prober.isolation(Status.INTERRUPTED, reason, ())
    # the search took the bad launch as failing: was it steady (with any launch of it again)?
    known[frozenset(names)] = judge_launches(prober.launched[prober.key(names)], prober.target)
    conclusion = conclude(culprit, known)
    if not conclusion.isolated:
        return prober.isolation(Status.NOT_ISOLABLE, conclusion.reason, (), notes, suspects(names, known))
    together = tuple(_together(problem, g, rest) for g, rest in companions(culprit, known))
    return prober.isolation(Status.FOUND, "", culprit, notes, together=together)


def _first_launches(
    names: Sequence[str], prober: Prober, good_first: bool
) -> tuple[dict[Probe, Judged], str, tuple[str, ...]]:
    """Launch the bad side (and the good one with it, where asked): what the search is given,
    what is wrong with them, and notes. Otherwise the good one waits until the search needs it."""
    sides = [(tuple(names), "bad"), *([((), "good")] if good_first else [])]
    try:
        launched = prober.launch(sides)
    except Interrupted:
        _judge_by_the_bad_launch(prober, names)  # it may have ended while the good one ran
        raise
    bad = launched[0]
    prober.target, trouble, notes = check_baselines(launched[1], bad) if good_first else check_bad(bad)
    if prober.key(tuple(names)) in prober.unbuilt:  # not a failure of the server: nothing to isolate
        trouble = "the bad environment does not install: " + bad[0].reason.split(": ", 1)[-1]
    for (applied, side), records in zip(sides, launched, strict=True):
        prober.add_step(applied, records, side)
    first = {frozenset(names): Judged(Result.FAIL, reproduced=True, launches=len(bad))}  # by definition
    if good_first:
        first[GOOD] = Judged(Result.PASS, launches=len(launched[1]))  # where it did not come up, trouble says so
    return first, trouble, notes


def _judge_by_the_bad_launch(prober: Prober, names: Sequence[str]) -> None:
    """After an interrupt during the first launches: where the bad launch ended in a failure,
    its target, and the steps so far judged by it (they were made before it was known)."""
    bad = [r for r in prober.launched.get(prober.key(names), []) if r.outcome is not Outcome.CANCELLED]
    if not bad or prober.target is not None:
        return
    prober.target, trouble, _ = check_bad(bad)
    if trouble:
        prober.target = None
        return
    records = {r.attempt: r for r in prober.records}
    prober.steps = [
        make_step(s.applied, [records[a] for a in s.attempts], prober.target, s.baseline) for s in prober.steps
    ]


def _stood_for_good(steps: Sequence[Step]) -> tuple[str, ...]:
    """Why the good launch was not made: the first launch that came up holds it."""
    for number, step in enumerate(steps, 1):
        if step.result is Result.PASS:
            return (f"the good launch was not made: step {number} ({' + '.join(step.applied)}) holds it and came up",)
    return ()


def _together(problem: Problem, needed: str, rest: Sequence[str]) -> str:
    """`urllib3 2.0.7 does not install without requests 2.31.0: applied together`."""
    factors = {f.name: f for f in problem.space.factors}

    def bad(name: str) -> str:
        return f"{name} {factors[name].label(True)}"

    return f"{', '.join(bad(n) for n in rest)} does not install without {bad(needed)}: applied together"


def check_baselines(good: Sequence[AttemptRecord], bad: Sequence[AttemptRecord]) -> tuple[Target, str, tuple[str, ...]]:
    """The target (the bad launch's outcome and class), what is wrong with the baselines, and notes."""
    target, bad_trouble, notes = check_bad(bad)
    return target, "; ".join(t for t in (check_good(good), bad_trouble) if t), notes


def check_good(good: Sequence[AttemptRecord]) -> str:
    """What is wrong with the good launch: "" where every launch of it came up."""
    ready = sum(r.outcome is Outcome.READY for r in good)
    if ready == len(good):
        return ""
    first = next(r for r in good if r.outcome is not Outcome.READY)
    shown = f" in {len(good) - ready} of {len(good)} launches" if len(good) > 1 else ""
    return f"the good launch did not come up{shown}: {first.label} ({_why(first)})"


def check_bad(bad: Sequence[AttemptRecord]) -> tuple[Target, str, tuple[str, ...]]:
    """The target (the bad launch's outcome and class), what is wrong with the bad launch, and notes."""
    failing = [r for r in bad if r.outcome is not Outcome.READY and r.outcome.ran]
    label = Counter(r.label for r in failing or bad).most_common(1)[0][0]
    first = next(r for r in failing or bad if r.label == label)
    target = Target(first.outcome, first.failure_class)  # what the bad launch did, even when it came up
    if not failing:
        return target, "the bad launch came up: there is no failure to isolate", ()
    hits = sum(target.matches(r) for r in bad)
    notes = (f"the bad launch is flaky: {hits} of {len(bad)} launches were {label}",) if hits < len(bad) else ()
    return target, "", notes


def _why(record: AttemptRecord) -> str:
    if record.evidence:
        return f"L{record.evidence.line_no}: {record.evidence.text}"
    return record.reason.replace(READY_FIX, ISOLATE_READY_FIX)  # a timeout with no ready rule: isolate's own fix
