"""GitHub Actions annotations (`::error title=...::message`): a run's problems on the job's page.

An `::error` for each violated expect and each diagbench bug, a `::warning` for each cell
that did not come up where no expect said what it should do, a `::notice` for each failure an
expect predicted and for each verdict: a run that passes shows no error. Printed by `run` and
`report` when GITHUB_ACTIONS=true.
"""

from __future__ import annotations

from diagbench import safetext
from diagbench.judge.view import RunView
from diagbench.records.record import AttemptRecord
from diagbench.render.report import deciding_line
from diagbench.spec.matrix import selects
from diagbench.vocab import Outcome

__all__ = ["NOT_A_PROBLEM", "github_annotations"]

NOT_A_PROBLEM = (Outcome.READY, Outcome.CANCELLED, Outcome.SKIPPED)


def github_annotations(view: RunView) -> list[str]:
    records = {r.attempt: r for r in view.records}
    lines = []
    for v in view.violations:
        r = records.get(v.attempt)
        why = f"wanted {v.wanted}, got {v.got}" + (f": {deciding_line(r)}" if r is not None else "")
        lines.append(_command("error", f"diagbench: expect #{v.expectation + 1} violated by {v.cell_id}", why))
    violated = {v.attempt for v in view.violations}
    for r in view.records:
        if r.outcome not in NOT_A_PROBLEM and r.attempt not in violated:
            title = f"diagbench: {r.cell_id} (r{r.repeat}) {r.label}"
            lines.append(_command(_level(view, r), title + _as_expected(view, r), deciding_line(r)))
    for h in view.verdicts:
        lines.append(_command("notice", f"diagbench: hypothesis {h.id} {h.verdict.value}", h.meaning or h.reason))
    return lines


def _level(view: RunView, r: AttemptRecord) -> str:
    if r.outcome is Outcome.INTERNAL_ERROR:
        return "error"
    return "notice" if _as_expected(view, r) else "warning"


def _as_expected(view: RunView, r: AttemptRecord) -> str:
    """` (as expected)` where an expect selects this cell (it held: violations are errors)."""
    return " (as expected)" if any(selects(e.when, r.params) for e in view.expectations) else ""


def _command(kind: str, title: str, message: str) -> str:
    return f"::{kind} title={_escape(title, prop=True)}::{_escape(message)}"


def _escape(text: str, prop: bool = False) -> str:
    """Escapes shown (safetext), then the workflow-command escapes: %, CR, LF; a property also : and ,."""
    return safetext.annotation(text, prop)
