"""An isolation for people: the factors (dry run), each step as it ends, and the steps table
with the culprit and what the other ways of asking would have cost."""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Sequence

from rich.console import Console, Group, RenderableType
from rich.status import Status as Spinner
from rich.text import Text

from diagbench.execute.slots import Slot
from diagbench.isolate.factors import Factor, FactorKind
from diagbench.isolate.packages import EnvironmentBuilt
from diagbench.isolate.record import Isolation, Status, Step
from diagbench.isolate.search import Result
from diagbench.records.record import AttemptRecord
from diagbench.records.store import RunDir
from diagbench.render.fit import Column, fit
from diagbench.render.formats import Rendering, Shown
from diagbench.render.report import LINE_CHARS, OUTCOME_STYLE
from diagbench.render.text import visible
from diagbench.render.waits import HelperLine
from diagbench.safetext import one_line
from diagbench.spec.plan import PlannedAttempt
from diagbench.vocab import TextOrJson, assert_never

__all__ = [
    "RESULT_STYLE",
    "IsolationProgress",
    "answer",
    "applied_text",
    "build_line",
    "costs",
    "deciding",
    "isolation_as",
    "outcomes_text",
    "render_factors",
    "render_isolation",
    "result_text",
    "summary",
]

RESULT_STYLE = {Result.FAIL: "bold red", Result.PASS: "green", Result.UNRESOLVED: "yellow"}
_STAMP = re.compile(r"^\[\d{4}-\d\d-\d\d[ T][\d:.]+\] ")  # a log's own timestamp: noise here


def render_factors(
    factors: Sequence[Factor], commands: dict[str, str], notes: Sequence[str] | None = None, width: int | None = None
) -> RenderableType:
    """Every factor with both sides and the two baseline commands; for a dry run, how words were
    read and what the other ways of asking would cost (a real run ends with them)."""
    columns = [
        Column("factor", [Text(one_line(f.name)) for f in factors]),
        Column("kind", [Text(f.kind.value) for f in factors]),
        Column("good", [Text(one_line(f.label(False))) for f in factors], flex=True),
        Column("bad", [Text(one_line(f.label(True))) for f in factors], flex=True),
    ]
    table = fit(f"{len(factors)} factor(s) between good and bad", columns, width)
    parts: list[RenderableType] = [table]
    for side in ("good", "bad"):
        parts.append(Text(f"{side}: {one_line(commands[side])}"))
    if notes is not None:
        parts.extend(Text(f"note: {note}", style="dim") for note in notes)
        parts.append(Text(costs(len(factors), 1), style="dim"))
    return Group(*parts)


def costs(factors: int, repeat: int) -> str:
    """What the other two ways of asking cost, in launches: good, bad, and each factor alone
    (with one factor, alone is bad), or every mix."""
    times = f" x{repeat}" if repeat > 1 else ""
    alone = factors if factors > 1 else 0
    return (
        f"toggling one factor at a time: {2 + alone} launches{times} (finds no interaction); "
        f"the full matrix: {2**factors} launches{times}"
    )


def applied_text(step: Step, factors: int) -> str:
    if step.baseline == "good":
        return "good (none applied)"
    if step.baseline == "bad":
        return f"bad (all {factors})"
    return one_line(" + ".join(step.applied))


def result_text(step: Step) -> str:
    if step.result is not Result.UNRESOLVED:
        return str(step.result)
    return "unresolved (flaky)" if step.flaky else "unresolved (not the target)"


def outcomes_text(step: Step) -> str:
    if len(set(step.outcomes)) <= 1:
        return step.label + (f" x{len(step.outcomes)}" if len(step.outcomes) > 1 else "")
    return ", ".join(step.outcomes)


def deciding(step: Step) -> str:
    """The step's deciding log line, or its reason where no line decided it (an HTTP ready
    probe's answer, a timeout)."""
    if step.evidence is None:
        return one_line(step.reason)
    text = one_line(_STAMP.sub("", step.evidence.text))
    return f"L{step.evidence.line_no}: " + (text if len(text) <= LINE_CHARS else text[: LINE_CHARS - 1] + "…")


def isolation_as(isolation: Isolation, format: TextOrJson, width: int | None = None) -> Rendering:
    """What `isolate` prints at its end: the steps table, or isolation.json (`--json`)."""
    match format:
        case TextOrJson.TEXT:
            return Shown(render_isolation(isolation, width))
        case TextOrJson.JSON:
            return json.dumps(isolation.to_json(), indent=2) + "\n"
        case _:
            assert_never(format)


def render_isolation(isolation: Isolation, width: int | None = None) -> RenderableType:
    """The steps table (fitted to `width`), then the culprit (or why there is none) and what it cost."""
    steps = isolation.steps
    columns = [
        Column("#", [Text(str(n)) for n in range(1, len(steps) + 1)]),
        Column("applied", [Text(applied_text(s, len(isolation.factors))) for s in steps], flex=True),
        Column("outcome", [Text(outcomes_text(s), style=OUTCOME_STYLE.get(s.outcome.value, "")) for s in steps]),
        Column("result", [Text(result_text(s), style=RESULT_STYLE[s.result]) for s in steps]),
        Column("deciding line", [Text(visible(deciding(s))) for s in steps], flex=True, lines=2),
    ]
    return Group(fit("isolation steps", columns, width), *summary(isolation))


def summary(isolation: Isolation) -> list[Text]:
    """The answer in a few lines."""
    return [Text(line, style=style) for line, style in answer(isolation)]  # answer's lines: made safe there


def answer(isolation: Isolation) -> list[tuple[str, str]]:
    """The answer in a few lines, each with its rich style (every report form shows these)."""
    lines = [(f"note: {note}", "dim") for note in isolation.notes]
    if isolation.status is not Status.BAD_BASELINE:
        lines.append((f"target: {isolation.target.label} (what the bad launch did)", ""))
    if isolation.status is Status.FOUND and isolation.bisected:
        name = isolation.culprit[0]
        lines.append((f"first bad: {name} {isolation.first_bad} (last good: {isolation.last_good})", "bold red"))
    elif isolation.status is Status.FOUND:
        lines.extend(_culprit_lines(isolation))
    elif isolation.status is Status.NOT_ISOLABLE:
        lines.append((f"not isolable: {isolation.reason}", "bold yellow"))
        if isolation.suspects:
            names = ", ".join(isolation.suspects)
            lines.append((f"suspects: {names} (in every configuration that showed the target)", ""))
    elif isolation.status is Status.BAD_BASELINE:
        lines.append((f"the baselines do not behave: {isolation.reason}", "bold red"))
    else:
        lines.append((isolation.reason, "bold yellow"))
    if isolation.bisected:
        lines.append((f"{isolation.launches} launches (a bisection of the published versions)", "dim"))
    else:
        lines.append((f"{isolation.launches} launches; " + costs(len(isolation.factors), isolation.repeat), "dim"))
    return [(one_line(line), style) for line, style in lines]  # names, reasons, labels: a server's or a spec's words


def _culprit_lines(isolation: Isolation) -> list[tuple[str, str]]:
    factors = [isolation.factor(name) for name in isolation.culprit]
    shown = ", ".join(
        f"{f.name} {f.label(False)} -> {f.label(True)}"
        if f.kind is FactorKind.PACKAGE
        else f"{f.name} (good: {f.label(False)}, bad: {f.label(True)})"
        for f in factors
    )
    lines = [(f"culprit: {shown}", "bold red")]
    lines.extend((f"({words})", "") for words in isolation.together)
    if len(factors) > 1 and not isolation.together:
        lines.append(("guilty only together: the target needs every one of them, and none of the others", ""))
    return lines


def build_line(built: EnvironmentBuilt) -> str:
    """One probe environment as it is built: `environment (urllib3): built in 1.4 s`."""
    if built.ok:
        how = "found in the cache" if built.cached else f"built in {built.seconds:.1f} s"
    else:
        how = f"does not install{' (known from the cache)' if built.cached else ''}: {built.refusal}"
    return f"environment ({built.what}): {how}"


class IsolationProgress:
    """Each step as it ends (plain lines, also in CI logs); a spinner on a terminal while a launch runs."""

    def __init__(self, console: Console, factors: int):
        self.console, self.factors = console, factors
        self.lock = threading.Lock()
        self.spinner: Spinner | None = None
        self.running: dict[str, str] = {}
        self.helpers = HelperLine(console)

    def on_open(self, run_dir: RunDir, planned: Sequence[PlannedAttempt], done: Sequence[AttemptRecord] = ()) -> None:
        self.console.print(f"run directory: {run_dir.path}", markup=False, highlight=False, soft_wrap=True)
        if self.console.is_terminal:
            self.spinner = self.console.status("launching")
            self.spinner.start()

    def on_helpers(self, what: str, pending: Sequence[str], elapsed_s: float, limit_s: float) -> None:
        self.helpers.tell(what, pending, elapsed_s, limit_s)

    def on_wait(self, item: PlannedAttempt, slot: Slot, why: str) -> None:
        self._running(item.name, why)

    def on_start(self, item: PlannedAttempt, slot: Slot) -> None:
        self._running(item.name, "launching")

    def on_phase(self, item: PlannedAttempt, phase: str) -> None:
        self._running(item.name, phase)

    def on_done(self, item: PlannedAttempt, record: AttemptRecord) -> None:
        with self.lock:
            self.running.pop(item.name, None)

    def on_step(self, step: Step) -> None:
        line = Text(f"{applied_text(step, self.factors)}: ")
        line.append(outcomes_text(step), style=OUTCOME_STYLE.get(step.outcome.value, ""))
        line.append(" -> ")
        line.append(result_text(step), style=RESULT_STYLE[step.result])
        with self.lock:
            self.console.print(line)

    def _running(self, name: str, what: str) -> None:
        with self.lock:
            self.running[name] = what
            if self.spinner is not None:
                self.spinner.update(", ".join(f"{n}: {w}" for n, w in self.running.items()))

    def close(self) -> None:
        if self.spinner is not None:
            self.spinner.stop()
            self.spinner = None
