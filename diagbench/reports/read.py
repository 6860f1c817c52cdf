"""`report RUN`'s one core call: a run directory read into a `Report` (its view, and the
isolation, triage, limit or debug run that leads it), and the exit code that report stands for."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

from diagbench.debug.record import Debug, read_debug
from diagbench.errors import UserError
from diagbench.isolate.record import Isolation, read_isolation
from diagbench.judge.view import RunView, exit_code, problems, view_of
from diagbench.limit.record import Limit, read_limit
from diagbench.records.store import load_run
from diagbench.triage.issue import IssueFacts, issue_facts
from diagbench.triage.problem import server_word
from diagbench.triage.record import Triage, read_triage
from diagbench.vocab import ExitCode, ReportFormat

__all__ = ["Report", "ReportRequest", "read_report"]


@dataclass(frozen=True)
class ReportRequest:
    """`report RUN --format F [--strict] [--for SERVER]`."""

    run_dir: Path
    format: ReportFormat = ReportFormat.TABLE
    strict: bool = False  # exit 1 unless every hypothesis is supported
    server: str | None = None  # --for: whose tracker an issue is written for


@dataclass(frozen=True)
class Report:
    """A run as `report` shows it: the view every format starts from, and what leads it."""

    request: ReportRequest
    view: RunView
    isolation: Isolation | None = None
    triage: Triage | None = None
    limit: Limit | None = None
    debug: Debug | None = None  # a debug run's, or a triage's with --debug (the issue carries it)

    @property
    def leader(self) -> Isolation | Triage | Limit | Debug | None:
        """What leads the report, whose status is its exit code: a triage's answer, else a
        limit's, a debug run's or an isolation's; none in JUnit (the attempts as test cases)
        nor in an issue."""
        if self.request.format in (ReportFormat.JUNIT, ReportFormat.ISSUE):
            return None
        return self.triage or self.limit or self.debug or self.isolation

    @property
    def judged_by_expectations(self) -> bool:
        """The run's own report (no triage or isolation leads it, and it is no issue): its
        expectations decide the exit code, and a partial run's unchecked ones are worth saying."""
        return self.leader is None and self.request.format is not ReportFormat.ISSUE

    @cached_property
    def issue(self) -> IssueFacts:
        """What a maintainer asks for in a bug report (read only for `--format issue`: it opens logs)."""
        return issue_facts(self.view, self.view.environment)

    @property
    def exit_code(self) -> int:
        """2 where a record or a part of the manifest is unreadable, in every format alike; else
        an issue exits 0; a report a triage or an isolation leads exits as they did; a run
        exits as its expectations (and, with --strict, its hypotheses) say."""
        if problems(self.view):
            return int(ExitCode.USAGE)
        if self.leader is not None:
            return self.leader.status.exit_code
        if self.request.format is ReportFormat.ISSUE:
            return int(ExitCode.OK)
        return int(exit_code(self.view, self.request.strict))


def read_report(request: ReportRequest) -> Report:
    """The run directory read with suspicion: an unusable one (or --for without an issue) is a UserError."""
    if request.server is not None and request.format is not ReportFormat.ISSUE:
        raise UserError("--for names the tracker of --format issue (add --format issue)")
    server = server_word("--for", request.server) if request.server is not None else None
    request = dataclasses.replace(request, server=server)
    view = view_of(load_run(request.run_dir))
    run = request.run_dir
    return Report(request, view, read_isolation(run), read_triage(run), read_limit(run), read_debug(run))
