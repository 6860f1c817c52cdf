"""`diagbench diff` for people (text), for programs (JSON), and for a browser (HTML)."""

from __future__ import annotations

import json

from diagbench.jsonvalue import JSON
from diagbench.judge.diff import Changes
from diagbench.judge.view import RunView
from diagbench.render.fit import fit_lines
from diagbench.render.formats import Rendering, Shown
from diagbench.render.html_diff import render_diff_html
from diagbench.render.text import visible
from diagbench.vocab import DiffFormat, assert_never

__all__ = ["diff_as", "diff_json", "render_diff"]


def diff_as(a: RunView, b: RunView, changes: Changes, format: DiffFormat, width: int | None = None) -> Rendering:
    """`diff RUN_A RUN_B`: the changes in words (long lines broken at `width`), as one JSON object,
    or as one HTML page."""
    match format:
        case DiffFormat.TEXT:
            return Shown(lines=(fit_lines(visible(render_diff(a, b, changes)), width),))
        case DiffFormat.JSON:
            return diff_json(a, b, changes)
        case DiffFormat.HTML:
            return render_diff_html(a, b, changes)
        case _:
            assert_never(format)


def render_diff(a: RunView, b: RunView, changes: Changes) -> str:
    lines = [f"{a.run_id} -> {b.run_id}", *(f"warning: {w}" for w in changes.warnings)]
    lines.append(f"underneath: {changes.underneath.words}")
    lines.extend(f"  cell {s.cell_id}: {s.words}" for s in changes.phases)
    if not changes.cells and not changes.verdicts and not changes.hang_sites:
        return "\n".join([*lines, "no change in outcomes or verdicts"])
    for c in changes.cells:
        mark = "REGRESSION " if c.regression else ""
        lines.append(f"  {mark}cell {c.cell_id}: {c.before.words} -> {c.after.words}")
    for cell, old_site, new_site in changes.hang_sites:
        lines.append(f"  cell {cell}: hung at {old_site} -> hung at {new_site}")
    for hid, old, new in changes.verdicts:
        lines.append(f"  hypothesis {hid}: {old} -> {new}")
    lines.append(f"{changes.regressions} regression(s)")
    return "\n".join(lines)


def diff_json(a: RunView, b: RunView, changes: Changes) -> str:
    data: dict[str, JSON] = {
        "from": {"run_id": a.run_id, "path": str(a.path), "spec": a.spec_name, "spec_sha256": a.spec_sha256},
        "to": {"run_id": b.run_id, "path": str(b.path), "spec": b.spec_name, "spec_sha256": b.spec_sha256},
        "warnings": changes.warnings,
        "environment": {
            "changes": [c.to_json() for c in changes.underneath.changes],
            "same": list(changes.underneath.same),
            "unknown": changes.underneath.unknown or None,
        },
        "phases": [s.to_json() for s in changes.phases],
        "regressions": changes.regressions,
        "cells": [c.to_json() for c in changes.cells],
        "verdicts": [{"id": h, "before": old, "after": new} for h, old, new in changes.verdicts],
        "hang_sites": [{"cell_id": c, "before": old, "after": new} for c, old, new in changes.hang_sites],
        "unchanged": [{"cell_id": cell, **state.to_json()} for cell, state in changes.unchanged],
    }
    return json.dumps(data, indent=2) + "\n"
