"""`report RUN --format F`: every format of every kind of run renders through one renderer,
led by the triage or isolation the run holds, and exits as that report stands for."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from rich.console import Console

from diagbench.errors import UserError
from diagbench.render.formats import Shown
from diagbench.render.reports import render_report
from diagbench.reports.read import ReportRequest, read_report
from diagbench.vocab import ReportFormat

RUNS = Path(__file__).resolve().parents[2] / "runs"
MATRIX, ISOLATION, TRIAGE = (
    RUNS / "refserver-capture-h200",
    RUNS / "refserver-isolate-h200",
    RUNS / "refserver-triage-h200",
)


def shown_text(shown: Shown) -> str:
    console = Console(width=120, record=True, file=io.StringIO())
    shown.print_to(console)
    return console.export_text()


@pytest.mark.parametrize("run", [MATRIX, ISOLATION, TRIAGE], ids=lambda p: p.name)
@pytest.mark.parametrize("format", list(ReportFormat), ids=str)
def test_every_format_of_every_kind_of_run(run: Path, format: ReportFormat) -> None:
    report = read_report(ReportRequest(run, format))
    rendered = render_report(report, 120)
    if format is ReportFormat.TABLE:
        assert isinstance(rendered, Shown)
        text = shown_text(rendered)
    else:
        assert isinstance(rendered, str)
        text = rendered
    lead = {ISOLATION: "isolation", TRIAGE: "triage"}.get(run)
    if format is ReportFormat.JSON:
        data = json.loads(text)
        assert data["run_id"] == report.view.run_id and (lead is None or lead in data)
    elif format is ReportFormat.JUNIT:
        assert text.startswith("<?xml") and "testsuite" in text
    elif format is ReportFormat.ISSUE:
        assert text.startswith("## ") or text.startswith("# ")
    elif lead is not None:  # the triage's or the isolation's answer leads the page, the table, the Markdown
        assert lead in text.lower()
    leader = {ISOLATION: report.isolation, TRIAGE: report.triage}.get(run)
    assert report.leader is (None if format in (ReportFormat.JUNIT, ReportFormat.ISSUE) else leader)


def test_the_exit_code_is_the_leaders_or_the_runs() -> None:
    isolation = read_report(ReportRequest(ISOLATION, ReportFormat.MARKDOWN))
    assert isolation.isolation is not None and isolation.exit_code == isolation.isolation.status.exit_code
    assert not isolation.judged_by_expectations
    junit = read_report(ReportRequest(ISOLATION, ReportFormat.JUNIT))
    assert junit.judged_by_expectations and junit.leader is None
    assert read_report(ReportRequest(TRIAGE, ReportFormat.ISSUE)).exit_code == 0


def test_for_names_the_tracker_of_an_issue_only() -> None:
    with pytest.raises(UserError, match=r"--for names the tracker of --format issue \(add --format issue\)"):
        read_report(ReportRequest(MATRIX, ReportFormat.MARKDOWN, server="vllm"))
    with pytest.raises(UserError, match="--for nosuch: unknown server"):
        read_report(ReportRequest(MATRIX, ReportFormat.ISSUE, server="nosuch"))
    assert read_report(ReportRequest(MATRIX, ReportFormat.ISSUE, server="llama.cpp")).request.server == "llamacpp"
