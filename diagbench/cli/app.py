"""The command-line app and what every command shares: the consoles, the error-to-exit mapping."""

from __future__ import annotations

import traceback
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, TypeVar

import typer

from diagbench import __version__
from diagbench.cli.commands import LazyCommands, registered_command
from diagbench.cli.conventions import HELP_OPTIONS, ReadableGroup, plain_words
from diagbench.errors import UserError
from diagbench.render.console import cut_output, lazy_console, write_document
from diagbench.render.text import visible
from diagbench.vocab import ExitCode, ReportFormat

if TYPE_CHECKING:
    from diagbench.debug.record import Debug
    from diagbench.isolate.record import Isolation
    from diagbench.limit.record import Limit
    from diagbench.render.formats import Rendering
    from diagbench.spec.load import Spec
    from diagbench.triage.record import Triage

__all__ = [
    "AppGroup",
    "app",
    "be_quiet",
    "err",
    "guarded",
    "live",
    "out",
    "output_cut_exit",
    "say_note",
    "show",
    "write_out",
    "write_report",
    "write_run_html",
]


class AppGroup(ReadableGroup):
    """The app's group: each command's module imported, and the command built, when it is
    first used (cli/commands.py), so that a command starts without what the others need."""

    def __init__(self, **attrs: Any) -> None:
        super().__init__(**attrs)
        self.commands = LazyCommands(self.commands, _build)


def _build(name: str) -> Any:
    command = registered_command(app, name)
    plain_words(command)
    return command


app = typer.Typer(
    cls=AppGroup,
    context_settings=HELP_OPTIONS,
    add_completion=True,  # --install-completion / --show-completion for bash, zsh, fish, PowerShell
    no_args_is_help=True,
    rich_markup_mode=None,
    help="Find which factor breaks an inference server's launch.",
)


out = lazy_console("stdout")
err = lazy_console("stderr")
T = TypeVar("T")
_QUIET: list[bool] = [False]  # --quiet given to this command (one command per process)


def be_quiet(on: bool) -> None:
    """--quiet (run, isolate, triage): no live progress and no notes; the final tables, warnings,
    errors and the exit code as ever."""
    _QUIET[0] = on


def say_note(text: str) -> None:
    """`diagbench: note: TEXT` on standard error, unless --quiet."""
    if not _QUIET[0]:
        err.print(f"diagbench: note: {text}", markup=False, highlight=False)


def live(console: T) -> T:
    """Where live progress goes: `console`, or with --quiet a console that prints nothing."""
    from diagbench.render.console import quiet_console

    return quiet_console(console, _QUIET[0])


def guarded(action: Callable[[], T]) -> T:
    """Map diagbench's error tree onto exit codes: one message, no traceback for users."""
    try:
        return action()
    except UserError as exc:
        from diagbench.records.sink import message  # here: a command that goes well never loads it

        for line in exc.lines():
            err.print(f"diagbench: {visible(message(line))}", markup=False)  # it may quote a file's secret
        raise typer.Exit(ExitCode.USAGE) from None
    except KeyboardInterrupt:
        err.print("diagbench: interrupted", markup=False)
        raise typer.Exit(ExitCode.INTERRUPTED) from None
    except Exception as exc:  # anything but a user mistake is diagbench's own bug  # noqa: BLE001
        err.print(
            f"diagbench failed (a bug in diagbench, not in your server): {type(exc).__name__}: {exc}", markup=False
        )
        err.print(traceback.format_exc(), markup=False)
        raise typer.Exit(ExitCode.HARNESS) from None


write_out = write_document  # a document on standard output, blanked (render/console.py)


def show(rendering: Rendering) -> None:
    """A view on standard output: a document written as it is, or shown at the terminal's width."""
    if isinstance(rendering, str):
        write_out(rendering)
    else:
        rendering.print_to(out)


def output_cut_exit(code: object) -> object:
    """The exit code once the command is done: 2, said in one line, where standard output
    could not be written whole; else `code`."""
    cut = cut_output("stdout")
    if cut is None:
        return code
    err.print(
        f"diagbench: standard output could not be written whole ({cut.strerror or cut}): what it holds is cut; "
        "free some space or write it elsewhere",
        markup=False,
    )
    return ExitCode.USAGE.value


def write_run_html(
    run: Path,
    spec: Spec,
    isolation: Isolation | None = None,
    triage: Triage | None = None,
    limit: Limit | None = None,
    debug: Debug | None = None,
) -> None:
    """report.html in an isolation's, a triage's, a limit's or a debug run's directory, led by
    its answer, as `report` writes it."""
    from diagbench.judge.view import view_of
    from diagbench.records.redact import spec_redactor
    from diagbench.records.store import load_run
    from diagbench.render.reports import report_html
    from diagbench.reports.read import Report, ReportRequest

    view = guarded(lambda: view_of(load_run(run), spec_redactor(spec)))
    page = report_html(Report(ReportRequest(run, ReportFormat.HTML), view, isolation, triage, limit, debug))
    guarded(lambda: write_report(run / "report.html", page, "w", run))


def write_report(path: Path, text: str, mode: str, run: Path) -> None:
    """A report file, blanked as every sink is: in the run directory (report.html) never through
    a link; where the user named it (`--junit`, `$GITHUB_STEP_SUMMARY`) as named."""
    from diagbench.records import sink

    try:
        sink.write_document(path, text, append=mode == "a", follow=not path.is_relative_to(run))
    except OSError as exc:
        raise UserError(f"cannot write {path}: {exc.strerror} (the run itself is recorded in {run})") from None


def _version(value: bool) -> None:
    if value:
        out.print(f"diagbench {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: Annotated[
        bool, typer.Option("--version", callback=_version, is_eager=True, help="print diagbench's version and exit")
    ] = False,
) -> None:
    """diagbench: a matrix of launches, live log classification, pre-registered hypotheses."""
