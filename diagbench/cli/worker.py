"""`diagbench worker [--kind KIND] RUN_DIR ATTEMPT` (hidden): what a cluster's job runs on its
node, dispatched to the worker of the kind's plugin (execute/executors.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from diagbench.cli.app import app, guarded, out

__all__ = ["worker"]


@app.command(hidden=True)
def worker(
    run_dir: Annotated[Path, typer.Argument(help="the run directory, as the controller wrote it (shared)")],
    attempt: Annotated[str, typer.Argument(help="the attempt's folder name under cells/")],
    kind: Annotated[
        str | None, typer.Option(help="the executor whose job this is (default: the run's, from its manifest)")
    ] = None,
) -> None:
    """Run one attempt of a run on this node and write its record (started by the job)."""
    from diagbench.execute.executors import run_worker

    record = guarded(lambda: run_worker(kind or _run_kind(run_dir), run_dir, attempt))
    out.print(f"{attempt}: {record.label} ({record.reason or 'see server.log'})", markup=False)


def _run_kind(run_dir: Path) -> str:
    """The executor the run was started with (a job script from before `--kind` runs without it)."""
    from diagbench.errors import RecordError, UserError
    from diagbench.records.store import read_manifest

    try:
        kind = read_manifest(run_dir).settings.executor_kind
    except (RecordError, ValueError) as exc:
        raise UserError(f"{run_dir}: its manifest cannot say which executor runs it ({exc}); give --kind") from None
    if kind is None:
        raise UserError(f"{run_dir}: its manifest names no executor; give --kind")
    return kind
