"""The command-line app and what every command shares: the consoles, the error-to-exit mapping."""

from __future__ import annotations

import traceback
from collections.abc import Callable
from enum import Enum
from pathlib import Path
from typing import Annotated, TypeVar

import typer

from diagbench import __version__
from diagbench.cli.conventions import HELP_OPTIONS, ReadableGroup
from diagbench.errors import UserError
from diagbench.render.console import lazy_console
from diagbench.render.text import visible
from diagbench.vocab import ExitCode

app = typer.Typer(
    cls=ReadableGroup,
    context_settings=HELP_OPTIONS,
    add_completion=True,  # --install-completion / --show-completion for bash, zsh, fish, PowerShell
    no_args_is_help=True,
    rich_markup_mode=None,
    help="Find which factor breaks an inference server's launch.",
)


out = lazy_console("stdout")
err = lazy_console("stderr")
T = TypeVar("T")


class Format(str, Enum):
    table = "table"
    md = "md"
    json = "json"
    junit = "junit"
    html = "html"
    issue = "issue"  # report only: the Markdown a maintainer asks for


def guarded(action: Callable[[], T]) -> T:
    """Map diagbench's error tree onto exit codes: one message, no traceback for users."""
    try:
        return action()
    except UserError as exc:
        for line in exc.lines():
            err.print(f"diagbench: {visible(line)}", markup=False)
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


def write_report(path: Path, text: str, mode: str, run: Path) -> None:
    try:
        with path.open(mode, encoding="utf-8") as handle:
            handle.write(text)
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
