"""`diagbench logs RUN [ATTEMPT] [--tail N]`: a finished run's server logs, secrets blanked."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from diagbench.cli.app import app, guarded, write_out

__all__ = ["logs"]


@app.command()
def logs(
    run_dir: Annotated[Path, typer.Argument(metavar="RUN", help="a run directory, e.g. runs/latest")],
    attempt: Annotated[
        str | None, typer.Argument(metavar="ATTEMPT", help="one attempt's folder name, or its start (001)")
    ] = None,
    tail: Annotated[int | None, typer.Option(min=1, metavar="N", help="only the last N lines of each log")] = None,
) -> None:
    """Print a run's server logs (every attempt's, or one), the secrets the run knows blanked."""
    from diagbench.reports.serverlogs import logs_text, run_logs

    found = guarded(lambda: run_logs(run_dir, attempt))
    for piece in logs_text(found, tail):
        write_out(piece)
