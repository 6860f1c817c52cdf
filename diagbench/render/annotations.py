"""GitHub Actions annotations (`::error title=...::message`): a run's problems on the job's page.

An `::error` for each violated expect and each cell that did not come up (with its deciding
line), a `::notice` for each verdict. Printed by `run` and `report` when GITHUB_ACTIONS=true.
"""

from __future__ import annotations

from diagbench.judge.view import RunView
from diagbench.render.report import deciding_line
from diagbench.vocab import Outcome

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
            lines.append(_command("error", f"diagbench: {r.cell_id} (r{r.repeat}) {r.label}", deciding_line(r)))
    for h in view.verdicts:
        lines.append(_command("notice", f"diagbench: hypothesis {h.id} {h.verdict.value}", h.meaning or h.reason))
    return lines


def _command(kind: str, title: str, message: str) -> str:
    return f"::{kind} title={_escape(title, prop=True)}::{_escape(message)}"


def _escape(text: str, prop: bool = False) -> str:
    """The workflow-command escapes: data loses %, CR, LF; a property also : and ,."""
    text = text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")
    return text.replace(":", "%3A").replace(",", "%2C") if prop else text
