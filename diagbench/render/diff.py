"""`diagbench diff` for people."""

from __future__ import annotations

from diagbench.judge.diff import Changes
from diagbench.judge.view import RunView


def render_diff(a: RunView, b: RunView, changes: Changes) -> str:
    lines = [f"{a.run_id} -> {b.run_id}"]
    if not changes.cells and not changes.verdicts:
        return lines[0] + "\nno change in outcomes or verdicts"
    for cell, old, new in changes.cells:
        mark = "REGRESSION " if old == "ready" and new != "not run" else ""
        lines.append(f"  {mark}cell {cell}: {old} -> {new}")
    for hid, old, new in changes.verdicts:
        lines.append(f"  hypothesis {hid}: {old} -> {new}")
    lines.append(f"{changes.regressions} regression(s)")
    return "\n".join(lines)
