"""`diagbench probe`: one launch, judged for `git bisect run`: 0 it came up, 1 it showed the
target failure, 125 anything else (git bisect's "cannot test this one": skip it).

A probe is a normal run of one cell (a spec's, picked by `--only`, or one command line), so
its records, manifest and server environment are where every run's are.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from diagbench.errors import UserError
from diagbench.execute.cancel import Cancel
from diagbench.execute.events import RunEvents
from diagbench.execute.pipeline import RunOptions, RunResult, execute
from diagbench.isolate.pasted import split_command
from diagbench.isolate.problem import ServerRules, server_spec
from diagbench.records.record import AttemptRecord
from diagbench.spec.load import Spec
from diagbench.spec.matrix import Cell, parse_only, select_cells
from diagbench.vocab import CONDITION_OUTCOMES, FAILURE_CLASSES, Outcome, outcome_label

__all__ = [
    "ANY_FAILURE",
    "NOT_READY",
    "READY_EXIT",
    "SKIP_EXIT",
    "TARGET_EXIT",
    "ProbeResult",
    "ProbeTarget",
    "command_spec",
    "exit_code_of",
    "one_cell",
    "parse_target",
    "probe",
]

READY_EXIT = 0
TARGET_EXIT = 1
SKIP_EXIT = 125  # git bisect run: this revision cannot be tested
ANY_FAILURE = "any failure (failed, crashed or timeout)"
NOT_READY = "not_ready"
_FAILURES = (Outcome.FAILED, Outcome.CRASHED, Outcome.TIMEOUT)


@dataclass(frozen=True)
class ProbeTarget:
    """The failure that makes a probe exit 1: an outcome (or not_ready), maybe a class; None: any failure."""

    outcome: str | None = None
    failure_class: str | None = None

    @property
    def label(self) -> str:
        return ANY_FAILURE if self.outcome is None else outcome_label(self.outcome, self.failure_class)

    def matches(self, record: AttemptRecord) -> bool:
        if self.outcome is None:
            return record.outcome in _FAILURES
        if self.outcome == NOT_READY:
            return record.outcome in (*_FAILURES, Outcome.LAUNCH_ERROR)
        if record.outcome.value != self.outcome:
            return False
        return self.failure_class is None or record.failure_class == self.failure_class


def parse_target(text: str | None) -> ProbeTarget:
    """`--target OUTCOME[:CLASS]`: failed, failed:oom, crashed, timeout, launch_error or not_ready."""
    if text is None:
        return ProbeTarget()
    outcome, _, klass = text.partition(":")
    allowed = [o for o in (*CONDITION_OUTCOMES, NOT_READY) if o not in (Outcome.READY.value, Outcome.CANCELLED.value)]
    if outcome not in allowed:
        raise UserError(f"--target {text}: expected one of {', '.join(allowed)}, optionally :CLASS (failed:oom)")
    if klass and (outcome != Outcome.FAILED.value or klass not in FAILURE_CLASSES):
        raise UserError(f"--target {text}: a class goes with failed, one of {', '.join(FAILURE_CLASSES)}")
    return ProbeTarget(outcome, klass or None)


@dataclass(frozen=True)
class ProbeResult:
    run: RunResult
    record: AttemptRecord | None  # None: interrupted before it launched
    exit_code: int
    why: str


def exit_code_of(record: AttemptRecord, target: ProbeTarget) -> tuple[int, str]:
    if record.outcome is Outcome.READY:
        return READY_EXIT, "it came up"
    if target.matches(record):
        return TARGET_EXIT, f"the target failure ({target.label})"
    return SKIP_EXIT, f"not the target failure ({target.label}): git bisect skips it"


def command_spec(command: str, env: list[str], rules: ServerRules, cwd: Path) -> Spec:
    """One command line (with `{port}`) as a spec of one cell."""
    words, variables = split_command(command, env, "probe")
    if not words:
        raise UserError("probe: the command is empty (give a spec, or a command line such as 'python serve.py')")
    request = {"command": command, "env": env, "ready": rules.ready}
    cell = Cell(1, "probe", {}, tuple(words), dict(variables))
    return Spec.of_request("probe", "diagbench probe CMD", cwd, request, server_spec(rules, cwd), (cell,))


def one_cell(spec: Spec, only: list[str]) -> list[str]:
    """`--only AXIS=LABEL,...` terms that select exactly one cell of the spec."""
    terms = [t.strip() for term in only for t in term.split(",") if t.strip()]
    chosen = select_cells(spec.cells, parse_only(terms, spec.axes))
    if len(chosen) != 1:
        ids = ", ".join(c.id for c in chosen[:4]) + (", ..." if len(chosen) > 4 else "")
        raise UserError(f"--only selects {len(chosen)} cells ({ids}): a probe launches one; name every axis")
    return terms


def probe(
    spec: Spec,
    only: list[str],
    target: ProbeTarget,
    runs_dir: Path,
    run_id: str | None,
    events: RunEvents,
    cancel: Cancel,
) -> ProbeResult:
    terms = one_cell(spec, only)
    options = RunOptions(runs_dir, run_id, tuple(terms), repeat=1, parallel=1)
    result = execute(spec, options, events, cancel)
    record = result.records[0] if result.records else None
    if record is None or not record.outcome.ran:
        return ProbeResult(result, record, SKIP_EXIT, "it did not launch (interrupted, or diagbench failed)")
    code, why = exit_code_of(record, target)
    return ProbeResult(result, record, code, why)
