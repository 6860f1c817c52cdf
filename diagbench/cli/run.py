"""`diagbench run`: the matrix, live."""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, NoReturn

import typer

from diagbench.cli.app import app, be_quiet, err, guarded, live, out, say_note
from diagbench.cli.checks import check_launchable, check_writable, say_problems
from diagbench.cli.conventions import EXIT_CODES, complete_only
from diagbench.cli.executor_options import with_executor_options
from diagbench.errors import UserError
from diagbench.vocab import ExitCode

if TYPE_CHECKING:
    from diagbench.execute.cancel import Cancel
    from diagbench.execute.pipeline import RunResult
    from diagbench.execute.resume import RunFlags
    from diagbench.execute.slots import SlotPlan
    from diagbench.spec.executor import ExecutorSpec
    from diagbench.spec.load import Spec

__all__ = ["run"]


@app.command(epilog=EXIT_CODES)
@with_executor_options
def run(
    spec: Annotated[
        Path | None, typer.Argument(metavar="SPEC", help="the experiment's YAML spec (not needed with --resume)")
    ] = None,
    runs_dir: Annotated[Path, typer.Option(metavar="DIR", help="where run directories go")] = Path("runs"),
    run_id: Annotated[str | None, typer.Option(metavar="ID", help="default: a timestamp plus the spec's name")] = None,
    only: Annotated[
        list[str] | None,
        typer.Option(
            metavar="AXIS=LABEL", autocompletion=complete_only, help="run only these cells; repeat it to narrow further"
        ),
    ] = None,
    repeat: Annotated[int | None, typer.Option(min=1, metavar="N", help="launches per cell (default 1)")] = None,
    parallel: Annotated[
        int | None,
        typer.Option(
            min=1, metavar="N", help="cells launched at once (default: one per GPU slot, else 1; on a cluster, all)"
        ),
    ] = None,
    strict: Annotated[bool, typer.Option("--strict", help="exit 1 unless every hypothesis is supported")] = False,
    junit: Annotated[Path | None, typer.Option(metavar="FILE", help="also write a JUnit XML report here")] = None,
    resume: Annotated[
        Path | None,
        typer.Option(
            metavar="RUN",
            help="finish an interrupted run, with the spec and options it was started with "
            "(--gpus, --parallel, --stop-when-decided, --fail-fast given again win)",
        ),
    ] = None,
    gpus: Annotated[
        str | None, typer.Option(metavar="LIST", help="GPUs to hand out: all, none, or ids such as 0,1,2,3")
    ] = None,
    no_gpu_leases: Annotated[
        bool, typer.Option("--no-gpu-leases", help="run even where GPUs cannot be leased (warned)")
    ] = False,
    stop_when_decided: Annotated[
        bool, typer.Option("--stop-when-decided", help="skip attempts that can no longer change a verdict or an expect")
    ] = False,
    fail_fast: Annotated[
        bool, typer.Option("--fail-fast", help="skip every attempt after the first violated expect")
    ] = False,
    where: ExecutorSpec | None = None,  # --executor and each executor's options (cli/executor_options.py)
    stall: Annotated[
        str | None, typer.Option(metavar="D", help="end an attempt with no log line and no CPU/GPU work for D (45s)")
    ] = None,
    stacks: Annotated[
        str | None,
        typer.Option(metavar="on-timeout|always|never", help="when the tree's stacks are taken (default on-timeout)"),
    ] = None,
    failed: Annotated[
        Path | None,
        typer.Option(
            "--failed", metavar="RUN", help="a new run of the cells that did not come up in RUN (its spec, or SPEC)"
        ),
    ] = None,
    quiet: Annotated[
        bool, typer.Option("--quiet", "-q", help="only the final tables and the exit code (for CI logs)")
    ] = False,
) -> None:
    """Run the matrix: launch every cell, decide each outcome live, judge the hypotheses."""
    from diagbench.execute.cancel import Cancel, stop_on_signals
    from diagbench.execute.lint import command_warnings
    from diagbench.execute.pipeline import RunOptions, check_decision_options, execute
    from diagbench.execute.resume import RunFlags
    from diagbench.execute.slots import lease_notes
    from diagbench.records.store import check_run_id
    from diagbench.render.live import Progress
    from diagbench.spec.executor import ExecutorSpec
    from diagbench.spec.gpus import gpu_request_option
    from diagbench.spec.hangopts import with_hang_options

    be_quiet(quiet)
    loaded_spec = guarded(lambda: with_hang_options(_spec_to_run(spec, resume, failed), stall, stacks))
    if failed is not None:
        say_note(f"a new run of the {len(loaded_spec.cells)} cell(s) that did not come up in {failed}")
    for warning in command_warnings(loaded_spec):  # before any launch: the run would record wrong outcomes
        err.print(f"diagbench: warning: {warning}", markup=False, highlight=False)
    if run_id is not None:
        guarded(lambda: check_run_id(run_id))
    if junit is not None:
        guarded(lambda: check_writable(junit, "--junit"))
    guarded(lambda: check_launchable(loaded_spec, only or [], resume is not None))
    request = guarded(lambda: gpu_request_option(gpus)) if gpus is not None else None
    given = RunFlags(tuple(only) if only else None, repeat, parallel, request, stop_when_decided, fail_fast)
    flags = _flags(given, resume)
    if resume is not None:
        _stop_if_finished(resume, loaded_spec)
    for note in guarded(lambda: check_decision_options(loaded_spec, flags.stop_when_decided, flags.fail_fast)):
        say_note(note)
    where = where or ExecutorSpec()
    slots = _slots(loaded_spec, where, resume, flags, gpus is not None)
    for note in guarded(lambda: lease_notes(slots, no_gpu_leases)):
        err.print(f"diagbench: {note}", markup=False)
    options = RunOptions(
        runs_dir,
        run_id,
        flags.only or (),
        flags.repeat or 1,
        flags.parallel,
        resume,
        flags.gpus,
        flags.stop_when_decided,
        flags.fail_fast,
        slots,
        where,
    )
    cancel = Cancel()
    # from here on a signal stops the run in order: diagbench exits only once every server
    # is gone and every record, verdict and table is written (a second one hurries it)
    with stop_on_signals(cancel):
        _sweep_first(resume, runs_dir, cancel)
        progress = Progress(live(out), timeout_s=loaded_spec.server.timeout)
        try:
            result = guarded(lambda: execute(loaded_spec, options, progress, cancel))
        finally:
            progress.close()
        _finish(result, strict, junit, loaded_spec)


def _slots(spec: Spec, where: ExecutorSpec, resume: Path | None, flags: RunFlags, gpus_given: bool) -> SlotPlan:
    """The slots of the executor the run uses (this host's GPU slots for a local run), notes said."""
    from diagbench.execute.choice import requested
    from diagbench.execute.executors import plugin_for

    layers = guarded(lambda: requested(spec, where, resume))
    plugin = plugin_for(layers.resolved_kind)
    notes = guarded(lambda: plugin.notes(spec, layers, where, flags.parallel, gpus_given))  # a cluster: no --gpus
    slots = guarded(lambda: plugin.slots(spec, None, flags.gpus, flags.parallel, 0))
    for note in [*slots.notes, *notes]:
        say_note(note)
    return slots


def _flags(given: RunFlags, resume: Path | None) -> RunFlags:
    """The options given; resuming, each one not given is the interrupted run's own (said so)."""
    from diagbench.execute.resume import resumed_flags

    if resume is None:
        return given
    flags, note = guarded(lambda: resumed_flags(resume, given))
    if note is not None:
        say_note(note)
    return flags


def _sweep_first(resume: Path | None, runs_dir: Path, cancel: Cancel) -> None:
    """Before launching: stop what a diagbench that died left running (never a live one's),
    and record what it left unrecorded. A Ctrl-C meanwhile ends here: nothing opened or launched."""
    from diagbench.cli.cleanup import sweep_saying_so
    from diagbench.render.cleanup import describe_sweep

    by = "diagbench run --resume" if resume else "diagbench run"
    sweep = sweep_saying_so(by, [resume.parent if resume else runs_dir], cancel.urgent)
    for line in describe_sweep(sweep):
        err.print(f"diagbench: {line}", markup=False, highlight=False)  # what it stopped: said even with --quiet
    if cancel.is_set():
        err.print("diagbench: interrupted before the run began: nothing was opened or launched", markup=False)
        raise typer.Exit(ExitCode.INTERRUPTED)


def _finish(result: RunResult, strict: bool, junit: Path | None, spec: Spec) -> NoReturn:
    """The tables, the reports, and the exit code."""
    from diagbench.cli.publish import publish
    from diagbench.judge.view import exit_code, view_of
    from diagbench.records.redact import spec_redactor
    from diagbench.records.store import load_run
    from diagbench.render.report import print_run

    # the tables are rendered from what is on disk, as `diagbench report` would: what the user
    # sees is exactly what was recorded (and a record that failed to write shows as missing)
    view = guarded(lambda: view_of(load_run(result.run_dir.path), spec_redactor(spec)))
    print_run(out, view)
    if result.write_error is not None:
        kept = f"the run stopped; what was written before is kept in {result.run_dir.path}"
        err.print(f"diagbench: {result.write_error}; {kept}", markup=False)
        raise typer.Exit(ExitCode.USAGE)
    publish(view, junit)
    if result.interrupted:
        again = f"diagbench run --resume {shlex.quote(str(result.run_dir.path))}"
        err.print(f"diagbench: interrupted; finished attempts are recorded, the rest are 'cancelled'. Resume: {again}")
        raise typer.Exit(ExitCode.INTERRUPTED)
    if result.harness_errors:
        for line in result.harness_errors:
            err.print(f"diagbench failed in {line}", markup=False)
        raise typer.Exit(ExitCode.HARNESS)
    say_problems(view, expects=True)
    raise typer.Exit(exit_code(view, strict))


def _stop_if_finished(resume: Path, spec: Spec) -> None:
    """A finished run: say so and exit 0, rather than reprint it (its spec checked first)."""
    from diagbench.execute.resume import check_same_spec, nothing_to_resume
    from diagbench.records.store import load_run

    guarded(lambda: check_same_spec(resume, load_run(resume).manifest, spec))
    said = guarded(lambda: nothing_to_resume(resume))
    if said is not None:
        err.print(f"diagbench: {said}", markup=False)
        raise typer.Exit(ExitCode.OK)


def _spec_to_run(spec: Path | None, resume: Path | None, failed: Path | None = None) -> Spec:
    """The spec given, or with --resume alone, the one the run recorded; with --failed RUN, only
    the cells that did not come up in RUN."""
    from diagbench.execute.rerun import failed_spec
    from diagbench.execute.resume import recorded_spec
    from diagbench.spec.load import load_spec

    if failed is not None:
        if resume is not None:
            raise UserError("--failed starts a new run and --resume finishes one: give one of them")
        return failed_spec(failed, load_spec(spec) if spec is not None else recorded_spec(failed, "--failed"))
    if spec is not None:
        return load_spec(spec)
    if resume is not None:
        return recorded_spec(resume)
    raise UserError("give the experiment's spec (diagbench run SPEC), or --resume RUN to finish an interrupted run")
