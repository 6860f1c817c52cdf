"""`plan`, `report`, `classify`, `signatures`, `diff`: reading specs, runs and logs."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Mapping, Sequence
from enum import Enum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from diagbench.cli.app import Format, app, err, guarded, out, write_out
from diagbench.cli.checks import check_launchable, say_problems
from diagbench.cli.conventions import complete_only
from diagbench.render.text import visible
from diagbench.vocab import ExitCode

if TYPE_CHECKING:
    from diagbench.judge.view import RunView
    from diagbench.logs.signatures import Signature
    from diagbench.spec.load import Spec


class DiffFormat(str, Enum):
    text = "text"
    json = "json"
    html = "html"


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
    from diagbench.render.fit import fit_lines
    from diagbench.render.plan import plan_json, render_plan
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
    if as_json:
        write_out(plan_json(planned, facts))
    else:
        out.print(fit_lines(visible(render_plan(planned, facts)), out.width), markup=False, soft_wrap=True)
    if guarded(lambda: check_launchable(loaded, only or [], resume=False, planning=True)):
        raise typer.Exit(ExitCode.USAGE)


def _environment(spec: Spec, only: list[str]) -> dict[str, Any] | None:
    """The first planned cell's server environment, as `run` will record it."""
    from diagbench.launch.environment import attempt_environments
    from diagbench.spec.matrix import parse_only, select_cells
    from diagbench.spec.plan import plan_attempts

    planned = plan_attempts(select_cells(spec.cells, parse_only(only, spec.axes))[:1], 1)
    return attempt_environments(spec.server, planned)[0]


REPORT_EXIT_CODES = (
    "\b\nExit codes: 0 every expect held; 1 an expect was violated, or not checked because the run is\n"
    "partial (with --strict, also a hypothesis not supported); 2 bad usage or an unreadable run directory."
)


@app.command(epilog=REPORT_EXIT_CODES)
def report(
    run_dir: Annotated[Path, typer.Argument(metavar="RUN", help="a run directory, e.g. runs/latest")],
    format: Annotated[
        Format, typer.Option("--format", "-f", metavar="table|md|json|junit|html", help="html: one self-contained page")
    ] = Format.table,
    strict: Annotated[bool, typer.Option("--strict", help="exit 1 unless every hypothesis is supported")] = False,
    for_server: Annotated[
        str | None,
        typer.Option("--for", metavar="SERVER", help="with --format issue: the server's tracker (vllm, ...)"),
    ] = None,
) -> None:
    """Render a finished or partial run from its records alone (no server needed)."""
    from diagbench.cli.publish import annotate
    from diagbench.isolate.record import read_isolation
    from diagbench.judge.view import exit_code, view_of
    from diagbench.records.store import load_run
    from diagbench.render.html import render_html
    from diagbench.render.isolation import render_isolation
    from diagbench.render.isolation_report import DOCUMENTS
    from diagbench.render.report import print_run, render_json, render_junit, render_markdown

    loaded = guarded(lambda: load_run(run_dir))
    view = guarded(lambda: view_of(loaded))
    if format is Format.issue or for_server is not None:
        _issue(view, loaded.manifest.environment, format, for_server)
    if _triage_report(view, format):
        return
    isolation = guarded(lambda: read_isolation(run_dir))
    if isolation is not None and format is not Format.junit:  # an isolation's answer and steps lead
        if format is Format.table:  # its steps say more than its cells
            out.print(render_isolation(isolation, out.width))
        else:
            write_out(DOCUMENTS[format.value](view, isolation))
        raise typer.Exit(isolation.status.exit_code)
    if format is Format.table:
        print_run(out, view)
        annotate(view)
    else:
        renderers: dict[Format, Callable[[RunView], str]] = {
            Format.md: render_markdown,
            Format.json: render_json,
            Format.junit: render_junit,
        }
        write_out(renderers.get(format, render_html)(view))
    say_problems(view, expects=True)
    raise typer.Exit(exit_code(view, strict))


def _issue(view: RunView, environment: Mapping[str, Any] | None, format: Format, for_server: str | None) -> None:
    """`--format issue [--for SERVER]`: the Markdown for the server's bug tracker; exits 0."""
    from diagbench.render.issue import render_issue
    from diagbench.triage.issue import issue_facts
    from diagbench.triage.problem import server_word
    from diagbench.triage.record import read_triage

    if format is not Format.issue:
        err.print("diagbench: --for names the tracker of --format issue (add --format issue)", markup=False)
        raise typer.Exit(ExitCode.USAGE)
    server = guarded(lambda: server_word("--for", for_server)) if for_server else None
    found = guarded(lambda: read_triage(view.path))
    write_out(render_issue(view, issue_facts(view, environment), found, server))
    raise typer.Exit(ExitCode.OK)


def _triage_report(view: RunView, format: Format) -> bool:
    """A triage's answer leads its report; the exit code is the triage's. False: no triage."""
    from diagbench.render.triage import render_triage, triage_html, triage_json, triage_markdown
    from diagbench.triage.record import read_triage

    found = guarded(lambda: read_triage(view.path))
    if found is None or format is Format.junit:
        return False
    if format is Format.table:
        out.print(render_triage(found))
    else:
        documents = {Format.md: triage_markdown, Format.json: triage_json, Format.html: triage_html}
        write_out(documents[format](view, found))
    raise typer.Exit(found.status.exit_code)


class Engine(str, Enum):
    auto = "auto"
    hyperscan = "hyperscan"
    re = "re"


CLASSIFY_EXIT = {"ready": 0, "failed": 1, "unknown": 3}  # scripts branch on it: `if diagbench classify x.log`
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
        if as_json:
            write_out(json.dumps(result.to_json()) + "\n")
            raise typer.Exit(CLASSIFY_EXIT[result.outcome])
        shown = context(logfile, result.line_no) if result.line_no else []
    else:
        import tempfile

        with tempfile.TemporaryFile() as copy:  # standard input cannot be read twice: the context comes from here
            result = guarded(lambda: classify_stream(sys.stdin.fileno(), sigs, engine.value, copy, given))
            result = redact_classification(result, secrets)
            if as_json:
                write_out(json.dumps(result.to_json()) + "\n")
                raise typer.Exit(CLASSIFY_EXIT[result.outcome])
            copy.seek(0)
            shown = context(copy, result.line_no) if result.line_no else []
    from diagbench.render.classify import render_classification

    shown = [(number, secrets.cut(text)) for number, text in shown]  # clipped at 300 characters
    for line in render_classification(result, shown, given is not None):
        out.print(line, markup=False, soft_wrap=True)
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
    from diagbench.render.classify import render_signature, render_signatures, signature_json

    sigs = guarded(lambda: load_packs(_pack_names(signatures), Path.cwd()))
    if signature_id is not None:
        sigs = [guarded(lambda: _one_signature(sigs, signature_id))]
    if as_json:
        write_out(json.dumps([signature_json(s) for s in sigs], indent=2) + "\n")
    elif full or signature_id is not None:
        for i, s in enumerate(sigs):
            for line in ([""] if i else []) + render_signature(s):
                out.print(line, markup=False, soft_wrap=True)
    else:
        out.print(render_signatures(sigs), markup=False)


@app.command(epilog="\b\nExit codes: 0 no regression; 1 a cell that came up in RUN_A did not in RUN_B; 2 bad usage.")
def diff(
    run_a: Annotated[Path, typer.Argument(metavar="RUN_A", help="the earlier run")],
    run_b: Annotated[Path, typer.Argument(metavar="RUN_B", help="the later run")],
    format: Annotated[
        DiffFormat, typer.Option("--format", "-f", metavar="text|json|html", help="html: one self-contained page")
    ] = DiffFormat.text,
    as_json: Annotated[bool, typer.Option("--json", help="the same as --format json")] = False,
) -> None:
    """Cells whose outcome or class changed, and hypotheses whose verdict changed."""
    from diagbench.judge.diff import diff_runs
    from diagbench.judge.view import view_of
    from diagbench.records.store import load_run
    from diagbench.render.diff import diff_json, render_diff
    from diagbench.render.html_diff import render_diff_html

    a = guarded(lambda: view_of(load_run(run_a)))
    b = guarded(lambda: view_of(load_run(run_b)))
    changes = diff_runs(a, b)
    chosen = DiffFormat.json if as_json else format
    if chosen is DiffFormat.text:
        out.print(visible(render_diff(a, b, changes)), markup=False, soft_wrap=True)
    else:
        write_out((diff_json if chosen is DiffFormat.json else render_diff_html)(a, b, changes))
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
