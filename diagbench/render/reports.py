"""`report RUN --format F`: one renderer for a run's report in every format, a triage's or an
isolation's answer leading it where the run holds one."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from rich.console import Group

from diagbench.debug.record import Debug
from diagbench.isolate.record import Isolation
from diagbench.jsonvalue import JSONObject
from diagbench.judge.view import RunView
from diagbench.limit.record import Limit
from diagbench.render.debug import debug_markdown, debug_section_html, render_debug
from diagbench.render.formats import Rendering, Shown
from diagbench.render.html import render_html
from diagbench.render.htmlkit import Html
from diagbench.render.isolation import render_isolation
from diagbench.render.isolation_report import isolation_html, isolation_markdown, probes_as_plan
from diagbench.render.issue import render_issue
from diagbench.render.limit import limit_markdown, limit_section_html, render_limit
from diagbench.render.report import render_json, render_junit, render_markdown, run_table
from diagbench.render.triage import render_triage, triage_markdown, triage_section_html
from diagbench.reports.read import Report
from diagbench.triage.record import Triage
from diagbench.vocab import ReportFormat, assert_never

if TYPE_CHECKING:
    from rich.console import RenderableType

__all__ = ["render_report", "report_html"]


def render_report(report: Report, width: int | None = None) -> Rendering:
    """The report in its request's format: `width` fits the terminal's tables."""
    format, view, lead = report.request.format, report.view, _lead(report, width)
    match format:
        case ReportFormat.TABLE:
            return Shown(lead.table) if lead.table is not None else run_table(view, width)
        case ReportFormat.MARKDOWN:
            return render_markdown(lead.view, lead.markdown)
        case ReportFormat.JSON:
            return render_json(lead.view, lead.json)
        case ReportFormat.JUNIT:
            return render_junit(view)
        case ReportFormat.HTML:
            return report_html(report)
        case ReportFormat.ISSUE:
            return render_issue(view, report.issue, report.triage, report.request.server, report.debug)
        case _:
            assert_never(format)


def report_html(report: Report) -> str:
    """The report as one HTML page (`--format html`, and the report.html an isolation or a triage leaves)."""
    lead = _lead(report, None)
    return render_html(lead.view, lead.html)


@dataclass(frozen=True)
class _Lead:
    """What a triage or an isolation puts above the run's own report, in each format."""

    view: RunView
    table: RenderableType | None = None  # instead of the run's tables
    markdown: tuple[str, ...] = ()
    json: JSONObject | None = None
    html: tuple[Html, ...] = ()


def _lead(report: Report, width: int | None) -> _Lead:
    leader, view = report.leader, report.view
    if isinstance(leader, Triage):  # with --debug, its debug launch below it
        md, html = triage_markdown(leader), triage_section_html(leader)
        found = report.debug
        more = (
            ((debug_markdown(found),), {"debug": found.to_json()}, (debug_section_html(found),))
            if found
            else ((), {}, ())
        )
        shown = render_triage(leader, width)
        table = Group(shown, render_debug(found)) if found else shown
        # its launches are its plan (the command, then each remedy as triage chose it)
        plan = probes_as_plan(view)
        return _Lead(plan, table, (md, *more[0]), {"triage": leader.to_json(), **more[1]}, (html, *more[2]))
    if isinstance(leader, Limit):  # its launches are its plan
        table, md, html = render_limit(leader, width), limit_markdown(leader), limit_section_html(leader)
        return _Lead(probes_as_plan(view), table, (md,), {"limit": leader.to_json()}, (html,))
    if isinstance(leader, Debug):
        table, md, html = render_debug(leader), debug_markdown(leader), debug_section_html(leader)
        return _Lead(probes_as_plan(view), table, (md,), {"debug": leader.to_json()}, (html,))
    if isinstance(leader, Isolation):  # its probes are its plan; its steps say more than its cells
        md, html = isolation_markdown(leader), isolation_html(leader)
        table = render_isolation(leader, width)
        return _Lead(probes_as_plan(view), table, (md,), {"isolation": leader.to_json()}, (html,))
    return _Lead(view)
