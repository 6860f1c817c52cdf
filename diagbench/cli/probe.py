"""`diagbench probe`: one launch, as an exit code `git bisect run` understands."""

from __future__ import annotations

import traceback
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, NoReturn, TypeVar

import typer

from diagbench.cli.app import app, err, out
from diagbench.cli.conventions import complete_only
from diagbench.errors import UserError
from diagbench.render.text import visible
from diagbench.vocab import ExitCode

if TYPE_CHECKING:
    from diagbench.spec.load import Spec

__all__ = ["probe"]

_EXITS = (
    "\b\nExit codes (for `git bisect run`): 0 it came up; 1 it showed the target failure; "
    "125 anything else, a mistake in the command line included (git bisect skips the revision); "
    "130 interrupted (git bisect stops)."
)
_SKIP = 125
T = TypeVar("T")


@app.command(epilog=_EXITS)
def probe(
    spec: Annotated[str, typer.Argument(metavar="SPEC|CMD", help="a spec (with --only), or one command line")],
    only: Annotated[
        list[str] | None,
        typer.Option(metavar="AXIS=LABEL,...", autocompletion=complete_only, help="the spec's one cell to launch"),
    ] = None,
    target: Annotated[
        str | None, typer.Option(metavar="OUTCOME[:CLASS]", help="the failure that exits 1 (default: any failure)")
    ] = None,
    env: Annotated[list[str] | None, typer.Option(help="NAME=VALUE set for the command line's launch")] = None,
    ready: Annotated[str | None, typer.Option(help="regex of the ready line (default: the packs')")] = None,
    http: Annotated[str | None, typer.Option(help="ready when GET 127.0.0.1:{port}PATH answers 200")] = None,
    signatures: Annotated[str | None, typer.Option(help="packs or files, comma-separated (default: all)")] = None,
    timeout: Annotated[str | None, typer.Option(help="launch -> ready, e.g. 8m (default 10m)")] = None,
    grace: Annotated[str | None, typer.Option(help="SIGTERM -> SIGKILL (default 10s)")] = None,
    runs_dir: Annotated[Path, typer.Option(help="where the run directory goes")] = Path("runs"),
    run_id: Annotated[str | None, typer.Option(help="default: a timestamp plus the spec's name")] = None,
) -> None:
    """Launch one configuration and exit 0 (ready), 1 (the target failure) or 125: for git bisect run."""
    from diagbench.execute.cancel import Cancel, stop_on_signals
    from diagbench.execute.events import QuietEvents
    from diagbench.isolate.probe import parse_target
    from diagbench.isolate.probe import probe as run_probe

    wanted = _usage(lambda: parse_target(target))
    loaded = _usage(lambda: _spec(spec, only or [], env or [], ready, http, signatures, timeout, grace))
    cancel = Cancel()
    with stop_on_signals(cancel):
        try:
            result = _usage(lambda: run_probe(loaded, only or [], wanted, runs_dir, run_id, QuietEvents(), cancel))
        except KeyboardInterrupt:
            _stop("interrupted", ExitCode.INTERRUPTED)
    if result.run.interrupted:
        _stop(f"interrupted (the records are in {result.run.run_dir.path})", ExitCode.INTERRUPTED)
    label = result.record.label if result.record is not None else "not launched"
    out.print(visible(f"probe: {label}: {result.why} (exit {result.exit_code})"), markup=False, soft_wrap=True)
    out.print(visible(f"probe: records in {result.run.run_dir.path}"), markup=False, soft_wrap=True)
    raise typer.Exit(result.exit_code)


def _spec(
    given: str,
    only: list[str],
    env: list[str],
    ready: str | None,
    http: str | None,
    signatures: str | None,
    timeout: str | None,
    grace: str | None,
) -> Spec:
    from diagbench.cli.searches import launch_rules
    from diagbench.isolate.probe import command_spec
    from diagbench.spec.load import load_spec

    if given.endswith((".yaml", ".yml")) and Path(given).is_file():
        named = (("--env", env), ("--ready", ready), ("--http", http), ("--signatures", signatures))
        extra = [n for n, v in (*named, ("--timeout", timeout), ("--grace", grace)) if v]
        if extra:
            raise UserError(f"{extra[0]}: only with a command line; with a spec, its server section says it")
        return load_spec(Path(given))
    if only:
        raise UserError(f"--only: {given} is not a spec file (a command line launches as written)")
    rules = launch_rules(ready, http, signatures, timeout, grace)
    return command_spec(given, env, rules, Path.cwd())


def _usage(action: Callable[[], T]) -> T:
    """A mistake (or diagbench's own failure) is 125: git bisect must not read it as the failure (1) it looks for."""
    try:
        return action()
    except UserError as exc:
        for line in exc.lines():
            err.print(f"diagbench: {visible(line)}", markup=False)
        raise typer.Exit(_SKIP) from None
    except KeyboardInterrupt:
        raise
    except Exception as exc:  # diagbench's own bug: said as such, and never a verdict on the revision  # noqa: BLE001
        err.print(f"diagbench failed (a bug in diagbench, not in your server): {type(exc).__name__}: {exc}")
        err.print(traceback.format_exc(), markup=False)
        raise typer.Exit(_SKIP) from None


def _stop(why: str, code: int) -> NoReturn:
    err.print(f"diagbench: {why}", markup=False)
    raise typer.Exit(code)
