"""A debug run: launch the command; if it fails, launch it once more with the debug settings
its failure calls for, and record what each launch said and the sharper line (`debug.json`
beside the attempts). `debug_failure` is the second half, which `triage --debug` shares.
Core only: it never prints."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

from diagbench.debug.plan import class_word, plan_debug
from diagbench.debug.problem import DebugProblem
from diagbench.debug.record import FILENAME, Debug, Seen, Status, read_debug
from diagbench.debug.sets import DebugCatalogue
from diagbench.debug.sharper import find_sharper
from diagbench.errors import RecordError, UserError
from diagbench.execute.cancel import Cancel
from diagbench.execute.events import RunEvents
from diagbench.limit.launches import Interrupted, Launcher, LaunchOptions, WriteFailed, check_launchable
from diagbench.logs.signatures import Signature
from diagbench.records.record import AttemptRecord
from diagbench.records.redact import Redactor
from diagbench.records.store import RunDir, write_json
from diagbench.triage.apply import Launch
from diagbench.vocab import Outcome

__all__ = ["AXIS", "DebugResult", "Relaunch", "debug", "debug_failure", "detect_server", "seen"]

AXIS = "debug"  # the one parameter of a debug run's cells: off (the command) or on
Relaunch = Callable[[Launch], tuple[AttemptRecord, Path]]  # one launch, its record and its server.log


@dataclass(frozen=True)
class DebugResult:
    run_dir: RunDir
    debug: Debug
    harness_errors: tuple[str, ...] = ()


def debug(
    problem: DebugProblem, options: LaunchOptions, events: RunEvents, cancel: Cancel | None = None
) -> DebugResult:
    """Open the run, launch the command and, when it fails, its debug launch; write debug.json."""
    check_launchable(problem.spec, problem.launch)
    own = cancel is None
    launcher = Launcher(problem.spec, options, events, cancel or Cancel(), "debug")
    shown = launcher.secrets.log(problem.shown())
    try:
        found = _run(problem, launcher, shown)
    except (Interrupted, KeyboardInterrupt):  # what was known before the debug launch, else the bare facts
        why = "interrupted: the launches that ended are recorded"
        found = _partial(launcher.run_dir.path) or Debug(Status.INTERRUPTED, why, shown, None, problem.server, None)
    except WriteFailed as failed:
        found = Debug(Status.WRITE_FAILED, f"stopped: {failed}", shown, None, problem.server, None)
    finally:
        if own:
            launcher.cancel.close()
    write_json(launcher.run_dir.path / FILENAME, found.to_json())
    launcher.run_dir.write_verdicts([])  # a normal run directory, though a debug run judges no hypothesis
    return DebugResult(launcher.run_dir, found, tuple(launcher.harness_errors))


def _run(problem: DebugProblem, launcher: Launcher, shown: str) -> Debug:
    def relaunch(launch: Launch, on: bool) -> tuple[AttemptRecord, Path]:
        cell = launcher.cell("debug" if on else "none", {AXIS: "on" if on else "off"}, launch)
        record = launcher.launch([cell])[0][0]
        return record, launcher.log(record)

    before = relaunch(problem.launch, False)
    if before[0].outcome is Outcome.READY:
        return Debug(
            Status.COMES_UP,
            "the command comes up as it is: nothing to debug",
            shown,
            None,
            problem.server,
            None,
            before=seen(before[0]),
        )
    if not before[0].outcome.ran or before[0].outcome is Outcome.LAUNCH_ERROR:
        why = f"the command did not run to a failure ({before[0].label}: {before[0].reason})"
        return Debug(Status.UNDECIDED, why, shown, None, problem.server, None, before=seen(before[0]))
    server = problem.server or detect_server(before[1], problem.spec.server.signatures)
    path = launcher.run_dir.path / FILENAME
    return debug_failure(
        problem.catalogue,
        problem.wrappers,
        problem.launch,
        server,
        before,
        lambda launch: relaunch(launch, True),
        launcher.secrets,
        shown,
        lambda partial: write_json(path, partial.to_json()),
    )


def debug_failure(
    catalogue: DebugCatalogue,
    wrappers: bool,
    launch: Launch,
    server: str | None,
    before: tuple[AttemptRecord, Path],
    relaunch: Relaunch,
    secrets: Redactor,
    shown: str,
    keep: Callable[[Debug], None] | None = None,
) -> Debug:
    """The failing launch `before` launched again with the settings its failure calls for;
    `keep` puts what is known on disk before the debug launch (a Ctrl-C there leaves it)."""
    record = before[0]
    word = class_word(record)
    plan = plan_debug(catalogue, launch, server, record, wrappers)
    first = seen(record)
    if not plan.settings:
        why = f"no debug setting is known for {record.label} of {server or 'an unknown server'}" + (
            f" that the command does not set already ({'; '.join(plan.notes)})" if plan.notes else ""
        )
        fix = " (add your own with --debug-sets FILE; `diagbench debug -h` says how)"
        return Debug(Status.NO_SETTINGS, why + fix, shown, None, server, word, before=first, notes=plan.notes)
    debug_command = secrets.log(_shown(plan.launch))
    if keep is not None:
        why = "stopped before the debug launch ended (interrupted, or diagbench was killed)"
        keep(Debug(Status.INTERRUPTED, why, shown, debug_command, server, word, plan.settings, first, notes=plan.notes))
    after = relaunch(plan.launch)
    second = seen(after[0])
    sharper = find_sharper(before, after, plan.sets) if _decided(after[0]) else None
    sharp = replace(sharper, text=secrets.log(sharper.text)) if sharper else None
    status, reason = _status(after[0], sharp is not None)
    notes = (*plan.notes, *_notes(record, after[0], sharp is not None))
    return Debug(status, reason, shown, debug_command, server, word, plan.settings, first, second, sharp, notes)


def _partial(run: Path) -> Debug | None:
    """The debug.json written before the debug launch, if any."""
    try:
        return read_debug(run)
    except RecordError:
        return None


def _decided(record: AttemptRecord) -> bool:
    """The launch ended in a failure a line decided (or the cause the log reader followed)."""
    return record.outcome in (Outcome.FAILED, Outcome.CRASHED) and (record.evidence is not None or bool(record.cause))


def _status(after: AttemptRecord, sharper: bool) -> tuple[Status, str]:
    if not _decided(after):
        what = "came up" if after.outcome is Outcome.READY else f"ended {after.label} with no failure line"
        return Status.UNDECIDED, f"the debug launch {what}: it decided no failure line"
    if sharper:
        return Status.SHARPER, ""
    return Status.SAME, "the debug launch failed, but its log names no place the first one did not"


def _notes(before: AttemptRecord, after: AttemptRecord, sharper: bool) -> list[str]:
    out = []
    if after.outcome is Outcome.READY:
        out.append("with the debug settings it came up: the failure depends on timing or on what they change")
    elif after.label != before.label:
        out.append(f"the debug launch failed otherwise: {after.label}, where the command was {before.label}")
    elif not sharper and after.evidence and before.evidence and after.evidence.text == before.evidence.text:
        out.append("the same deciding line with and without the settings: does the server read them?")
    return out


def seen(record: AttemptRecord) -> Seen:
    """A launch as debug.json keeps it."""
    line = record.evidence.text if record.evidence else (record.reason or None)
    return Seen(
        outcome=record.outcome,
        failure_class=record.failure_class,
        line=line,
        line_no=record.evidence.line_no if record.evidence else None,
        cause=record.cause,
        attempt=record.attempt,
        signature=record.signature,
    )


def detect_server(log: Path, signatures: tuple[Signature, ...]) -> str | None:
    """The server a log's markers name, where the command did not."""
    from diagbench.logs.classify import classify_file

    if not log.is_file():
        return None
    try:
        return classify_file(log, signatures).server
    except UserError:  # a log that cannot be read names no server
        return None


def _shown(launch: Launch) -> str:
    from diagbench.isolate.factors import Config, shown_command

    return shown_command(Config(launch.argv, launch.env, {}))
