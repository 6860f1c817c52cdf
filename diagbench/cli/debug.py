"""`diagbench debug`: a failing command launched once more with the debug settings its failure calls for."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, NoReturn

import typer

from diagbench.cli.app import app, err, guarded, out, show, write_run_html
from diagbench.cli.executor_options import with_executor_options
from diagbench.vocab import ExitCode, TextOrJson

if TYPE_CHECKING:
    from diagbench.debug.run import DebugResult
    from diagbench.spec.executor import ExecutorSpec

__all__ = ["DEBUG_EXIT_CODES", "debug"]

DEBUG_EXIT_CODES = (
    "\b\nExit codes: 0 the debug launch decided a failure line; 1 it did not (or the command came up, or\n"
    "no debug setting is known for its failure); 2 bad usage; 3 diagbench failed; 130 interrupted.\n"
    "\b\nA debug-set file (--debug-sets): server: NAME|any, sets: [{id, for: [CLASS...], env: {NAME: value},\n"
    "set: {--option: value}, add: [words], wrap: [tool, args] (with --sanitizer), why, finds: [REGEX], source}]."
)


@app.command(epilog=DEBUG_EXIT_CODES)
@with_executor_options
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
    ready: Annotated[str | None, typer.Option(help="regex of the ready line (default: the packs')")] = None,
    http: Annotated[str | None, typer.Option(help="ready when GET 127.0.0.1:{port}PATH answers 200")] = None,
    signatures: Annotated[str | None, typer.Option(help="packs or files, comma-separated (default: all)")] = None,
    timeout: Annotated[str | None, typer.Option(help="launch -> ready, e.g. 8m (default 10m)")] = None,
    grace: Annotated[str | None, typer.Option(help="SIGTERM -> SIGKILL (default 10s)")] = None,
    fresh_caches: Annotated[bool, typer.Option(help="each launch compiles from empty Inductor/Triton caches")] = False,
    gpus: Annotated[str | None, typer.Option(help="GPUs to hand out: all, none, or ids such as 0,1,2,3")] = None,
    where: ExecutorSpec | None = None,  # --executor and each executor's options (cli/executor_options.py)
    runs_dir: Annotated[Path, typer.Option(help="where run directories go")] = Path("runs"),
    run_id: Annotated[str | None, typer.Option(help="default: a timestamp plus 'debug'")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="print debug.json")] = False,
) -> None:
    """Launch a failing command, then once more with the debug settings its failure calls for; show the sharper line."""
    from diagbench.cli.isolate import _rules
    from diagbench.cli.limit import launch_options, sweep_first
    from diagbench.debug.problem import from_command
    from diagbench.debug.run import debug as run_debug
    from diagbench.execute.cancel import Cancel, stop_on_signals
    from diagbench.render.debug import DebugProgress

    rules = guarded(lambda: _rules(ready, http, signatures, timeout, grace, fresh_caches))
    problem = guarded(lambda: from_command(command, server, rules, debug_sets or [], sanitizer, Path.cwd()))
    options = launch_options(problem.spec, where, runs_dir, run_id, 1, None, gpus)
    console = err if as_json else out
    cancel = Cancel()
    with stop_on_signals(cancel):
        sweep_first(cancel)
        progress = DebugProgress(console)
        try:
            result = guarded(lambda: run_debug(problem, options, progress, cancel))
        finally:
            progress.close()
    write_run_html(result.run_dir.path, problem.spec, debug=result.debug)
    _finish(result, as_json)


def _finish(result: DebugResult, as_json: bool) -> NoReturn:
    from diagbench.render.debug import debug_as

    found = result.debug
    show(debug_as(found, TextOrJson.of(as_json)))
    if found.status.exit_code != ExitCode.OK and found.reason:
        err.print(f"diagbench: {found.reason} (the records are in {result.run_dir.path})", markup=False)
    if result.harness_errors:
        for line in result.harness_errors:
            err.print(f"diagbench failed in {line}", markup=False)
        raise typer.Exit(ExitCode.HARNESS)
    raise typer.Exit(found.status.exit_code)
