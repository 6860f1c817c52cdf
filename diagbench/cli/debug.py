"""`diagbench debug`: a failing command launched once more with the debug settings its failure calls for."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from diagbench.cli.app import app, err, guarded, out, write_run_html
from diagbench.cli.conventions import SEARCH_EXITS, exit_codes
from diagbench.cli.executor_options import with_executor_options
from diagbench.cli.searches import finish, search_under_signals, with_launch_rules
from diagbench.vocab import TextOrJson

if TYPE_CHECKING:
    from diagbench.isolate.problem import ServerRules
    from diagbench.spec.executor import ExecutorSpec

__all__ = ["DEBUG_EXIT_CODES", "debug"]

DEBUG_EXIT_CODES = exit_codes(
    {
        0: "the debug launch decided a failure line",
        1: "it did not (or the command came up, or no debug setting is known for its failure)",
    }
    | SEARCH_EXITS,
    more=(
        "A debug-set file (--debug-sets): server: NAME|any, sets: [{id, for: [CLASS...], env: {NAME: value},\n"
        "set: {--option: value}, add: [words], wrap: [tool, args] (with --sanitizer), why, finds: [REGEX], source}]."
    ),
)


@app.command(epilog=DEBUG_EXIT_CODES)
@with_executor_options
@with_launch_rules
def debug(
    command: Annotated[str, typer.Argument(metavar="CMD", help="the failing command line, with {port}")],
    server: Annotated[
        str | None, typer.Option(help="the server (vllm, sglang, ...; default: from CMD or its log)")
    ] = None,
    debug_sets: Annotated[
        list[Path] | None,
        typer.Option(metavar="FILE", help="a debug-set file that adds to or overrides the built-in ones"),
    ] = None,
    sanitizer: Annotated[
        bool,
        typer.Option("--sanitizer", help="also run it under a tool a set names (compute-sanitizer), where installed"),
    ] = False,
    gpus: Annotated[str | None, typer.Option(help="GPUs to hand out: all, none, or ids such as 0,1,2,3")] = None,
    where: ExecutorSpec | None = None,  # --executor and each executor's options (cli/executor_options.py)
    runs_dir: Annotated[Path, typer.Option(help="where run directories go")] = Path("runs"),
    run_id: Annotated[str | None, typer.Option(help="default: a timestamp plus 'debug'")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="print debug.json")] = False,
    *,
    rules: ServerRules,  # --ready, --http, --signatures, --timeout, --grace, --fresh-caches (cli/searches.py)
) -> None:
    """Launch a failing command, then once more with the debug settings its failure calls for; show the sharper line."""
    from diagbench.cli.limit import launch_options
    from diagbench.debug.problem import from_command
    from diagbench.debug.run import debug as run_debug
    from diagbench.render.debug import DebugProgress, debug_as

    problem = guarded(lambda: from_command(command, server, rules, debug_sets or [], sanitizer, Path.cwd()))
    options = launch_options(problem.spec, where, runs_dir, run_id, 1, None, gpus)
    console = err if as_json else out
    result = search_under_signals(
        lambda: DebugProgress(console), lambda progress, cancel: run_debug(problem, options, progress, cancel)
    )
    write_run_html(result.run_dir.path, problem.spec, debug=result.debug)
    finish(debug_as(result.debug, TextOrJson.of(as_json)), result.debug, result)
