"""A debug run for people: each launch as it ends, the settings launched (with their sources),
what each launch said and the sharper line; Markdown (for reports and the issue report),
JSON and HTML."""

from __future__ import annotations

import dataclasses
import json

from rich.console import Console, Group, RenderableType
from rich.text import Text

from diagbench import safetext
from diagbench.debug.record import Debug, Seen, Setting, Status
from diagbench.records.record import AttemptRecord
from diagbench.render.formats import Rendering, Shown
from diagbench.render.htmlkit import Html, el
from diagbench.render.triage import TriageProgress
from diagbench.spec.plan import PlannedAttempt
from diagbench.vocab import TextOrJson, assert_never

__all__ = ["DebugProgress", "debug_as", "debug_issue_section", "debug_markdown", "debug_section_html", "render_debug"]

_HEADLINE = {
    Status.SHARPER: "the debug launch says more",
    Status.SAME: "the debug launch says nothing more",
    Status.UNDECIDED: "the debug launch decided no failure line",
    Status.COMES_UP: "the command comes up as it is",
    Status.NO_SETTINGS: "no debug setting known for this failure",
    Status.INTERRUPTED: "interrupted",
    Status.WRITE_FAILED: "stopped: a record could not be written",
}


class DebugProgress(TriageProgress):
    """Each launch as it ends: the command, then the debug launch."""

    def __init__(self, console: Console):
        super().__init__(console)

    def on_done(self, item: PlannedAttempt, record: AttemptRecord) -> None:
        if record.cell_id == "debug":  # the debug launch, in words
            record = dataclasses.replace(record, cell_id="with the debug settings")
        super().on_done(item, record)


def _seen(name: str, seen: Seen | None) -> list[tuple[str, str]]:
    if seen is None:
        return []
    out = [(f"{name}: {seen.label}", "bold" if name == "the command" else "")]
    if seen.line:
        where = f"L{seen.line_no}: " if seen.line_no else ""
        out.append((f"  {where}{safetext.one_line(seen.line)[:300]}", "dim"))
    cause = seen.cause
    if cause is not None and cause.message and cause.line_no != seen.line_no:  # the cause is another line
        at = f" (L{cause.line_no})" if cause.line_no else ""
        said = f"  cause{at}: {safetext.one_line(cause.type)}: " + safetext.one_line(cause.message)[:300]
        out.append((said, "dim"))
    return out


def lines(found: Debug) -> list[tuple[str, str]]:
    """The debug run in lines, each with its style."""
    out = [(f"debug: {_HEADLINE[found.status]}", "bold")]
    out += _seen("the command", found.before)
    if found.settings:
        out.append(
            (f"debug settings for {found.failure_class}" + (f" ({found.server})" if found.server else ""), "bold")
        )
        for setting in found.settings:
            out.append((f"  {setting.change}  [{setting.set}]", ""))
        out += [(f"    {s.set}: {s.why}", "dim") for s in _firsts(found) if s.why]
    out += _seen("with them", found.after)
    if found.sharper:
        sharp = found.sharper
        out.append((f"sharper: L{sharp.line_no}: {safetext.one_line(sharp.text)[:300]}", "bold green"))
        out.append((f"  {safetext.one_line(sharp.why)}", "dim"))
    if found.reason:
        out.append((safetext.one_line(found.reason), "yellow"))
    return out


def _firsts(found: Debug) -> list[Setting]:
    """One setting per set (a set's why is said once)."""
    seen: dict[str, Setting] = {}
    for s in found.settings:
        seen.setdefault(s.set, s)
    return list(seen.values())


def render_debug(found: Debug) -> RenderableType:
    parts: list[RenderableType] = [Text(line, style=style) for line, style in lines(found)]
    parts += [Text(f"note: {safetext.one_line(note)}", style="dim") for note in found.notes]
    if found.debug_command:
        parts.append(Text(f"debug command: {safetext.one_line(found.debug_command)}"))
    return Group(*parts)


def debug_issue_section(found: Debug) -> list[str]:
    """`### With debugging on`: for `report --format issue` (Markdown lines)."""
    md = safetext.markdown
    out = ["### With debugging on", ""]
    if not found.settings:
        return [*out, md(found.reason or _HEADLINE[found.status]), ""]
    out += ["| setting | what it shows |", "|---|---|"]
    out += [f"| `{safetext.markdown_code(s.change)}` | {md(s.why)} |" for s in found.settings]
    out.append("")
    for name, seen in (("Without them", found.before), ("With them", found.after)):
        if seen is not None:
            line = f": `{safetext.markdown_code(seen.line[:300])}`" if seen.line else ""
            out.append(f"- {name}: **{md(seen.label)}**{line}")
    if found.sharper:
        text = safetext.markdown_code(found.sharper.text[:300])
        out.append(f"- The sharper line (L{found.sharper.line_no}): `{text}` ({md(found.sharper.why)})")
    elif found.reason:
        out.append(f"- {md(found.reason)}")
    if found.debug_command:
        out += ["", *safetext.fence([found.debug_command], "sh")]  # no backtick run in it closes the block
    return [*out, ""]


def debug_as(found: Debug, format: TextOrJson) -> Rendering:
    """What `debug` prints at its end: the two launches and the sharper line, or debug.json (`--json`)."""
    match format:
        case TextOrJson.TEXT:
            return Shown(render_debug(found))
        case TextOrJson.JSON:
            return json.dumps(found.to_json(), indent=2) + "\n"
        case _:
            assert_never(format)


def debug_markdown(found: Debug) -> str:
    """The debug run's section, leading `report --format md` (a triage's, below its own)."""
    md = safetext.markdown
    head = [f"### Debug: {md(_HEADLINE[found.status])}", "", f"Command: `{safetext.markdown_code(found.command)}`", ""]
    body = debug_issue_section(found)[2:]
    sources = [f"| `{safetext.markdown_code(s.change)}` | {md(s.source)} |" for s in found.settings]
    body += ["| setting | source |", "|---|---|", *sources, ""] if sources else []
    return "\n".join([*head, *body, *(f"- note: {md(n)}" for n in found.notes)])


def debug_section_html(found: Debug) -> Html:
    """The debug run's section, leading `report --format html` and a debug run's report.html."""
    rows = [
        el("tr", None, el("td", None, el("code", None, s.change)), el("td", None, s.why), el("td", None, s.source))
        for s in found.settings
    ]
    head = el("tr", None, *[el("th", None, c) for c in ("setting", "why", "source")])
    return el(
        "section",
        {"id": "debug"},
        el("h2", None, f"Debug: {_HEADLINE[found.status]}"),
        [el("p", {"class": "regression" if "green" in style else None}, line.strip()) for line, style in lines(found)],
        rows and el("table", None, head, *rows),
        [el("p", {"class": "same"}, f"note: {n}") for n in found.notes],
        found.debug_command and el("p", None, "debug command: ", el("code", None, found.debug_command)),
    )
