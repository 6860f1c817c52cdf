"""A limit run: the values bisection asks for, each a cell launched through the scheduler
(`repeat` times), then a check past the limit where the budget allows; `limit.json` beside
the attempts, rewritten after every value, so a diagbench killed mid-search leaves what it
knew. Core only: it never prints."""

from __future__ import annotations

import contextlib
import dataclasses
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from diagbench.errors import WriteError
from diagbench.execute.cancel import Cancel
from diagbench.execute.events import RunEvents
from diagbench.limit.launches import Interrupted, Launcher, LaunchOptions, WriteFailed, check_launchable
from diagbench.limit.problem import LimitProblem
from diagbench.limit.record import FILENAME, Limit, Role, Status, Step
from diagbench.limit.search import Conclusion, Search, Verdict, budget, judge
from diagbench.records.record import AttemptRecord
from diagbench.records.store import RunDir, write_json
from diagbench.spec.ready import PriceLoad
from diagbench.vocab import FailureClass, Outcome

__all__ = ["LimitEvents", "LimitResult", "find_limit"]


class LimitEvents(RunEvents, Protocol):
    def on_step(self, step: Step) -> None:
        """A value's launches all ended."""


@dataclass(frozen=True)
class LimitResult:
    run_dir: RunDir
    limit: Limit
    harness_errors: tuple[str, ...] = ()


def find_limit(
    problem: LimitProblem, options: LaunchOptions, events: LimitEvents, cancel: Cancel | None = None
) -> LimitResult:
    """Open the run, search, check, and write limit.json (interrupted or not)."""
    spec = problem.spec
    if problem.price and problem.request is not None:  # every launch that comes up is priced before its teardown
        spec = dataclasses.replace(
            spec, server=dataclasses.replace(spec.server, price=PriceLoad(problem.request, problem.price))
        )
    check_launchable(spec, problem.launch_at(problem.hi))
    own = cancel is None
    launcher = Launcher(spec, options, events, cancel or Cancel(), "limit")
    runner = _Runner(problem, launcher, events)
    try:
        found = runner.run()
    finally:
        if own:
            launcher.cancel.close()
    write_json(launcher.run_dir.path / FILENAME, found.to_json())
    launcher.run_dir.write_verdicts([])  # a normal run directory, though a limit judges no hypothesis
    return LimitResult(launcher.run_dir, found, tuple(launcher.harness_errors))


class _Runner:
    def __init__(self, problem: LimitProblem, launcher: Launcher, events: LimitEvents):
        self.problem, self.launcher, self.events = problem, launcher, events
        self.search = Search(problem.lo, problem.hi, problem.smallest)
        self.steps: list[Step] = []

    def run(self) -> Limit:
        try:
            while (value := self.search.next_value()) is not None:
                self.step(value, Role.SEARCH)
            if (value := self.search.check_value()) is not None:
                self.step(value, Role.CHECK)
        except (Interrupted, KeyboardInterrupt):
            return self.result(Status.INTERRUPTED, "interrupted: the launches that ended are recorded")
        except WriteFailed as failed:
            return self.result(Status.WRITE_FAILED, f"stopped: {failed}")
        return self.final()

    def step(self, value: int, role: Role) -> None:
        cell = self.launcher.cell(str(value), {"value": str(value)}, self.problem.launch_at(value))
        records = self.launcher.launch([cell])[0]
        verdict = judge(records)
        (self.search.known if role is Role.SEARCH else self.search.checks)[value] = verdict
        step = make_step(value, role, verdict, records)
        self.steps.append(step)
        if len(self.steps) == 2 and _alike(*self.steps):
            self.search.same_failure = True
        partial = self.result(Status.INTERRUPTED, "stopped before the search ended (diagbench was killed?)")
        with contextlib.suppress(WriteError):  # a full disk: the search stops on the launches' own write error
            write_json(self.launcher.run_dir.path / FILENAME, partial.to_json())
        self.events.on_step(step)

    def final(self) -> Limit:
        if self.search.stuck:
            step = next(s for s in reversed(self.steps) if s.verdict == Verdict.UNRESOLVED.value)
            why = f"the launch at {step.value} decided nothing ({step.outcome}: {step.line or 'no line'})"
            return self.result(Status.UNRESOLVED, f"{why}: the search stopped there")
        conclusion = self.search.conclude()
        if conclusion.limit is None:  # named by the value nearest the end that should come up
            first = next((s for s in self.steps if s.value == conclusion.beyond), self.steps[-1])
            shown = f"{first.outcome}" + (f":{first.failure_class}" if first.failure_class else "")
            p = self.problem
            return self.result(Status.NONE_UP, f"nothing in {p.lo}..{p.hi} came up ({first.value}: {shown})")
        return self.result(Status.FOUND, "")

    def result(self, status: Status, reason: str) -> Limit:
        p, conclusion = self.problem, self.search.conclude()
        ends = {"largest_ok": conclusion.limit, "smallest_bad": conclusion.beyond}
        if p.smallest:
            ends = {"smallest_ok": conclusion.limit, "largest_bad": conclusion.beyond}
        return Limit(
            status=status,
            reason=reason,
            command=self.launcher.secrets.log(p.shown()),
            option=p.knob.name,
            env=p.knob.env,
            smallest=p.smallest,
            lo=p.lo,
            hi=p.hi,
            monotone=conclusion.monotone if status is Status.FOUND or status is Status.NONE_UP else None,
            against=conclusion.against,
            flaky=conclusion.flaky,
            launches=sum(r.started_at is not None for r in self.launcher.records),
            budget=budget(p.lo, p.hi) * self.launcher.options.repeat,
            repeat=self.launcher.options.repeat,
            steps=tuple(self.steps),
            server=p.server,
            notes=tuple(self.notes(status, conclusion)),
            **ends,
        )

    def notes(self, status: Status, conclusion: Conclusion) -> list[str]:
        p, out = self.problem, []
        if conclusion.against is not None:
            out.append(_against(p, conclusion))
            if self.launcher.options.repeat == 1:
                out.append("at --repeat 1 a flaky launch looks the same: launch again with --repeat 3")
        elif status in (Status.FOUND, Status.NONE_UP) and conclusion.monotone is None:
            out.append(self._unchecked())
        end = p.lo if p.smallest else p.hi
        if status is Status.FOUND and conclusion.limit == end and p.lo != p.hi:
            out.append(
                f"{'LO' if p.smallest else 'HI'} itself came up: the limit may lie beyond {end} (widen the range, "
                f"and check that the command reads {p.knob.name}: one that ignores it comes up everywhere)"
            )
        for value in conclusion.flaky:
            step = next(s for s in self.steps if s.value == value)
            up = sum(o == Outcome.READY.value for o in step.outcomes)
            out.append(f"{value} came up in {up} of {len(step.outcomes)} launches: taken as past the limit")
        if p.price and p.request is None:
            out.append(
                f"--price {p.price}: no pricing request is known for {p.server or 'this server'} "
                "(a remedies file's price_request names one; --server S picks a server's): start-up times only"
            )
        return out

    def _unchecked(self) -> str:
        if len(self.search.known) >= budget(self.problem.lo, self.problem.hi):
            return (
                "not checked that the values that come up lie on one side: the search took every launch of its budget"
            )
        return "not checked that the values that come up lie on one side: no value was left untested"


def _against(p: LimitProblem, c: Conclusion) -> str:
    """Both values, in words: the limit and the value on the wrong side of it."""
    if c.limit is not None and c.against is not None and c.against != c.limit:
        past = (c.against < c.limit) if p.smallest else (c.against > c.limit)
        if past:
            return f"not monotone: {c.against} came up, past the limit {c.limit} (and {c.beyond} did not)"
        return f"not monotone: {c.against} did not come up, though the limit {c.limit} did"
    return f"not monotone: {c.against} came up, though the values the search launched did not"


# failures that name no class of their own (a crash, an import error, a generic error): the same
# one at two values may mean the command does not work at any
_UNSPECIFIC = (None, FailureClass.IMPORT_ERROR.value, FailureClass.OTHER.value)


def _alike(first: Step, second: Step) -> bool:
    """Two launches past the limit that failed with the same line and no class of their own."""
    past = first.verdict == second.verdict == Verdict.BAD.value
    same = first.line is not None and first.line == second.line and first.label == second.label
    return past and same and first.failure_class in _UNSPECIFIC


def make_step(value: int, role: Role, verdict: Verdict, records: Sequence[AttemptRecord]) -> Step:
    """One value's launches as a step: the commonest outcome, its deciding line."""
    labels = Counter(r.label for r in records)
    first = next(r for r in records if r.label == labels.most_common(1)[0][0]) if records else None
    ready = next((r for r in records if r.outcome is Outcome.READY), None)
    return Step(
        value=value,
        role=role,
        verdict=verdict.value,
        outcome=first.outcome if first else Outcome.CANCELLED,
        failure_class=first.failure_class if first else None,
        outcomes=tuple(r.label for r in records),
        attempts=tuple(r.attempt for r in records),
        line=(first.evidence.text if first.evidence else first.reason or None) if first else None,
        line_no=first.evidence.line_no if first and first.evidence else None,
        startup_s=ready.time_to_outcome_s if ready else None,
        price=ready.price if ready else None,
    )
