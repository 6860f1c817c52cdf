"""`diagbench triage` and `diagbench remedies`: from one failing command line to the cheapest launch that works."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from diagbench.cli.app import app, be_quiet, err, guarded, live, out, say_note, show, write_run_html
from diagbench.cli.conventions import SEARCH_EXITS, exit_codes
from diagbench.cli.searches import finish, search_under_signals, with_launch_rules
from diagbench.vocab import TextOrJson

if TYPE_CHECKING:
    from diagbench.debug.sets import DebugCatalogue
    from diagbench.isolate.problem import ServerRules

__all__ = ["TRIAGE_EXIT_CODES", "list_remedies", "triage"]

TRIAGE_EXIT_CODES = exit_codes(
    {
        0: "a working launch found (or the command comes up as it is)",
        1: "none found, or no remedy is known for the failure",
    }
    | SEARCH_EXITS
)


@app.command(epilog=TRIAGE_EXIT_CODES)
@with_launch_rules
def triage(
    command: Annotated[str, typer.Argument(metavar="CMD", help="the failing command line, with {port}")],
    server: Annotated[
        str | None, typer.Option(help="the server (vllm, sglang, ...; default: from CMD or its log)")
    ] = None,
    first: Annotated[bool, typer.Option("--first", help="stop at the first remedy that comes up")] = False,
    price: Annotated[
        int, typer.Option(min=0, metavar="N", help="send N requests to each launch that comes up, and measure")
    ] = 0,
    remedies: Annotated[
        list[Path] | None,
        typer.Option(metavar="FILE", help="a remedies file that adds to or overrides the built-in ones"),
    ] = None,
    repeat: Annotated[int, typer.Option(min=1, help="launches per remedy; disagreeing ones are flaky")] = 1,
    parallel: Annotated[
        int | None, typer.Option(min=1, help="launches at once (default: one per GPU slot, else 1)")
    ] = None,
    gpus: Annotated[str | None, typer.Option(help="GPUs to hand out: all, none, or ids such as 0,1,2,3")] = None,
    runs_dir: Annotated[Path, typer.Option(help="where run directories go")] = Path("runs"),
    run_id: Annotated[str | None, typer.Option(help="default: a timestamp plus 'triage'")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="print triage.json")] = False,
    quiet: Annotated[
        bool, typer.Option("--quiet", "-q", help="only the final tables and the exit code (for CI logs)")
    ] = False,
    debug: Annotated[
        bool, typer.Option("--debug", help="first launch it once more with the debug settings its failure calls for")
    ] = False,
    debug_sets: Annotated[
        list[Path] | None, typer.Option(metavar="FILE", help="with --debug: a debug-set file to add")
    ] = None,
    sanitizer: Annotated[
        bool, typer.Option("--sanitizer", help="with --debug: also under a tool a set names (compute-sanitizer)")
    ] = False,
    *,
    rules: ServerRules,  # --ready, --http, --signatures, --timeout, --grace, --fresh-caches (cli/searches.py)
) -> None:
    """Launch a failing command, then the remedies known for its failure; recommend the cheapest that works."""
    be_quiet(quiet)
    from diagbench.render.triage import TriageProgress, triage_as
    from diagbench.spec.gpus import gpu_request_option
    from diagbench.triage.problem import from_command
    from diagbench.triage.run import TriageOptions, triage_slots
    from diagbench.triage.run import triage as run_triage

    problem = guarded(lambda: from_command(command, server, rules, remedies or [], price, Path.cwd()))
    request = guarded(lambda: gpu_request_option(gpus)) if gpus is not None else None
    options = TriageOptions(runs_dir, run_id, repeat, parallel, request, first)
    if debug or debug_sets or sanitizer:
        options = dataclasses.replace(
            options, debug=guarded(lambda: _debug_sets(debug, debug_sets or [])), sanitizer=sanitizer
        )
    slots = guarded(lambda: triage_slots(problem, options))
    for note in slots.notes:
        say_note(note)
    options = dataclasses.replace(options, slots=slots)
    console = live(err if as_json else out)
    result = search_under_signals(
        lambda: TriageProgress(console), lambda progress, cancel: run_triage(problem, options, progress, cancel)
    )
    write_run_html(result.run_dir.path, problem.spec, triage=result.triage)
    finish(triage_as(result.triage, TextOrJson.of(as_json), out.width), result.triage, result)


def _debug_sets(debug: bool, files: list[Path]) -> DebugCatalogue:
    from diagbench.debug.sets import load_sets
    from diagbench.errors import UserError

    if not debug:
        raise UserError("--debug-sets and --sanitizer go with --debug (add --debug)")
    return load_sets(files)


@app.command("remedies")
def list_remedies(
    server: Annotated[str | None, typer.Option(help="only this server's (vllm, sglang, ...)")] = None,
    failure_class: Annotated[
        str | None, typer.Option("--class", metavar="C", help="only those for this failure class or signature id")
    ] = None,
    remedies: Annotated[list[Path] | None, typer.Option(metavar="FILE", help="a remedies file to add")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="one JSON list")] = False,
) -> None:
    """List the remedies triage knows, with what each gives up and where the advice comes from."""
    from diagbench.render.triage import remedies_as
    from diagbench.triage.remedies import select_remedies

    chosen = guarded(lambda: select_remedies(server, failure_class, remedies or []))
    show(remedies_as(chosen, TextOrJson.of(as_json)))
