"""`diagbench limit`: the largest (or smallest) value of an option or variable at which a command still comes up."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, NoReturn

import typer

from diagbench.cli.app import app, err, guarded, out, write_run_html
from diagbench.cli.conventions import SEARCH_EXITS, exit_codes
from diagbench.cli.executor_options import with_executor_options
from diagbench.cli.searches import finish, search_under_signals, with_launch_rules
from diagbench.errors import UserError
from diagbench.vocab import TextOrJson

if TYPE_CHECKING:
    from diagbench.isolate.problem import ServerRules
    from diagbench.limit.launches import LaunchOptions
    from diagbench.spec.executor import ExecutorSpec
    from diagbench.spec.load import Spec

__all__ = ["LIMIT_EXIT_CODES", "launch_options", "limit"]

LIMIT_EXIT_CODES = exit_codes(
    {0: "a value that comes up was found (the limit)", 1: "nothing in the range came up, or a launch decided nothing"}
    | SEARCH_EXITS
)


@app.command(epilog=LIMIT_EXIT_CODES)
@with_executor_options
@with_launch_rules
def limit(
    command: Annotated[str, typer.Argument(metavar="CMD", help="the command line, with {port}")],
    vary: Annotated[
        list[str] | None,
        typer.Option(metavar="OPT=LO..HI", help="the option to vary, and its range (e.g. --cuda-graph-max-bs=1..64)"),
    ] = None,
    vary_env: Annotated[
        list[str] | None,
        typer.Option(metavar="NAME=LO..HI", help="the variable to vary instead, and its range"),
    ] = None,
    smallest: Annotated[
        bool, typer.Option("--smallest", help="the smallest value that comes up (default: the largest)")
    ] = False,
    repeat: Annotated[
        int, typer.Option(min=1, metavar="N", help="launches per value; a value that disagrees is flaky")
    ] = 1,
    price: Annotated[
        int, typer.Option(min=0, metavar="N", help="send N requests to each launch that comes up, and measure")
    ] = 0,
    server: Annotated[
        str | None, typer.Option(help="the server (vllm, sglang, ...; default: from CMD); --price sends its request")
    ] = None,
    parallel: Annotated[
        int | None,
        typer.Option(min=1, metavar="N", help="launches at once, of one value's repeats (default: one per GPU slot)"),
    ] = None,
    gpus: Annotated[str | None, typer.Option(help="GPUs to hand out: all, none, or ids such as 0,1,2,3")] = None,
    where: ExecutorSpec | None = None,  # --executor and each executor's options (cli/executor_options.py)
    runs_dir: Annotated[Path, typer.Option(help="where run directories go")] = Path("runs"),
    run_id: Annotated[str | None, typer.Option(help="default: a timestamp plus 'limit'")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="print limit.json")] = False,
    *,
    rules: ServerRules,  # --ready, --http, --signatures, --timeout, --grace, --fresh-caches (cli/searches.py)
) -> None:
    """Find the largest (or smallest) value of an option or variable at which CMD still comes up, by bisection."""
    from diagbench.limit.problem import LimitRequest, from_command
    from diagbench.limit.run import find_limit
    from diagbench.limit.search import budget
    from diagbench.render.limit import LimitProgress, limit_as

    given = LimitRequest(command, vary or [], vary_env or [], smallest, server, price)
    problem = guarded(lambda: from_command(given, rules, Path.cwd()))
    options = launch_options(problem.spec, where, runs_dir, run_id, repeat, parallel, gpus)
    console = err if as_json else out
    most = budget(problem.lo, problem.hi) * repeat
    console.print(f"{problem.knob.name} from {problem.lo} to {problem.hi}: at most {most} launches", markup=False)
    result = search_under_signals(
        lambda: LimitProgress(console), lambda progress, cancel: find_limit(problem, options, progress, cancel)
    )
    write_run_html(result.run_dir.path, problem.spec, limit=result.limit)
    finish(limit_as(result.limit, TextOrJson.of(as_json), out.width), result.limit, result)


def launch_options(
    spec: Spec,
    where: ExecutorSpec | None,
    runs_dir: Path,
    run_id: str | None,
    repeat: int,
    parallel: int | None,
    gpus: str | None,
) -> LaunchOptions:
    """Where and how the launches run: this host's slots (notes said), through the chosen executor."""
    from diagbench.execute.choice import requested
    from diagbench.execute.executors import plugin_for
    from diagbench.limit.launches import LaunchOptions
    from diagbench.spec.executor import ExecutorSpec
    from diagbench.spec.gpus import gpu_request_option

    layers = guarded(lambda: requested(spec, where or ExecutorSpec(), None))
    if not plugin_for(layers.resolved_kind).on_this_host:
        guarded(lambda: _elsewhere(layers.resolved_kind))
    request = guarded(lambda: gpu_request_option(gpus)) if gpus is not None else None
    options = LaunchOptions(runs_dir, run_id, repeat, parallel, request, executor=layers)
    slots = guarded(lambda: plugin_for(layers.resolved_kind).slots(spec, None, request, parallel, repeat))
    for note in slots.notes:
        err.print(f"diagbench: note: {note}", markup=False)
    return dataclasses.replace(options, slots=slots)


def _elsewhere(kind: str) -> NoReturn:
    raise UserError(
        f"--executor {kind}: limit and debug launch on this host (each launch is made as the search goes, and a "
        f"{kind} job reads its cell from a spec file): run them on the node, or make the values a spec's axis "
        "and use diagbench run"
    )
