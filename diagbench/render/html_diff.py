"""`diagbench diff RUN_A RUN_B --format html`: the changes between two runs on one page."""

from __future__ import annotations

from diagbench.judge.diff import CellState, Changes
from diagbench.judge.view import RunView
from diagbench.render.htmlkit import Html, breakable, el, page

__all__ = ["dominant", "render_diff_html"]


def render_diff_html(a: RunView, b: RunView, changes: Changes) -> str:
    heading = el(
        "header",
        None,
        el("h1", None, f"{a.spec_name}: what changed"),
        el("p", {"class": "summary"}, el("code", None, a.run_id), " → ", el("code", None, b.run_id)),
        [el("p", {"class": "warning"}, "warning: ", w) for w in changes.warnings],
        el("p", {"class": "underneath"}, "underneath: ", changes.underneath.words),
        [el("p", {"class": "phase"}, f"cell {s.cell_id}: {s.words}") for s in changes.phases],
        el("p", {"class": "regression" if changes.regressions else "same"}, f"{changes.regressions} regression(s)"),
    )
    rows = [_row(c.cell_id, c.before, c.after, "REGRESSION" if c.regression else "→") for c in changes.cells]
    rows += [_row(cell, state, state, "=") for cell, state in changes.unchanged]
    cells = el(
        "section",
        {"id": "cells"},
        el("h2", None, "Cells"),
        el("table", {"class": "changes"}, _head("cell", a, b), el("tbody", None, rows)),
    )
    verdicts = [
        el("tr", None, el("td", None, h), _verdict(old), el("td", {"class": "arrow"}, "→"), _verdict(new))
        for h, old, new in changes.verdicts
    ]
    section = verdicts and el(
        "section",
        {"id": "verdicts"},
        el("h2", None, "Hypotheses whose verdict changed"),
        el("table", {"class": "changes"}, _head("hypothesis", a, b), el("tbody", None, verdicts)),
    )
    return page(f"diagbench diff: {a.run_id} → {b.run_id}", heading, section or None, cells)


def _head(what: str, a: RunView, b: RunView) -> Html:
    """Before and after, each named by its run."""
    return el(
        "thead",
        None,
        el(
            "tr",
            None,
            el("th", {"scope": "col"}, what),
            el("th", {"scope": "col"}, "before ", el("code", None, a.run_id)),
            el("th", {"scope": "col"}, ""),
            el("th", {"scope": "col"}, "after ", el("code", None, b.run_id)),
        ),
    )


def _row(cell_id: str, before: CellState, after: CellState, mark: str) -> Html:
    """One cell: before, after, and `=` (unchanged), `→` (changed) or REGRESSION."""
    return el(
        "tr",
        {"class": "same" if mark == "=" else "changed"},
        el("td", None, el("span", {"class": "cell-id"}, breakable(cell_id))),
        _state(before),
        el("td", {"class": "regression" if mark == "REGRESSION" else "arrow"}, mark),
        _state(after),
    )


def _state(state: CellState) -> Html:
    return el("td", {"class": f"label o-{dominant(state)}"}, state.words)


def _verdict(word: str) -> Html:
    return el("td", None, el("span", {"class": f"badge v-{word}"}, word))


def dominant(state: CellState) -> str:
    """The outcome word that colours a state: the most frequent label's outcome, or not run."""
    if not state.counts:
        return "cancelled"
    label = max(state.counts, key=lambda c: c[1])[0]
    return label.split(":", 1)[0]
