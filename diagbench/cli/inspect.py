"""`plan`, `report`, `classify`, `signatures`, `diff`: reading specs, runs and logs."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from enum import Enum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from diagbench.cli.app import app, err, guarded, out, show
from diagbench.cli.checks import check_launchable, say_problems
from diagbench.cli.conventions import complete_only
from diagbench.cli.fastpath import CLASSIFY_EXIT
from diagbench.jsonvalue import JSONObject
from diagbench.vocab import DiffFormat, ExitCode, ReportFormat, TextOrJson

if TYPE_CHECKING:
    from diagbench.logs.signatures import Signature
    from diagbench.spec.load import Spec

__all__ = [
    "CLASSIFY_EXIT",
    "CLASSIFY_EXIT_CODES",
    "REPORT_EXIT_CODES",
    "Engine",
    "classify",
    "diff",
    "list_signatures",
    "plan",
    "report",
]


@app.command()
def plan(
    spec: Annotated[Path, typer.Argument(metavar="SPEC", help="the experiment's YAML spec")],
    only: Annotated[
        list[str] | None,
        typer.Option(
            metavar="AXIS=LABEL",
            autocompletion=complete_only,
            help="plan only these cells; repeat it to narrow further",
        ),
    ] = None,
    gpus: Annotated[
        str | None, typer.Option(metavar="LIST", help="GPUs to hand out: all, none, or ids such as 0,1,2,3")
    ] = None,
    parallel: Annotated[int | None, typer.Option(min=1, metavar="N", help="cells launched at once")] = None,
    stop_when_decided: Annotated[
        bool, typer.Option("--stop-when-decided", help="show the order that decides verdicts soonest")
    ] = False,
    repeat: Annotated[int, typer.Option(min=1, metavar="N", help="launches per cell (for the launch order)")] = 1,
    as_json: Annotated[
        bool, typer.Option("--json", help="one JSON object: cells, argv, env, what each decides")
    ] = False,
    environment: Annotated[
        bool, typer.Option("--environment", help="also ask the server's interpreter what it has installed")
    ] = False,
) -> None:
    """Dry run: every cell with its exact argv, env changes, and the hypotheses it decides."""
    from diagbench.execute.dryrun import plan_of
    from diagbench.execute.pipeline import check_decision_options
    from diagbench.execute.slots import resolve_slots
    from diagbench.render.plan import plan_as
    from diagbench.spec.gpus import gpu_request_option
    from diagbench.spec.load import load_spec

    loaded = guarded(lambda: load_spec(spec))
    guarded(lambda: check_decision_options(loaded, stop_when_decided, fail_fast=False))  # as run refuses it
    request = guarded(lambda: gpu_request_option(gpus)) if gpus is not None else None
    slots = guarded(lambda: resolve_slots(loaded, request, parallel))
    for note in slots.notes:
        err.print(f"diagbench: note: {note}", markup=False)
    planned = guarded(lambda: plan_of(loaded, only or [], slots, stop_when_decided, repeat))
    facts = guarded(lambda: _environment(loaded, only or [])) if environment else None
    show(plan_as(planned, TextOrJson.of(as_json), facts, out.width))
    if guarded(lambda: check_launchable(loaded, only or [], resume=False, planning=True)):
        raise typer.Exit(ExitCode.USAGE)


def _environment(spec: Spec, only: list[str]) -> JSONObject | None:
    """The first planned cell's server environment, as `run` will record it."""
    from diagbench.launch.environment import attempt_environments
    from diagbench.render.waits import HelperLine
    from diagbench.spec.matrix import parse_only, select_cells
    from diagbench.spec.plan import plan_attempts

    planned = plan_attempts(select_cells(spec.cells, parse_only(only, spec.axes))[:1], 1)
    return attempt_environments(spec.server, planned, HelperLine(err).tell)[0]


REPORT_EXIT_CODES = (
    "\b\nExit codes: 0 every expect held; 1 an expect was violated, or not checked because the run is\n"
    "partial (with --strict, also a hypothesis not supported); 2 bad usage or an unreadable run directory."
)


@app.command(epilog=REPORT_EXIT_CODES)
def report(
    run_dir: Annotated[Path, typer.Argument(metavar="RUN", help="a run directory, e.g. runs/latest")],
    format: Annotated[
        ReportFormat,
        typer.Option("--format", "-f", metavar="table|md|json|junit|html", help="html: one self-contained page"),
    ] = ReportFormat.TABLE,
    strict: Annotated[bool, typer.Option("--strict", help="exit 1 unless every hypothesis is supported")] = False,
    for_server: Annotated[
        str | None,
        typer.Option("--for", metavar="SERVER", help="with --format issue: the server's tracker (vllm, ...)"),
    ] = None,
) -> None:
    """Render a finished or partial run from its records alone (no server needed)."""
    from diagbench.cli.publish import annotate
    from diagbench.render.reports import render_report
    from diagbench.reports.read import ReportRequest, read_report

    found = guarded(lambda: read_report(ReportRequest(run_dir, format, strict, for_server)))
    show(render_report(found, out.width))
    if found.judged_by_expectations and format is ReportFormat.TABLE:  # the run's own report
        annotate(found.view)
    say_problems(found.view, expects=found.judged_by_expectations)  # an unreadable part, in every format alike
    raise typer.Exit(found.exit_code)


class Engine(str, Enum):
    auto = "auto"
    hyperscan = "hyperscan"
    re = "re"


CLASSIFY_EXIT_CODES = (
    "\b\nExit codes: 0 ready; 1 failed (a failure line decided); 3 unknown (the log decides nothing);"
    " 2 bad usage (a missing or unreadable log)."
)


@app.command(epilog=CLASSIFY_EXIT_CODES)
def classify(
    logfile: Annotated[
        Path, typer.Argument(metavar="LOG", help="a server log, or - to read standard input until the decision")
    ],
    signatures: Annotated[
        str | None, typer.Option(metavar="PACK,...", help="packs or pack files, comma-separated (default: all)")
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="one JSON object (`diagbench schema classify`)")] = False,
    engine: Annotated[Engine, typer.Option(metavar="auto|hyperscan|re", help="the scan engine")] = Engine.auto,
    server: Annotated[
        str | None,
        typer.Option(
            metavar="NAME", help="the server that wrote the log (vllm, sglang, ...): its own ready lines decide"
        ),
    ] = None,
) -> None:
    """Classify an existing log offline, with the same engine as `run`."""
    from diagbench.logs.classify import classify_file, classify_stream, context
    from diagbench.logs.server_names import server_name
    from diagbench.logs.signatures import load_packs
    from diagbench.records.redact import Redactor, redact_classification

    secrets = Redactor.of()  # a log's own secrets are never printed: by name, flag, shape, URL

    given = guarded(lambda: server_name(server)) if server is not None else None
    sigs = guarded(lambda: load_packs(_pack_names(signatures), Path.cwd()))
    if str(logfile) != "-":
        result = redact_classification(guarded(lambda: classify_file(logfile, sigs, engine.value, given)), secrets)
        shown = context(logfile, result.line_no) if result.line_no and not as_json else []
    else:
        import tempfile

        with tempfile.TemporaryFile() as copy:  # standard input cannot be read twice: the context comes from here
            result = guarded(lambda: classify_stream(sys.stdin.fileno(), sigs, engine.value, copy, given))
            result = redact_classification(result, secrets)
            copy.seek(0)
            shown = context(copy, result.line_no) if result.line_no and not as_json else []
    from diagbench.render.classify import classification_as

    shown = [(number, secrets.cut(text)) for number, text in shown]  # clipped at 300 characters
    show(classification_as(result, TextOrJson.of(as_json), shown, given is not None, out.width))
    raise typer.Exit(CLASSIFY_EXIT[result.outcome])


@app.command("signatures")
def list_signatures(
    signatures: Annotated[
        str | None, typer.Option(metavar="PACK,...", help="packs or pack files, comma-separated (default: all)")
    ] = None,
    signature_id: Annotated[
        str | None, typer.Option("--id", metavar="ID", help="show one signature whole, with its source")
    ] = None,
    full: Annotated[bool, typer.Option("--full", help="show every signature whole, with its source")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="a JSON list of every field of each signature")] = False,
) -> None:
    """List the loaded signatures: pack, id, kind, class, priority, pattern."""
    from diagbench.logs.signatures import load_packs
    from diagbench.render.classify import signatures_as

    sigs = guarded(lambda: load_packs(_pack_names(signatures), Path.cwd()))
    if signature_id is not None:
        sigs = [guarded(lambda: _one_signature(sigs, signature_id))]
    show(signatures_as(sigs, TextOrJson.of(as_json), whole=full or signature_id is not None, width=out.width))


@app.command(epilog="\b\nExit codes: 0 no regression; 1 a cell that came up in RUN_A did not in RUN_B; 2 bad usage.")
def diff(
    run_a: Annotated[Path, typer.Argument(metavar="RUN_A", help="the earlier run")],
    run_b: Annotated[Path, typer.Argument(metavar="RUN_B", help="the later run")],
    format: Annotated[
        DiffFormat, typer.Option("--format", "-f", metavar="text|json|html", help="html: one self-contained page")
    ] = DiffFormat.TEXT,
    as_json: Annotated[bool, typer.Option("--json", help="the same as --format json")] = False,
) -> None:
    """Cells whose outcome or class changed, and hypotheses whose verdict changed."""
    from diagbench.judge.diff import diff_runs
    from diagbench.judge.view import view_of
    from diagbench.records.store import load_run
    from diagbench.render.diff import diff_as

    a = guarded(lambda: view_of(load_run(run_a)))
    b = guarded(lambda: view_of(load_run(run_b)))
    changes = diff_runs(a, b)
    show(diff_as(a, b, changes, DiffFormat.JSON if as_json else format, out.width))
    if a.unreadable or b.unreadable:  # a record missing from the comparison: the diff is not to be trusted
        say_problems(a, b)
        raise typer.Exit(ExitCode.USAGE)
    raise typer.Exit(ExitCode.EXPECT_VIOLATED if changes.regressions else ExitCode.OK)


def _one_signature(sigs: Sequence[Signature], wanted: str) -> Signature:
    from diagbench.errors import UserError
    from diagbench.yamlsrc import suggest

    for s in sigs:
        if s.id == wanted:
            return s
    hint = suggest(wanted, [s.id for s in sigs])
    hint = hint if hint.startswith("did you mean") else "`diagbench signatures` lists them"
    raise UserError(f"--id {wanted}: no such signature ({hint})")


def _pack_names(option: str | None) -> list[str]:
    """--signatures sglang,./mine.yaml; every built-in pack when not given."""
    from diagbench.logs.signatures import builtin_packs

    return [n.strip() for n in option.split(",") if n.strip()] if option else builtin_packs()
