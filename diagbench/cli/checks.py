"""Checks the commands make before they start work, and the problems they report after."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from diagbench.cli.app import err
from diagbench.errors import LaunchError, UserError
from diagbench.render.text import visible

if TYPE_CHECKING:
    from diagbench.judge.view import RunView
    from diagbench.spec.load import Spec

__all__ = ["check_launchable", "check_writable", "say_problems"]


def check_writable(path: Path, option: str) -> None:
    """Fail before the run, not after it: the report file must be creatable (and is left as it was)."""
    existed = path.exists()
    try:
        with path.open("a", encoding="utf-8"):
            pass
    except OSError as exc:
        raise UserError(
            f"{option} {path}: cannot write there ({exc.strerror}); fix the path, nothing was run"
        ) from None
    if not existed:
        path.unlink(missing_ok=True)


def check_launchable(spec: Spec, only: Sequence[str], resume: bool, planning: bool = False) -> list[str]:
    """Say what would stop cells from starting (a missing program or cwd): a LaunchError when
    it stops every selected cell, else a warning line each. Returns the problems found.
    `planning`: a `{bin:NAME}` program missing on this machine is only a note (the spec plans
    anywhere; the machine that runs it must have the program), not a problem."""
    from diagbench.launch.preflight import preflight
    from diagbench.spec.matrix import parse_only, select_cells

    cells = spec.cells if resume else select_cells(spec.cells, parse_only(only, spec.axes))
    problems = preflight(spec.server, cells)
    if planning:
        for problem in (p for p in problems if p.not_installed):
            note = f"{problem.message}; `diagbench run` stops here until then"
            err.print(f"diagbench: note: {visible(note)}", markup=False)
        problems = [p for p in problems if not p.not_installed]
    lines = [problem.describe(len(cells)) for problem in problems]
    if problems and len({cell for p in problems for cell in p.cells}) == len(cells):
        raise LaunchError("\n".join(lines))
    for line in lines:
        err.print(f"diagbench: {visible(line)}", markup=False)
    return lines


def say_problems(*views: RunView, expects: bool = False) -> None:
    """A run's unreadable records and setup failures, one line each on stderr; with `expects`,
    also each expect a partial run leaves unchecked."""
    from diagbench.judge.view import problems, unchecked

    for view in views:
        for line in [*problems(view), *(unchecked(view) if expects else [])]:
            err.print(f"diagbench: {visible(line)}", markup=False)
