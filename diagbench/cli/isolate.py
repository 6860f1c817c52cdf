"""`diagbench isolate`: from a launch that comes up and one that fails to the guilty change."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from diagbench.cli.app import app, be_quiet, err, guarded, live, out, say_note, write_run_html
from diagbench.cli.conventions import exit_codes
from diagbench.cli.searches import finish, search_under_signals, with_launch_rules
from diagbench.errors import UserError
from diagbench.vocab import TextOrJson

if TYPE_CHECKING:
    from diagbench.execute.cancel import Cancel
    from diagbench.isolate.packages import BuildReport
    from diagbench.isolate.problem import Problem, ServerRules
    from diagbench.isolate.run import IsolateEvents, IsolateOptions, IsolateResult

__all__ = ["ISOLATE_EXIT_CODES", "isolate"]

ISOLATE_EXIT_CODES = exit_codes(
    {
        0: "the change that breaks the launch found",
        1: "not isolable (flaky or undecided launches hide it)",
        2: "bad usage, a baseline that does not behave (good fails or bad comes up), or a record not written",
        3: "diagbench failed",
        130: "interrupted",
    }
)

_GOOD_HELP = (
    "the launch that comes up: one command line with {port} (leading NAME=value and env -u NAME words set env), "
    "or AXIS=LABEL,..."
)

_DEPS_HELP = (
    "the working environment: an interpreter, a requirements file, or 'pkg==ver ...'; "
    "{python} in the commands runs each probe's own"
)


@app.command(epilog=ISOLATE_EXIT_CODES)
@with_launch_rules
def isolate(
    good: Annotated[str, typer.Option(help=_GOOD_HELP)],
    bad: Annotated[
        str | None, typer.Option(help="the launch that fails, written the same way (with --bad-deps: default --good)")
    ] = None,
    spec: Annotated[Path | None, typer.Argument(help="a spec whose axes --good and --bad name")] = None,
    good_env: Annotated[list[str] | None, typer.Option(help="NAME=VALUE set for the good launch")] = None,
    bad_env: Annotated[list[str] | None, typer.Option(help="NAME=VALUE set for the bad launch")] = None,
    repeat: Annotated[int, typer.Option(min=1, help="launches per configuration; disagreeing ones are flaky")] = 1,
    parallel: Annotated[
        int | None, typer.Option(min=1, help="launches at once (default: one per GPU slot, else 1)")
    ] = None,
    gpus: Annotated[str | None, typer.Option(help="GPUs to hand out: all, none, or ids such as 0,1,2,3")] = None,
    no_gpu_leases: Annotated[
        bool, typer.Option("--no-gpu-leases", help="run even where GPUs cannot be leased (warned)")
    ] = False,
    runs_dir: Annotated[Path, typer.Option(help="where run directories go")] = Path("runs"),
    run_id: Annotated[str | None, typer.Option(help="default: a timestamp plus 'isolate'")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="print isolation.json")] = False,
    quiet: Annotated[
        bool, typer.Option("--quiet", "-q", help="only the final tables and the exit code (for CI logs)")
    ] = False,
    good_deps: Annotated[
        str | None,
        typer.Option(
            metavar="DEPS", help="the working environment: an interpreter, a requirements file, or 'pkg==ver ...'"
        ),
    ] = None,
    between: Annotated[
        str | None,
        typer.Option(metavar="PKG==A..B", help="bisect PKG's published versions from A (good) to B (bad)"),
    ] = None,
    bad_deps: Annotated[
        str | None,
        typer.Option(
            metavar="DEPS",
            help="the failing environment, written the same way; {python} in the commands runs each probe's",
        ),
    ] = None,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="list the factors and both commands; launch nothing")
    ] = False,
    stall: Annotated[
        str | None, typer.Option(metavar="D", help="end a launch with no log line and no CPU/GPU work for D (45s)")
    ] = None,
    good_first: Annotated[
        bool,
        typer.Option(
            "--good-first",
            help="launch the good side beside the bad one, to see it come up (else: where no launch holding it did)",
        ),
    ] = False,
    *,
    rules: ServerRules,  # --ready, --http, --signatures, --timeout, --grace, --fresh-caches (cli/searches.py)
) -> None:
    """Find the change that breaks a launch: delta debugging between a good and a bad launch."""
    be_quiet(quiet)
    from diagbench.execute.slots import lease_notes
    from diagbench.isolate.run import IsolateOptions, isolation_slots
    from diagbench.isolate.run import isolate as run_isolation
    from diagbench.render.isolation import IsolationProgress, isolation_as, render_factors
    from diagbench.spec.gpus import gpu_request_option

    given: dict[str, object] = {"--good-env": good_env, "--bad-env": bad_env, "--ready": rules.ready}
    given |= {"--http": rules.http, "--signatures": rules.signatures, "--fresh-caches": rules.fresh_caches}
    envs = (good_env or [], bad_env or [])
    if between is not None and good_first:
        guarded(_no_good_first)
    if between is not None:
        problem = guarded(lambda: _between(spec, between, good, bad, good_env or [], good_deps, rules, as_json))
    elif good_deps is not None or bad_deps is not None:
        problem = guarded(lambda: _packages(spec, good, bad, envs, (good_deps, bad_deps), rules, as_json))
    else:
        problem = guarded(lambda: _problem(spec, good, _needed(bad), envs, rules, [n for n, v in given.items() if v]))
    problem = guarded(lambda: _with_stall(problem, stall))
    commands = {side: _command(problem, side) for side in ("good", "bad")}
    if dry_run:
        out.print(render_factors(problem.space.factors, commands, problem.space.notes, width=out.width))
        return
    if (envs_cache := getattr(problem.space, "envs", None)) is not None:
        guarded(envs_cache.check)  # a cache diagbench cannot trust to run programs from: said before any launch
    console = live(err if as_json else out)
    console.print(render_factors(problem.space.factors, commands, width=console.width))
    request = guarded(lambda: gpu_request_option(gpus)) if gpus is not None else None
    options = IsolateOptions(runs_dir, run_id, repeat, parallel, request, good_first=good_first)
    slots = guarded(lambda: isolation_slots(problem, options))
    for note in slots.notes:
        say_note(note)
    for note in guarded(lambda: lease_notes(slots, no_gpu_leases)):
        err.print(f"diagbench: {note}", markup=False)
    options = dataclasses.replace(options, slots=slots)
    search = _bisect if between is not None else run_isolation
    result = search_under_signals(
        lambda: IsolationProgress(console, len(problem.space.factors)),
        lambda progress, cancel: search(problem, options, progress, cancel),
    )
    write_run_html(result.run_dir.path, problem.spec, isolation=result.isolation)
    finish(isolation_as(result.isolation, TextOrJson.of(as_json), out.width), result.isolation, result)


def _bisect(problem: Problem, options: IsolateOptions, events: IsolateEvents, cancel: Cancel) -> IsolateResult:
    from diagbench.isolate.between import bisect

    return bisect(problem, options, events, cancel)


def _no_good_first() -> None:
    raise UserError("--good-first: --between launches the good version first anyway (leave --good-first out)")


def _needed(bad: str | None) -> str:
    if bad is None:
        raise UserError("--bad: the launch that fails is needed (only with --bad-deps may it be left out)")
    return bad


def _packages(
    spec: Path | None,
    good: str,
    bad: str | None,
    envs: tuple[list[str], list[str]],
    deps: tuple[str | None, str | None],
    rules: ServerRules,
    as_json: bool,
) -> Problem:
    from diagbench.isolate.packages import from_packages

    if spec is not None:
        raise UserError("--good-deps: with command lines only ({python} in them runs each probe's environment)")
    return from_packages(good, bad, envs, deps, rules, Path.cwd(), _build_report(as_json))


def _between(
    spec: Path | None,
    between: str,
    good: str,
    bad: str | None,
    env: list[str],
    good_deps: str | None,
    rules: ServerRules,
    as_json: bool,
) -> Problem:
    from diagbench.isolate.between import from_between

    if spec is not None or bad is not None:
        raise UserError(f"--between: with --good CMD only (not {'a spec' if spec is not None else '--bad'})")
    return from_between(between, good, env, good_deps, rules, Path.cwd(), _build_report(as_json))


def _build_report(as_json: bool) -> BuildReport:
    from diagbench.render.isolation import build_line

    console = err if as_json else out
    return lambda built: console.print(build_line(built), markup=False, highlight=False, soft_wrap=True)


def _problem(
    spec: Path | None, good: str, bad: str, envs: tuple[list[str], list[str]], rules: ServerRules, given: list[str]
) -> Problem:
    """From a spec's axes, or from two command lines (then the server options are the command line's)."""
    from diagbench.isolate.problem import from_commands, from_spec
    from diagbench.spec.executor import LOCAL
    from diagbench.spec.load import load_spec

    if spec is None:
        return from_commands(good, bad, envs[0], envs[1], rules, Path.cwd())
    extra = [name for name in given if name not in ("--timeout", "--grace")]
    if extra:
        raise UserError(f"{extra[0]}: only with two command lines; with a spec, its server section says it")
    loaded = load_spec(spec)
    if loaded.executor.resolved_kind != LOCAL:
        why = f"the spec's executor: {loaded.executor.resolved_kind} applies to diagbench run"
        err.print(f"diagbench: note: isolate launches on this host ({why})", markup=False)
    return from_spec(loaded, good, bad, rules.timeout, rules.grace)


def _with_stall(problem: Problem, stall: str | None) -> Problem:
    from diagbench.spec.hangopts import with_hang_options

    return dataclasses.replace(problem, spec=with_hang_options(problem.spec, stall, None))


def _command(problem: Problem, side: str) -> str:
    return problem.shown([f.name for f in problem.space.factors] if side == "bad" else [])
