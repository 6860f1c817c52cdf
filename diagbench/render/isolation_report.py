"""An isolation in the run reports: Markdown and HTML sections that lead with its answer
(status, target, culprit), its factors good -> bad and its steps, above the attempts every run
shows (render/reports.py puts them there)."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from diagbench import safetext
from diagbench.isolate.factors import Factor
from diagbench.isolate.record import Isolation, Step
from diagbench.isolate.search import Result
from diagbench.judge.view import RunView
from diagbench.records.manifest import PlannedEntry
from diagbench.render.htmlkit import Html, breakable, el
from diagbench.render.isolation import answer, applied_text, deciding, outcomes_text, result_text

__all__ = ["isolation_html", "isolation_markdown", "probes_as_plan"]

_BADGE = {Result.FAIL: "v-refuted", Result.PASS: "v-supported", Result.UNRESOLVED: "v-inconclusive"}
_LINE_CLASS = {"bold red": "regression", "bold yellow": "warning", "dim": "same"}


def probes_as_plan(view: RunView) -> RunView:
    """An isolation plans nothing ahead (each probe follows from the last): its plan is what
    it launched, so the reports count, complete and draw its probes like a matrix's cells."""
    if view.planned:
        return view
    planned = [PlannedEntry(r.attempt, r.cell_id, r.repeat, dict(r.params)) for r in view.records]
    return dataclasses.replace(view, planned=planned)


# -- Markdown ---------------------------------------------------------------------------


_md = safetext.markdown


def isolation_markdown(isolation: Isolation) -> str:
    """The isolation's section of `report --format md`, above the run's own."""
    return "\n".join(_markdown(isolation))


def _markdown(isolation: Isolation) -> list[str]:
    out = [f"### Isolation: {isolation.status.value}", ""]
    out += [f"- **{_md(line)}**" if style.startswith("bold") else f"- {_md(line)}" for line, style in answer(isolation)]
    out += ["", "| factor | kind | good | bad |", "|---|---|---|---|"]
    out += [
        f"| `{safetext.markdown_code(f.name)}` | {f.kind.value} | {_md(f.label(False))} | {_md(f.label(True))} |"
        for f in isolation.factors
    ]
    out += ["", "| # | applied | outcome | result | deciding line |", "|---|---|---|---|---|"]
    for number, step in enumerate(isolation.steps, start=1):
        cells = (applied_text(step, len(isolation.factors)), outcomes_text(step), result_text(step), deciding(step))
        out.append(f"| {number} | " + " | ".join(_md(c) for c in cells) + " |")
    out.append("")
    out += [f"{side}: `{safetext.markdown_code(command)}`  " for side, command in (isolation.commands or {}).items()]
    return out


# -- HTML -------------------------------------------------------------------------------


def isolation_html(isolation: Isolation) -> Html:
    """The isolation's section, leading `report --format html` and an isolation's report.html."""
    lines = [el("p", {"class": _LINE_CLASS.get(style)}, line) for line, style in answer(isolation)]
    commands = [
        (el("dt", None, side), el("dd", None, el("code", None, c))) for side, c in (isolation.commands or {}).items()
    ]
    return el(
        "section",
        {"id": "isolation"},
        el("h2", None, f"Isolation: {isolation.status.value}"),
        lines,
        el("h3", None, "Factors: good → bad"),
        _factors(isolation.factors),
        el("h3", None, "Steps: the good launch with these factors applied"),
        _steps(isolation),
        commands and el("dl", {"class": "facts"}, commands),
    )


def _factors(factors: Sequence[Factor]) -> Html:
    head = el("tr", None, [el("th", None, h) for h in ("factor", "kind", "good", "bad")])
    rows = [
        el(
            "tr",
            None,
            el("td", None, el("code", None, f.name)),
            el("td", None, f.kind.value),
            el("td", None, f.label(False)),
            el("td", None, f.label(True)),
        )
        for f in factors
    ]
    return el("table", {"class": "verdicts factors"}, el("thead", None, head), el("tbody", None, rows))


def _steps(isolation: Isolation) -> Html:
    head = el("tr", None, [el("th", None, h) for h in ("#", "applied", "outcome", "result", "deciding line")])
    rows = [_step_row(number, step, len(isolation.factors)) for number, step in enumerate(isolation.steps, start=1)]
    return el("table", {"class": "verdicts steps"}, el("thead", None, head), el("tbody", None, rows))


def _step_row(number: int, step: Step, factors: int) -> Html:
    outcome = el("span", {"class": f"label o-{step.outcome.value}"}, breakable(outcomes_text(step), ":"))
    linked = el("a", {"href": f"#a-{step.attempts[0]}"}, outcome) if step.attempts else outcome
    return el(
        "tr",
        None,
        el("td", None, str(number)),
        el("td", None, breakable(applied_text(step, factors), " + ")),
        el("td", None, linked),
        el("td", None, el("span", {"class": f"badge {_BADGE[step.result]}"}, result_text(step))),
        el("td", {"class": "why"}, el("code", None, deciding(step))),
    )
