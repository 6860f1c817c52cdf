"""A triage for people: each launch as it ends, the table "comes up with / costs", the
recommended change, its diff and its command line; the remedies list; Markdown and HTML."""

from __future__ import annotations

import json
import threading
from collections.abc import Sequence

from rich.console import Console, Group, RenderableType
from rich.text import Text

from diagbench.execute.events import QuietEvents
from diagbench.records.parts import Price
from diagbench.records.record import AttemptRecord
from diagbench.records.store import RunDir
from diagbench.render.fit import Column, fit
from diagbench.render.formats import Rendering, Shown
from diagbench.render.htmlkit import Html, el
from diagbench.render.report import OUTCOME_STYLE
from diagbench.render.text import visible
from diagbench.spec.plan import PlannedAttempt
from diagbench.triage.record import Status, Triage, Tried
from diagbench.triage.remedies import Remedy
from diagbench.vocab import TextOrJson, assert_never, outcome_label

__all__ = [
    "TriageProgress",
    "price_text",
    "remedies_as",
    "remedies_json",
    "render_remedies",
    "render_triage",
    "triage_as",
    "triage_markdown",
    "triage_section_html",
]

_HEADLINE = {
    Status.COMES_UP: "the command comes up as it is",
    Status.FOUND: "a launch that works",
    Status.NONE_WORKED: "no remedy made it come up",
    Status.NO_REMEDY: "no remedy known for this failure",
    Status.INTERRUPTED: "interrupted",
}


class TriageProgress(QuietEvents):
    """Each launch as it ends (plain lines, also in CI logs)."""

    def __init__(self, console: Console):
        self.console = console
        self.lock = threading.Lock()

    def on_open(self, run_dir: RunDir, planned: Sequence[PlannedAttempt], done: Sequence[AttemptRecord] = ()) -> None:
        self.console.print(f"run directory: {run_dir.path}", markup=False, highlight=False)

    def on_done(self, item: PlannedAttempt, record: AttemptRecord) -> None:
        what = "the command" if record.cell_id == "none" else record.cell_id
        line = Text(f"{what}: ")
        line.append(record.label, style=OUTCOME_STYLE.get(record.outcome.value, ""))
        if record.time_to_outcome_s is not None and record.outcome.ran:
            line.append(f" after {record.time_to_outcome_s:.1f}s")
        if record.price:
            line.append(f" ({price_text(record.price)})", style="dim")
        elif not record.outcome.ran and record.reason:
            line.append(f" ({record.reason})", style="dim")
        with self.lock:
            self.console.print(line)

    def close(self) -> None:
        return None


def price_text(price: Price | None) -> str:
    """`439 tok/s, p50 34.2 ms` (requests/s where the answers count no tokens), and failures if any."""
    if not price:
        return ""
    parts = []
    if price.tokens_per_s:
        parts.append(f"{price.tokens_per_s:.0f} tok/s")
    elif price.throughput_rps:
        parts.append(f"{price.throughput_rps:.1f} req/s")
    if price.latency_p50_s is not None:
        parts.append(f"p50 {price.latency_p50_s * 1000:.1f} ms")
    if price.failed:
        parts.append(f"{price.failed} of {price.requests} failed")
    return ", ".join(parts)


def _outcome(t: Tried) -> str:
    if t.outcome is None:
        return f"not run ({t.skipped})" if t.skipped else "not run"
    label = outcome_label(t.outcome, t.failure_class)
    return label if len(set(t.outcomes)) <= 1 else f"{label} (flaky: {', '.join(t.outcomes)})"


def triage_as(triage: Triage, format: TextOrJson, width: int | None = None) -> Rendering:
    """What `triage` prints at its end: the table (fitted to `width`) and the recommendation, or
    triage.json (`--json`)."""
    match format:
        case TextOrJson.TEXT:
            return Shown(render_triage(triage, width))
        case TextOrJson.JSON:
            return json.dumps(triage.to_json(), indent=2) + "\n"
        case _:
            assert_never(format)


def render_triage(triage: Triage, width: int | None = None) -> RenderableType:
    parts: list[RenderableType] = [Text(f"triage: {_HEADLINE[triage.status]}", style="bold")]
    if triage.target:
        target = triage.target
        label = target.label
        where = f" ({triage.server})" if triage.server else ""
        parts.append(Text(f"the command{where}: {label}"))
        if target.evidence:
            line = f"  L{target.evidence.line_no}: {visible(target.evidence.text)}"
            parts.append(Text(line, style="dim", no_wrap=True, overflow="ellipsis"))  # a line of the log: one line
    if triage.remedies:
        parts += [_table(triage.remedies, triage.server, width), *_given_up(triage.remedies)]
    parts += [Text(f"note: {note}", style="dim") for note in triage.notes]
    rec = triage.recommendation
    if rec is not None:
        parts.append(Text(f"recommended: {rec.remedy} ({rec.why})", style="bold green"))
        parts.extend(Text(f"  {line}") for line in rec.changes)
        parts.append(Text(f"command: {rec.command}"))
    return Group(*parts)


def _table(tried: Sequence[Tried], server: str | None, width: int | None) -> RenderableType:
    """One row per launch, fitted to `width` (render/fit.py); remedy ids without their server's
    prefix (the title names it)."""
    prefix = f"{server}." if server else "\0"
    title = f"comes up with / costs ({server} remedies)" if server else "comes up with / costs"
    styles = [OUTCOME_STYLE.get(t.outcome.value if t.outcome else "", "") for t in tried]
    columns = [
        Column("remedy", [Text(t.id.replace(prefix, "")) for t in tried]),  # what a reader copies stays whole
        Column("outcome", [Text(_outcome(t), style=style) for t, style in zip(tried, styles, strict=True)]),
        Column("start-up", [Text(f"{t.startup_s:.1f}s" if t.startup_s is not None else "") for t in tried], drop=1),
        Column("price", [Text(price_text(t.price)) for t in tried]),
        Column("change", [Text("; ".join(t.change)) for t in tried], flex=True),
    ]
    return fit(title, columns, width)


def _given_up(tried: Sequence[Tried]) -> list[Text]:
    """What each launch that came up gives up, under the table (too long for a column)."""
    return [Text(f"  {t.id} gives up: {t.gives_up}", style="dim") for t in tried if t.works and t.gives_up]


# -- the remedies list ------------------------------------------------------------------


def remedies_as(remedies: Sequence[Remedy], format: TextOrJson) -> Rendering:
    """`remedies`: one block per remedy, or one JSON list (`--json`)."""
    match format:
        case TextOrJson.TEXT:
            return Shown(render_remedies(remedies))
        case TextOrJson.JSON:
            return remedies_json(remedies)
        case _:
            assert_never(format)


def render_remedies(remedies: Sequence[Remedy]) -> RenderableType:
    """One block per remedy (its source is a sentence: too long for a table's column)."""
    parts: list[RenderableType] = [Text(f"{len(remedies)} remedies", style="bold")]
    for r in remedies:
        parts.append(Text(f"{r.id}  (cost {r.cost}; for {', '.join(r.when)})", style="bold"))
        for i, line in enumerate(r.change.describe()):
            parts.append(Text(f"  {'change:  ' if i == 0 else '         '} {line}"))
        if r.gives_up:
            parts.append(Text(f"  gives up: {r.gives_up}"))
        parts.append(Text(f"  source:   {r.source}", style="dim"))
    return Group(*parts)


def remedies_json(remedies: Sequence[Remedy]) -> str:
    rows = [
        {"id": r.id, "server": r.server, "for": list(r.when), "change": r.change.to_json(), "cost": r.cost}
        | {"gives_up": r.gives_up, "source": r.source, "origin": r.origin}
        for r in remedies
    ]
    return json.dumps(rows, indent=2) + "\n"


# -- reports ----------------------------------------------------------------------------


def _md(text: str) -> str:
    return visible(text).replace("|", "\\|").replace("\n", " ")


def triage_markdown(triage: Triage) -> str:
    out = [f"### Triage: {_HEADLINE[triage.status]}", "", f"Command: `{triage.command}`", ""]
    if triage.target:
        t = triage.target
        out.append(f"It ended **{t.label}**" + (f" (server: {triage.server})" if triage.server else "") + ".")
        if t.evidence:
            out += ["", f"> L{t.evidence.line_no}: {_md(t.evidence.text)}"]
        out.append("")
    if triage.reason:
        out += [triage.reason, ""]
    if triage.remedies:
        out += ["| remedy | change | outcome | start-up | price | gives up |", "|---|---|---|---|---|---|"]
        for r in triage.remedies:
            startup = f"{r.startup_s:.1f}s" if r.startup_s is not None else ""
            change = "<br>".join(f"`{_md(c)}`" for c in r.change)
            row = [f"`{r.id}`", change, _md(_outcome(r)), startup, _md(price_text(r.price)), _md(r.gives_up)]
            out.append("| " + " | ".join(row) + " |")
        out.append("")
    if triage.recommendation:
        rec = triage.recommendation
        out += [f"**Recommended: `{rec.remedy}`** ({_md(rec.why)})", "", "```diff"]
        out += [line.replace("~ ", "! ", 1) for line in rec.changes]
        out += ["```", "", "```sh", rec.command, "```"]
    return "\n".join(out)


def triage_section_html(triage: Triage) -> Html:
    """The triage's section, leading `report --format html` and a triage's report.html."""
    columns = ("remedy", "change", "outcome", "start-up", "price", "gives up")
    rows = [el("tr", None, *[el("td", None, cell) for cell in _cells(r)]) for r in triage.remedies]
    head = el("tr", None, *[el("th", None, c) for c in columns])
    parts: list[Html] = [
        el("h2", None, f"Triage: {_HEADLINE[triage.status]}"),
        el("p", None, "Command: ", el("code", None, triage.command)),
    ]
    if triage.reason:
        parts.append(el("p", None, triage.reason))
    if rows:
        parts.append(el("table", None, head, *rows))
    if triage.recommendation:
        rec = triage.recommendation
        parts.append(el("p", None, el("strong", None, f"Recommended: {rec.remedy}"), f" ({rec.why})"))
        parts.append(el("pre", None, "\n".join([*rec.changes, "", rec.command])))
    return el("section", {"class": "triage"}, *parts)


def _cells(r: Tried) -> tuple[str, ...]:
    startup = f"{r.startup_s:.1f}s" if r.startup_s is not None else ""
    return (r.id, "\n".join(r.change), _outcome(r), startup, price_text(r.price), r.gives_up)
