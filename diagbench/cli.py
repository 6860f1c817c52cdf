"""The command line: parse, call one core function, render, exit. Nothing else."""

from __future__ import annotations

import json
import os
import signal
import sys
import traceback
from collections.abc import Callable
from enum import Enum
from pathlib import Path
from typing import Annotated, NoReturn, TypeVar

import typer
from rich.console import Console

from diagbench import __version__
from diagbench.errors import UserError

EXIT_OK, EXIT_EXPECT, EXIT_USAGE, EXIT_HARNESS, EXIT_INTERRUPTED = 0, 1, 2, 3, 130

app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    rich_markup_mode=None,
    help="Find which factor breaks an inference server's launch.",
)
out = Console(highlight=False)
if not out.is_terminal and "COLUMNS" not in os.environ:
    out = Console(highlight=False, width=160)  # CI logs: wide tables, unbroken lines
err = Console(stderr=True, highlight=False, soft_wrap=True)  # one message, one line
T = TypeVar("T")


class Format(str, Enum):
    table = "table"
    md = "md"
    json = "json"
    junit = "junit"


def guarded(action: Callable[[], T]) -> T:
    """Map diagbench's error tree onto exit codes: one message, no traceback for users."""
    try:
        return action()
    except UserError as exc:
        err.print(f"diagbench: {exc}", markup=False)
        raise typer.Exit(EXIT_USAGE) from None
    except KeyboardInterrupt:
        err.print("diagbench: interrupted", markup=False)
        raise typer.Exit(EXIT_INTERRUPTED) from None
    except Exception as exc:  # anything but a user mistake is diagbench's own bug
        err.print(
            f"diagbench failed (a bug in diagbench, not in your server): {type(exc).__name__}: {exc}", markup=False
        )
        err.print(traceback.format_exc(), markup=False)
        raise typer.Exit(EXIT_HARNESS) from None


def _write_report(path: Path, text: str, mode: str, run: Path) -> None:
    try:
        with path.open(mode, encoding="utf-8") as handle:
            handle.write(text)
    except OSError as exc:
        raise UserError(f"cannot write {path}: {exc.strerror} (the run itself is recorded in {run})") from None


def _sigterm_as_interrupt(_signum: int, _frame: object) -> NoReturn:
    raise KeyboardInterrupt


@app.command()
def run(
    spec: Annotated[Path, typer.Argument(help="the experiment's YAML spec")],
    runs_dir: Annotated[Path, typer.Option(help="where run directories go")] = Path("runs"),
    run_id: Annotated[str | None, typer.Option(help="default: a timestamp plus the spec's name")] = None,
    only: Annotated[list[str] | None, typer.Option(help="AXIS=LABEL; repeat it to narrow further")] = None,
    repeat: Annotated[int, typer.Option(min=1, help="launches per cell")] = 1,
    parallel: Annotated[int, typer.Option(min=1, help="cells launched at once")] = 1,
    strict: Annotated[bool, typer.Option(help="exit 1 unless every hypothesis is supported")] = False,
    junit: Annotated[Path | None, typer.Option(help="also write a JUnit XML report here")] = None,
    resume: Annotated[Path | None, typer.Option(help="finish an interrupted run directory")] = None,
) -> None:
    """Run the matrix: launch every cell, decide each outcome live, judge the hypotheses."""
    from diagbench.execute.pipeline import RunOptions, execute
    from diagbench.judge.view import exit_code, view_of
    from diagbench.records.store import load_run
    from diagbench.render.live import Progress
    from diagbench.render.report import render_junit, render_markdown, render_table
    from diagbench.spec.load import load_spec

    signal.signal(signal.SIGTERM, _sigterm_as_interrupt)
    loaded_spec = guarded(lambda: load_spec(spec))
    progress = Progress(out)
    options = RunOptions(runs_dir, run_id, tuple(only or ()), repeat, parallel, resume)
    try:
        result = guarded(lambda: execute(loaded_spec, options, progress))
    finally:
        progress.close()
    view = guarded(lambda: view_of(load_run(result.run_dir.path)))
    out.print(render_table(view))
    if junit is not None:
        guarded(lambda: _write_report(junit, render_junit(view), "w", view.path))
    summary = os.environ.get("GITHUB_STEP_SUMMARY")
    if summary:
        guarded(lambda: _write_report(Path(summary), render_markdown(view), "a", view.path))
    if result.interrupted:
        err.print("diagbench: interrupted; finished attempts are recorded, the rest are 'cancelled'")
        raise typer.Exit(EXIT_INTERRUPTED)
    if result.harness_errors:
        for line in result.harness_errors:
            err.print(f"diagbench failed in {line}", markup=False)
        raise typer.Exit(EXIT_HARNESS)
    raise typer.Exit(exit_code(view, strict))


@app.command()
def plan(
    spec: Annotated[Path, typer.Argument(help="the experiment's YAML spec")],
    only: Annotated[list[str] | None, typer.Option(help="AXIS=LABEL; repeat it to narrow further")] = None,
) -> None:
    """Dry run: every cell with its exact argv, env changes, and the hypotheses it decides."""
    from diagbench.render.plan import render_plan
    from diagbench.spec.load import load_spec

    loaded = guarded(lambda: load_spec(spec))
    out.print(guarded(lambda: render_plan(loaded, only or [])), markup=False)


@app.command()
def report(
    run_dir: Annotated[Path, typer.Argument(help="a run directory, e.g. runs/latest")],
    format: Annotated[Format, typer.Option("--format", "-f")] = Format.table,
    strict: Annotated[bool, typer.Option(help="exit 1 unless every hypothesis is supported")] = False,
) -> None:
    """Render a finished or partial run from its records alone (no server needed)."""
    from diagbench.judge.view import exit_code, view_of
    from diagbench.records.store import load_run
    from diagbench.render.report import render_json, render_junit, render_markdown, render_table

    view = guarded(lambda: view_of(load_run(run_dir)))
    if format is Format.table:
        out.print(render_table(view))
    else:
        renderer = {Format.md: render_markdown, Format.json: render_json, Format.junit: render_junit}[format]
        sys.stdout.write(renderer(view))
    raise typer.Exit(exit_code(view, strict))


@app.command()
def classify(
    logfile: Annotated[Path, typer.Argument(help="a server log")],
    signatures: Annotated[str | None, typer.Option(help="packs or files, comma-separated (default: all)")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="one JSON object (design.md 3.3)")] = False,
    engine: Annotated[str, typer.Option(help="auto, hyperscan or re")] = "auto",
) -> None:
    """Classify an existing log offline, with the same engine as `run`."""
    from diagbench.logs.classify import classify_file, context
    from diagbench.logs.signatures import load_packs

    sigs = guarded(lambda: load_packs(_pack_names(signatures), Path.cwd()))
    result = guarded(lambda: classify_file(logfile, sigs, engine))
    if as_json:
        sys.stdout.write(json.dumps(result.to_json()) + "\n")
        return
    label = result.outcome + (f":{result.failure_class}" if result.failure_class else "")
    out.print(f"outcome: {label}", markup=False)
    if result.secondary_classes:
        out.print(f"secondary: {', '.join(result.secondary_classes)}", markup=False)
    out.print(f"phase reached: {result.phase or '-'}", markup=False)
    if result.line_no:
        out.print(f"decided by {result.signature} at line {result.line_no}:", markup=False)
        for number, text in context(logfile, result.line_no):
            marker = ">" if number == result.line_no else " "
            out.print(f"{marker} {number:>7} | {text}", markup=False, soft_wrap=True)
    else:
        out.print(f"no ready or failure line in {result.lines} lines", markup=False)


@app.command("signatures")
def list_signatures(
    signatures: Annotated[str | None, typer.Option(help="packs or files, comma-separated (default: all)")] = None,
) -> None:
    """List the loaded signatures: pack, id, kind, class, priority, pattern."""
    from rich.table import Table
    from rich.text import Text

    from diagbench.logs.signatures import load_packs

    sigs = guarded(lambda: load_packs(_pack_names(signatures), Path.cwd()))
    table = Table("pack", "id", "kind", "class", "priority", "pattern")
    for s in sigs:
        row = (s.pack, s.id, s.kind.value, s.failure_class or s.phase or "", str(s.priority), s.pattern)
        table.add_row(*(Text(x) for x in row))  # patterns are full of [brackets]: never markup
    out.print(table, markup=False)


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
    out.print(render_diff(a, b, changes), markup=False)
    raise typer.Exit(EXIT_EXPECT if changes.regressions else EXIT_OK)


def _pack_names(option: str | None) -> list[str]:
    """--signatures sglang,./mine.yaml; every built-in pack when not given."""
    from diagbench.logs.signatures import builtin_packs

    return [n.strip() for n in option.split(",") if n.strip()] if option else builtin_packs()


def _version(value: bool) -> None:
    if value:
        out.print(f"diagbench {__version__}")
        raise typer.Exit()


@app.callback()
def _root(version: Annotated[bool, typer.Option("--version", callback=_version, is_eager=True)] = False) -> None:
    """diagbench: a matrix of launches, live log classification, pre-registered hypotheses."""


def main() -> None:
    app()
