"""`diagbench worker RUN_DIR ATTEMPT` (hidden): what a Slurm job runs on its node."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from diagbench.cli.app import app, guarded, out


@app.command(hidden=True)
def worker(
    run_dir: Annotated[Path, typer.Argument(help="the run directory, as the controller wrote it (shared)")],
    attempt: Annotated[str, typer.Argument(help="the attempt's folder name under cells/")],
) -> None:
    """Run one attempt of a run on this node and write its record (started by the job script)."""
    from diagbench.execute.slurm.worker import run_worker

    record = guarded(lambda: run_worker(run_dir, attempt))
    out.print(f"{attempt}: {record.label} ({record.reason or 'see server.log'})", markup=False)
