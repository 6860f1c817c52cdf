"""`plan`, `report`, `classify`, `signatures`, `diff`: reading specs, runs and logs."""

from __future__ import annotations

import json
import sys
import tempfile
from enum import Enum
from pathlib import Path
from typing import Annotated

import typer

from diagbench.cli.app import Format, app, err, guarded, out
from diagbench.cli.checks import check_launchable, say_problems
from diagbench.render.text import visible
from diagbench.vocab import ExitCode


@app.command()
def plan(
    spec: Annotated[Path, typer.Argument(help="the experiment's YAML spec")],
    only: Annotated[list[str] | None, typer.Option(help="AXIS=LABEL; repeat it to narrow further")] = None,
    gpus: Annotated[str | None, typer.Option(help="GPUs to hand out: all, none, or ids such as 0,1,2,3")] = None,
    parallel: Annotated[int | None, typer.Option(min=1, help="cells launched at once")] = None,
    stop_when_decided: Annotated[bool, typer.Option(help="show the order that decides verdicts soonest")] = False,
    repeat: Annotated[int, typer.Option(min=1, help="launches per cell (for the launch order)")] = 1,
) -> None:
    """Dry run: every cell with its exact argv, env changes, and the hypotheses it decides."""
    from diagbench.execute.slots import resolve_slots
    from diagbench.render.plan import render_plan
    from diagbench.spec.gpus import gpu_request_option
    from diagbench.spec.load import load_spec

    loaded = guarded(lambda: load_spec(spec))
    request = guarded(lambda: gpu_request_option(gpus)) if gpus is not None else None
    slots = guarded(lambda: resolve_slots(loaded, request, parallel))
    for note in slots.notes:
        err.print(f"diagbench: note: {note}", markup=False)
    out.print(visible(guarded(lambda: render_plan(loaded, only or [], slots, stop_when_decided, repeat))), markup=False)
    if guarded(lambda: check_launchable(loaded, only or [], resume=False)):
        raise typer.Exit(ExitCode.USAGE)


@app.command()
def report(
    run_dir: Annotated[Path, typer.Argument(help="a run directory, e.g. runs/latest")],
    format: Annotated[Format, typer.Option("--format", "-f")] = Format.table,
    strict: Annotated[bool, typer.Option(help="exit 1 unless every hypothesis is supported")] = False,
) -> None:
    """Render a finished or partial run from its records alone (no server needed)."""
    from diagbench.isolate.record import read_isolation
    from diagbench.judge.view import exit_code, view_of
    from diagbench.records.store import load_run
    from diagbench.render.isolation import render_isolation
    from diagbench.render.report import render_json, render_junit, render_markdown, render_table

    view = guarded(lambda: view_of(load_run(run_dir)))
    isolation = guarded(lambda: read_isolation(run_dir))
    if isolation is not None and format is Format.table:  # an isolation's steps say more than its cells
        out.print(render_isolation(isolation))
        raise typer.Exit(isolation.status.exit_code)
    if format is Format.table:
        out.print(render_table(view))
    else:
        renderer = {Format.md: render_markdown, Format.json: render_json, Format.junit: render_junit}[format]
        sys.stdout.write(renderer(view))
    say_problems(view)
    raise typer.Exit(exit_code(view, strict))


class Engine(str, Enum):
    auto = "auto"
    hyperscan = "hyperscan"
    re = "re"


@app.command()
def classify(
    logfile: Annotated[Path, typer.Argument(help="a server log, or - to read standard input until the decision")],
    signatures: Annotated[str | None, typer.Option(help="packs or files, comma-separated (default: all)")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="one JSON object (`diagbench schema classify`)")] = False,
    engine: Annotated[Engine, typer.Option(help="the scan engine")] = Engine.auto,
) -> None:
    """Classify an existing log offline, with the same engine as `run`."""
    from diagbench.logs.classify import classify_file, classify_stream, context
    from diagbench.logs.signatures import load_packs
    from diagbench.render.classify import render_classification

    sigs = guarded(lambda: load_packs(_pack_names(signatures), Path.cwd()))
    with tempfile.TemporaryFile() as copy:  # standard input cannot be read twice: the context comes from here
        if str(logfile) == "-":
            result = guarded(lambda: classify_stream(sys.stdin.fileno(), sigs, engine.value, copy))
        else:
            result = guarded(lambda: classify_file(logfile, sigs, engine.value))
        if as_json:
            sys.stdout.write(json.dumps(result.to_json()) + "\n")
            return
        copy.seek(0)
        shown = context(copy if str(logfile) == "-" else logfile, result.line_no) if result.line_no else []
    for line in render_classification(result, shown):
        out.print(line, markup=False, soft_wrap=True)


@app.command("signatures")
def list_signatures(
    signatures: Annotated[str | None, typer.Option(help="packs or files, comma-separated (default: all)")] = None,
) -> None:
    """List the loaded signatures: pack, id, kind, class, priority, pattern."""
    from diagbench.logs.signatures import load_packs
    from diagbench.render.classify import render_signatures

    sigs = guarded(lambda: load_packs(_pack_names(signatures), Path.cwd()))
    out.print(render_signatures(sigs), markup=False)


@app.command()
def diff(
    run_a: Annotated[Path, typer.Argument(help="the earlier run")],
    run_b: Annotated[Path, typer.Argument(help="the later run")],
) -> None:
    """Cells whose outcome or class changed, and hypotheses whose verdict changed."""
    from diagbench.judge.diff import diff_runs
    from diagbench.judge.view import view_of
    from diagbench.records.store import load_run
    from diagbench.render.diff import render_diff

    a = guarded(lambda: view_of(load_run(run_a)))
    b = guarded(lambda: view_of(load_run(run_b)))
    changes = diff_runs(a, b)
    out.print(visible(render_diff(a, b, changes)), markup=False)
    if a.unreadable or b.unreadable:  # a record missing from the comparison: the diff is not to be trusted
        say_problems(a, b)
        raise typer.Exit(ExitCode.USAGE)
    raise typer.Exit(ExitCode.EXPECT_VIOLATED if changes.regressions else ExitCode.OK)


def _pack_names(option: str | None) -> list[str]:
    """--signatures sglang,./mine.yaml; every built-in pack when not given."""
    from diagbench.logs.signatures import builtin_packs

    return [n.strip() for n in option.split(",") if n.strip()] if option else builtin_packs()
