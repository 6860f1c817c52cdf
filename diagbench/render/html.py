"""`report --format html` (and `report.html` in every run directory): one self-contained page.

Hypotheses and verdicts, the matrix as a grid coloured by outcome, a timeline per attempt
(launch to decision, split into its phases, then teardown), each opening onto its deciding
line with the log lines around it, and the run's host and hash facts.
"""

from __future__ import annotations

import shlex
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

from diagbench.jsonvalue import as_list, as_object
from diagbench.judge.verdicts import Verdict
from diagbench.judge.view import RunView
from diagbench.logs.classify import context
from diagbench.records.record import AttemptRecord
from diagbench.render.grid import Grid, GridCell, build_grid, spans
from diagbench.render.hangs import hangs_html, outcome_words
from diagbench.render.htmlkit import Html, breakable, code_spans, el, page
from diagbench.render.timeline import Scale, bar, lanes, scale_for
from diagbench.safefiles import open_regular
from diagbench.vocab import Outcome

__all__ = ["CONTEXT_AFTER", "CONTEXT_BEFORE", "LINE_CHARS", "TAIL_LINES", "render_html"]

CONTEXT_BEFORE, CONTEXT_AFTER = 5, 1
TAIL_LINES = 8
LINE_CHARS = 240  # a megabyte line must not make a megabyte page


def render_html(view: RunView, sections: Sequence[Html] = ()) -> str:
    """The whole report, as one HTML document; `sections` (an isolation's) go first, under the heading."""
    return page(
        f"diagbench: {view.spec_name}",
        _heading(view),
        sections,
        _hypotheses(view),
        _matrix(build_grid(view.planned, view.records)),
        _timeline(view),
        hangs_html(view),
        _facts(view),
    )


# -- heading and facts ------------------------------------------------------------------


def _heading(view: RunView) -> Html:
    counts = Counter(r.outcome.value for r in view.records)
    state = "complete" if view.complete else "partial: some attempts have no outcome"
    summary = ", ".join(f"{n} {word}" for word, n in counts.most_common())
    return el(
        "header",
        None,
        el("h1", None, view.spec_name),
        view.description and el("p", {"class": "description"}, view.description.strip()),
        el(
            "p",
            {"class": "summary"},
            el("code", None, view.run_id),
            f" · {len(view.records)} of {len(view.planned)} attempt(s) recorded ({summary or 'none'}) · {state}",
        ),
    )


def _facts(view: RunView) -> Html:
    p = view.provenance
    found = filter(None, map(as_object, as_list(p.get("gpus"))))
    gpus = ", ".join(f"{g.get('name')} (driver {g.get('driver')})" for g in found) or "none found"
    packages = [f"{k} {v}" for k, v in (as_object(p.get("packages")) or {}).items() if v]
    argv = [str(a) for a in as_list(p.get("argv"))]
    hashes = "matches" if view.hashes_match else "DOES NOT match: the manifest was edited after the run"
    rows = [
        ("host", f"{p.get('hostname', '-')} · {p.get('os', '-')} · {p.get('cpus', '-')} CPUs"),
        ("GPUs", gpus),
        ("software", " · ".join([f"Python {p.get('python', '-')}", *packages, f"diagbench {p.get('diagbench', '-')}"])),
        ("git", str(p.get("git_sha") or "-")),
        ("command", shlex.join(["diagbench", *argv[1:]]) if argv else "-"),
        ("started", view.created_at or "-"),
        ("spec sha256", view.spec_sha256 or "-"),
    ]
    if view.verdicts:
        rows.append(("hypotheses sha256", f"{view.hypotheses_sha256} ({hashes})"))
    return el(
        "section",
        {"id": "facts"},
        el("h2", None, "Where it ran"),
        el("dl", {"class": "facts"}, [(el("dt", None, k), el("dd", None, v)) for k, v in rows]),
    )


# -- hypotheses -------------------------------------------------------------------------


def _hypotheses(view: RunView) -> Html | None:
    if not view.verdicts and not view.violations:
        return None
    head = el("tr", None, [el("th", None, h) for h in ("hypothesis", "verdict", "deciding line", "meaning")])
    table = el(
        "table", {"class": "verdicts"}, el("thead", None, head), el("tbody", None, map(_verdict_row, view.verdicts))
    )
    violations = [
        el(
            "li",
            {"class": "violation"},
            f"expect #{x.expectation + 1} violated: ",
            _attempt_link(x.attempt, x.cell_id),
            f" wanted {x.wanted}, got {x.got}",
        )
        for x in view.violations
    ]
    return el(
        "section",
        {"id": "hypotheses"},
        el("h2", None, "Hypotheses (judged against the copy registered before the run)"),
        table if view.verdicts else None,
        violations and el("ul", {"class": "violations"}, violations),
    )


def _verdict_row(v: Verdict) -> Html:
    ev = v.evidence
    line = (
        [_attempt_link(ev.attempt, ev.cell_id), f" L{ev.line_no}: ", el("code", None, _clip(ev.text))]
        if ev
        else [v.reason]
    )
    return el(
        "tr",
        {"class": f"verdict v-{v.verdict.value}"},
        el("td", None, el("strong", None, v.id), el("div", {"class": "claim"}, *code_spans(v.claim))),
        el(
            "td",
            None,
            el("span", {"class": f"badge v-{v.verdict.value}"}, v.verdict.value),
            v.flaky and el("div", {"class": "flaky"}, f"flaky: {v.flaky}"),
        ),
        el("td", {"class": "why"}, line),
        el("td", None, *code_spans(v.meaning or "")),
    )


def _attempt_link(attempt: str | None, label: str) -> Html:
    return el("a", {"href": f"#a-{attempt}"}, label) if attempt else el("span", None, label)


# -- the matrix -------------------------------------------------------------------------


def _matrix(grid: Grid) -> Html:
    head = []
    for level, axis in enumerate(grid.col_axes):
        corner = [el("th", {"class": "axis"}, a if level == len(grid.col_axes) - 1 else "") for a in grid.row_axes]
        head.append(
            el(
                "tr",
                None,
                corner,
                [el("th", {"colspan": n, "class": "col"}, f"{axis}={label}") for label, n in spans(grid.cols, level)],
            )
        )
    if not grid.col_axes:
        head.append(el("tr", None, [el("th", {"class": "axis"}, a) for a in grid.row_axes], el("th", None, "outcome")))
    body = []
    starts = [{i for i, _ in _run_starts(grid.rows, level)} for level in range(len(grid.row_axes))]
    runs = [dict(_run_starts(grid.rows, level)) for level in range(len(grid.row_axes))]
    for i, row in enumerate(grid.rows):
        headers = [
            el("th", {"rowspan": runs[level][i], "class": "row"}, row[level])
            for level in range(len(grid.row_axes))
            if i in starts[level]
        ]
        cells = [_grid_cell(grid.cells.get((row, col))) for col in (grid.cols or [()])]
        body.append(el("tr", None, headers, cells))
    return el(
        "section",
        {"id": "matrix"},
        el("h2", None, "Matrix"),
        grid.constants
        and el("p", {"class": "constant"}, "in every cell: " + ", ".join(f"{a}={v}" for a, v in grid.constants)),
        el("table", {"class": "grid"}, el("thead", None, head), el("tbody", None, body)),
        _legend(),
    )


def _run_starts(rows: Sequence[tuple[str, ...]], level: int) -> list[tuple[int, int]]:
    """(index where a header run starts, its length) for row headers at `level`."""
    out, i = [], 0
    for _, n in spans(rows, level):
        out.append((i, n))
        i += n
    return out


def _grid_cell(cell: GridCell | None) -> Html:
    if cell is None:
        return el("td", {"class": "cell absent", "title": "not in this run"}, "·")
    total = len(cell.attempts)
    if not cell.recorded:
        return el("td", {"class": "cell pending", "title": cell.cell_id}, "no record")
    lines = [el("div", None, label if total == 1 else f"{label} {n}/{total}") for label, n in cell.counts]
    link = el("a", {"href": f"#a-{cell.attempts[0]}", "title": cell.cell_id}, lines)
    return el("td", {"class": f"cell o-{cell.outcomes[0][0]}", "style": _stripes(cell)}, link)


def _stripes(cell: GridCell) -> str | None:
    """Mixed repeats: the cell is striped in proportion to its outcomes."""
    if len(cell.outcomes) < 2:
        return None
    stops, at = [], 0.0
    for word, n in cell.outcomes:
        end = at + 100 * n / cell.recorded
        stops.append(f"var(--{word}) {at:.1f}% {end:.1f}%")
        at = end
    return f"background: linear-gradient(90deg, {', '.join(stops)})"


def _legend() -> Html:
    return el(
        "p",
        {"class": "legend"},
        [el("span", {"class": f"key o-{o.value}"}, o.value) for o in Outcome],
    )


# -- timelines --------------------------------------------------------------------------


def _timeline(view: RunView) -> Html:
    scale = scale_for(view.records)
    rows = [_attempt_row(view, r, scale) for r in view.records]
    return el(
        "section",
        {"id": "timeline"},
        el(
            "h2",
            None,
            "Timeline of each launch ",
            el("button", {"type": "button", "data-toggle-all": "open"}, "open all"),
            el("button", {"type": "button", "data-toggle-all": "close"}, "close all"),
        ),
        el("div", {"class": "attempt axisrow"}, el("span"), scale.axis(), el("span")),
        rows,
    )


def _attempt_row(view: RunView, r: AttemptRecord, scale: Scale) -> Html:
    seconds = f"{r.time_to_outcome_s:.1f} s" if r.time_to_outcome_s is not None else ""
    summary = el(
        "summary",
        {"title": _deciding(r)},
        el("span", {"class": "who"}, el("span", {"class": "cell-id"}, breakable(r.cell_id)), f" r{r.repeat}"),
        bar(r, scale) if r.outcome.ran else el("span", {"class": "notrun"}, r.reason),
        el(
            "span",
            {"class": f"label o-{r.outcome.value}"},
            breakable(outcome_words(r, short=True), ":"),
            el("small", None, seconds),
        ),
        lanes(r, scale),  # a hang across ranks: a lane per rank, in the summary's grid
    )
    return el("details", {"class": f"attempt o-{r.outcome.value}", "id": f"a-{r.attempt}"}, summary, _detail(view, r))


def _detail(view: RunView, r: AttemptRecord) -> Html:
    facts = [
        ("reason", r.reason or "-"),
        *([("first failed", f"rank {r.first_failed_rank}")] if r.first_failed_rank is not None else []),
        ("signature", r.signature or "-"),
        ("phases", " → ".join(f"{p.name} {p.at_s:.2f} s" for p in r.phases) or r.phase or "-"),
        ("exit", _exit(r)),
        ("GPUs", ",".join(r.gpus) or "-"),
        ("command", shlex.join(r.command) if r.command else "-"),
        ("env", " ".join(f"{k}={v}" if v is not None else f"unset {k}" for k, v in r.env_changes.items()) or "-"),
    ]
    log = f"cells/{r.attempt}/server.log"
    return el(
        "div",
        {"class": "detail"},
        el("dl", None, [(el("dt", None, k), el("dd", None, v)) for k, v in facts]),
        _excerpt(view, r),
        r.outcome.ran and el("p", None, el("a", {"href": log}, log), f" ({r.log_lines} lines, {r.log_bytes} bytes)"),
    )


def _exit(r: AttemptRecord) -> str:
    parts = [f"exit code {r.exit_code}" if r.exit_code is not None else "", f"signal {r.signal}" if r.signal else ""]
    stopped = f"torn down in {r.teardown_s:.2f} s, {len(r.killed)} signal(s) sent" if r.teardown_s is not None else ""
    return " · ".join(p for p in (*parts, stopped) if p) or "-"


def _excerpt(view: RunView, r: AttemptRecord) -> Html | None:
    """The deciding line with the lines before it, or the log's last lines when none decided."""
    path = view.path / "cells" / r.attempt / "server.log"
    if r.evidence is not None:
        lines = [(n, view.redactor.cut(t)) for n, t in _around(path, r.evidence.line_no)]  # never a secret
        mark = r.evidence.line_no
        title = f"deciding line {mark} and the lines before it"
    else:
        tail = view.log_tails.get(r.attempt, "").splitlines()[-TAIL_LINES:]
        lines, mark, title = [(None, t) for t in tail], None, "the last lines of the log"
    if not lines:
        return None
    rendered = [
        el("span", {"class": "hit" if n == mark else None}, f"{n:>6} | " if n else "", _clip(t), "\n") for n, t in lines
    ]
    return el("figure", None, el("figcaption", None, title), el("pre", {"class": "log"}, rendered))


def _around(path: Path, line_no: int) -> list[tuple[int | None, str]]:
    try:
        with open_regular(path) as handle:  # never a link's target (nor a FIFO) in the page
            found = context(handle, line_no, around=CONTEXT_BEFORE)
    except OSError:
        return []
    return [(n, t) for n, t in found if line_no - CONTEXT_BEFORE <= n <= line_no + CONTEXT_AFTER]


def _deciding(r: AttemptRecord) -> str:
    first = f"rank {r.first_failed_rank} failed first: " if r.first_failed_rank is not None else ""
    if r.evidence is not None:
        return f"{r.label}: {first}L{r.evidence.line_no}: {_clip(r.evidence.text)}"
    return f"{r.label}: {first}{r.reason}"


def _clip(text: str) -> str:
    return text if len(text) <= LINE_CHARS else text[: LINE_CHARS - 1] + "…"
