"""What a finished run leaves besides its records: report.html, JUnit, the step summary, annotations."""

from __future__ import annotations

import os
from pathlib import Path

from diagbench.cli.app import guarded, out, write_report
from diagbench.judge.view import RunView

__all__ = ["annotate", "publish"]


def publish(view: RunView, junit: Path | None) -> None:
    """report.html in the run directory always; the rest where asked for (or where CI expects it)."""
    from diagbench.render.html import render_html
    from diagbench.render.report import render_junit, render_markdown

    guarded(lambda: write_report(view.path / "report.html", render_html(view), "w", view.path))
    if junit is not None:
        guarded(lambda: write_report(junit, render_junit(view), "w", view.path))
    summary = os.environ.get("GITHUB_STEP_SUMMARY")
    if summary:
        guarded(lambda: write_report(Path(summary), render_markdown(view), "a", view.path))
    annotate(view)


def annotate(view: RunView) -> None:
    """GitHub Actions annotations, only inside GitHub Actions."""
    if os.environ.get("GITHUB_ACTIONS") != "true":
        return
    from diagbench.render.annotations import github_annotations

    for line in github_annotations(view):
        out.print(line, markup=False, highlight=False, soft_wrap=True)
