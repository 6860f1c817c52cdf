"""A run as the reports see it: the manifest, the records, and verdicts judged afresh
against the manifest's own (pre-registered) copy of the hypotheses."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from diagbench.jsonvalue import JSONObject, as_number, as_object
from diagbench.judge.verdicts import Verdict, Violation, check_expectations, judge
from diagbench.records.manifest import PlannedEntry
from diagbench.records.record import AttemptRecord
from diagbench.records.redact import Redactor, redact_record, run_redactor
from diagbench.records.store import LoadedRun, Unreadable
from diagbench.safefiles import open_regular
from diagbench.spec.hypotheses import Expectation, hypotheses_sha256
from diagbench.spec.matrix import selects
from diagbench.vocab import ExitCode, Outcome, VerdictWord

__all__ = ["LOG_TAIL_BYTES", "RunView", "exit_code", "log_tail", "problems", "unchecked", "view_of"]

LOG_TAIL_BYTES = 8192


@dataclass(frozen=True)
class RunView:
    run_id: str
    path: Path
    spec_name: str
    description: str
    created_at: str
    hypotheses_sha256: str
    spec_sha256: str
    hashes_match: bool  # the manifest's hypotheses still hash to the recorded value
    planned: list[PlannedEntry]
    records: list[AttemptRecord]
    verdicts: list[Verdict]
    violations: list[Violation]
    expectations: list[Expectation]
    provenance: JSONObject = field(default_factory=dict)
    environment: JSONObject | None = None  # the server's (manifest `environment`), None where not recorded
    log_tails: dict[str, str] = field(default_factory=dict)
    unreadable: list[Unreadable] = field(default_factory=list)
    plan_unreadable: bool = False  # the manifest's `attempts` (the plan) could not be read whole
    redactor: Redactor = field(default_factory=Redactor)  # for log lines a report reads itself (HTML context)
    timeout_s: float | None = None  # server.timeout of the run (what a stall saved is counted against)

    @property
    def nothing_started(self) -> bool:
        """Every attempt that was launched ended `launch_error`: a setup mistake, not an outcome."""
        ran = [r for r in self.records if r.outcome.ran]
        return bool(ran) and all(r.outcome is Outcome.LAUNCH_ERROR for r in ran)

    @property
    def complete(self) -> bool:
        """Every planned attempt has a final record; a plan that could not be read is never complete."""
        if not self.planned or self.plan_unreadable:
            return False
        done = {r.attempt for r in self.records if r.outcome not in (Outcome.CANCELLED, Outcome.INTERNAL_ERROR)}
        return all(a.attempt in done for a in self.planned)


def view_of(loaded: LoadedRun, redactor: Redactor | None = None) -> RunView:
    """The run as reports show it: each manifest part read with suspicion (a malformed part
    is named and left out), records and log tails with their secrets blanked."""
    manifest = loaded.manifest
    redactor = redactor or run_redactor(manifest.spec_file)
    records = [redact_record(r, redactor) for r in loaded.records]
    where = loaded.path / "manifest.json"
    return RunView(
        run_id=manifest.run_id or loaded.path.name,
        path=loaded.path,
        spec_name=manifest.spec_name,
        description=str(manifest.spec.get("description", "")),
        created_at=manifest.created_at,
        hypotheses_sha256=manifest.hypotheses_sha256,
        spec_sha256=manifest.spec_sha256,
        hashes_match=hypotheses_sha256(manifest.hypotheses) == manifest.hypotheses_sha256,
        planned=list(manifest.attempts),
        records=records,
        verdicts=[judge(h, [c.row for c in manifest.cells], records) for h in manifest.hypotheses],
        violations=check_expectations(manifest.expect, records),
        expectations=list(manifest.expect),
        provenance=dict(manifest.provenance or {}),
        environment=dict(manifest.environment) if manifest.environment else None,
        log_tails={
            r.attempt: redactor.cut(log_tail(loaded.path / "cells" / r.attempt / "server.log")) for r in records
        },
        unreadable=[*loaded.unreadable, *(Unreadable(where, p.why) for p in manifest.problems)],
        plan_unreadable=manifest.failed("attempts"),
        redactor=redactor,
        timeout_s=_timeout(manifest.spec),
    )


def _timeout(spec: JSONObject) -> float | None:
    return as_number((as_object(spec.get("server")) or {}).get("timeout_s"))


def log_tail(path: Path, size: int = LOG_TAIL_BYTES) -> str:
    """The end of a server log; nothing for anything but a regular file: a FIFO would block, and
    a link could show another file (diagbench writes neither)."""
    try:
        with open_regular(path) as handle:
            handle.seek(0, 2)
            handle.seek(max(0, handle.tell() - size))
            return handle.read().decode("utf-8", errors="replace")
    except OSError:
        return ""


def problems(view: RunView) -> list[str]:
    """What makes a run unusable, one line each: unreadable records, or no attempt could start."""
    lines = [f"{u}" for u in view.unreadable]
    if view.nothing_started:
        first = next(r for r in view.records if r.outcome is Outcome.LAUNCH_ERROR)
        lines.append(f"no attempt could start: {first.reason}")
    return lines


def unchecked(view: RunView) -> list[str]:
    """Each `expect` that selects a planned attempt with no final record (none, or `cancelled`
    or `internal_error`): the run is partial, so the expect is not known to hold."""
    final = {r.attempt for r in view.records if r.outcome not in (Outcome.CANCELLED, Outcome.INTERNAL_ERROR)}
    final |= {u.path.parent.name for u in view.unreadable if u.path.name == "result.json"}  # named already
    lines = []
    for exp in view.expectations:
        missing = [a.attempt for a in view.planned if a.attempt not in final and selects(exp.when, a.params or {})]
        if missing:
            few = ", ".join(missing[:3]) + (f" and {len(missing) - 3} more" if len(missing) > 3 else "")
            lines.append(
                f"expect #{exp.index + 1} not checked: the run is partial ({few} never ended with a result); "
                f"finish it with: diagbench run --resume {view.path}"
            )
    return lines


def exit_code(view: RunView, strict: bool) -> ExitCode:
    """2 a record unreadable or no attempt could start; 0 all expectations held; 1 one was
    violated, or could not be checked (a partial run), or with strict a hypothesis not supported."""
    if problems(view):
        return ExitCode.USAGE
    if view.violations or unchecked(view):
        return ExitCode.EXPECT_VIOLATED
    if strict and any(v.verdict is not VerdictWord.SUPPORTED for v in view.verdicts):
        return ExitCode.EXPECT_VIOLATED
    return ExitCode.OK
