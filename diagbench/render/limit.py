"""A limit for people: each value as its launches end, the answer (the limit, the value past it
and how that one failed, monotone or not), and every value launched; Markdown, JSON and HTML."""

from __future__ import annotations

import json

from rich.console import Group, RenderableType
from rich.text import Text

from diagbench import safetext
from diagbench.limit.record import Limit, Status, Step
from diagbench.render.fit import Column, fit
from diagbench.render.formats import Rendering, Shown
from diagbench.render.htmlkit import Html, el
from diagbench.render.report import OUTCOME_STYLE
from diagbench.render.triage import TriageProgress, price_text
from diagbench.vocab import TextOrJson, assert_never, outcome_label

__all__ = ["LimitProgress", "answer", "limit_as", "limit_markdown", "limit_section_html", "render_limit"]

_HEADLINE = {
    Status.FOUND: "found",
    Status.NONE_UP: "nothing in the range came up",
    Status.UNRESOLVED: "stopped: a launch decided nothing",
    Status.INTERRUPTED: "interrupted",
    Status.WRITE_FAILED: "stopped: a record could not be written",
}
_VERDICT = {
    "ok": "comes up",
    "bad": "past the limit",
    "flaky": "flaky: past the limit",
    "unresolved": "decided nothing",
}
_VERDICT_STYLE = {"ok": "green", "bad": "red", "flaky": "yellow", "unresolved": "yellow"}


class LimitProgress(TriageProgress):
    """Each value as its launches end (plain lines, also in CI logs), and each value's verdict
    where it took more than one launch."""

    def on_step(self, step: Step) -> None:
        if len(step.outcomes) > 1 or step.role.value == "check":
            what = " (a check of the search)" if step.role.value == "check" else ""
            with self.lock:
                self.console.print(Text(f"{step.value}: {_VERDICT[step.verdict]}{what}", style="dim"))


def _label(step: Step | None) -> str:
    if step is None:
        return ""
    return outcome_label(step.outcome, step.failure_class)


def answer(limit: Limit) -> list[tuple[str, str]]:
    """The answer in lines, each with its style: the limit, the value past it, monotone or not."""
    word, name = ("smallest" if limit.smallest else "largest"), limit.option
    out = [(f"limit: {_HEADLINE[limit.status]}", "bold")]
    if limit.limit is not None:
        out.append((f"{word} {name} that comes up: {limit.limit}", "bold green"))
    if limit.beyond is not None:
        past = limit.step(limit.beyond)
        line = f"  {limit.beyond} does not: {_label(past)}"
        if past and past.line:
            line += f" ({'L' + str(past.line_no) + ': ' if past.line_no else ''}{safetext.one_line(past.line)[:200]})"
        out.append((line, ""))
    if limit.monotone is False:
        out.append((f"not monotone: {limit.against} is on the wrong side of the limit (see the notes)", "bold yellow"))
    elif limit.monotone is True:
        checked = [s.value for s in limit.steps if s.role.value == "check"]
        out.append(
            (
                f"monotone (checked at {', '.join(map(str, checked))})"
                if checked
                else "monotone (every value launched)",
                "dim",
            )
        )
    out.append(
        (f"{limit.launches} launches of {limit.budget} at most (ceil(log2(HI - LO)) + 2, x{limit.repeat})", "dim")
    )
    step = limit.step(limit.limit)
    if step and step.price:
        out.append((f"at {limit.limit}: {price_text(step.price)}", ""))
    if limit.reason:
        out.append((limit.reason, "yellow"))
    return out


def render_limit(limit: Limit, width: int | None = None) -> RenderableType:
    """The answer, then every value launched (fitted to `width`), the notes and the command."""
    parts: list[RenderableType] = [Text(line, style=style) for line, style in answer(limit)]
    if limit.steps:
        parts.append(_table(limit, width))
    parts += [Text(f"note: {safetext.one_line(note)}", style="dim") for note in limit.notes]
    parts.append(Text(f"command: {safetext.one_line(limit.command)}"))
    return Group(*parts)


def _table(limit: Limit, width: int | None) -> RenderableType:
    steps = sorted(limit.steps, key=lambda s: s.value)
    cells = [_cells(s) for s in steps]
    columns = [
        Column("value", [Text(c[0]) for c in cells]),
        Column(
            "outcome",
            [Text(c[1], style=OUTCOME_STYLE.get(s.outcome.value, "")) for c, s in zip(cells, steps, strict=True)],
        ),
        Column(
            "verdict", [Text(c[2], style=_VERDICT_STYLE.get(s.verdict, "")) for c, s in zip(cells, steps, strict=True)]
        ),
        Column("start-up", [Text(c[3]) for c in cells], drop=1),
        Column(
            "deciding line / price", [Text(safetext.one_line(c[4]), style="dim") for c in cells], flex=True, lines=1
        ),
    ]
    return fit(f"{limit.option} from {limit.lo} to {limit.hi}", columns, width)


def _cells(step: Step) -> tuple[str, str, str, str, str]:
    outcomes = set(step.outcomes)
    outcome = _label(step) if len(outcomes) <= 1 else f"{_label(step)} ({', '.join(step.outcomes)})"
    verdict = _VERDICT[step.verdict] + (" (check)" if step.role.value == "check" else "")
    startup = f"{step.startup_s:.1f}s" if step.startup_s is not None else ""
    detail = price_text(step.price) if step.price else (step.line or "")
    return str(step.value), outcome, verdict, startup, detail


# -- reports ----------------------------------------------------------------------------


def limit_as(limit: Limit, format: TextOrJson, width: int | None = None) -> Rendering:
    """What `limit` prints at its end: the answer and the values, or limit.json (`--json`)."""
    match format:
        case TextOrJson.TEXT:
            return Shown(render_limit(limit, width))
        case TextOrJson.JSON:
            return json.dumps(limit.to_json(), indent=2) + "\n"
        case _:
            assert_never(format)


def limit_markdown(limit: Limit) -> str:
    """The limit's section, leading `report --format md`."""
    md = safetext.markdown
    out = [f"### Limit: {md(_HEADLINE[limit.status])}", ""]
    out += [
        f"- **{md(line.strip())}**" if style.startswith("bold") else f"- {md(line.strip())}"
        for line, style in answer(limit)[1:]
    ]
    out += ["", "| value | outcome | verdict | start-up | deciding line / price |", "|---|---|---|---|---|"]
    for step in sorted(limit.steps, key=lambda s: s.value):
        out.append("| " + " | ".join(md(c) for c in _cells(step)) + " |")
    out += ["", *(f"- note: {md(n)}" for n in limit.notes), "", f"command: `{safetext.markdown_code(limit.command)}`"]
    return "\n".join(out)


def limit_section_html(limit: Limit) -> Html:
    """The limit's section, leading `report --format html` and a limit's report.html."""
    head = el(
        "tr", None, *[el("th", None, c) for c in ("value", "outcome", "verdict", "start-up", "deciding line / price")]
    )
    rows = [el("tr", None, *[el("td", None, c) for c in _cells(s)]) for s in sorted(limit.steps, key=lambda s: s.value)]
    lines = [
        el("p", {"class": "regression" if "yellow" in style else None}, line.strip()) for line, style in answer(limit)
    ]
    notes = [el("p", {"class": "same"}, f"note: {n}") for n in limit.notes]
    return el(
        "section",
        {"id": "limit"},
        el("h2", None, f"Limit: {_HEADLINE[limit.status]}"),
        lines,
        el("table", None, head, *rows),
        notes,
        el("p", None, "command: ", el("code", None, limit.command)),
    )
