"""`diagbench cleanup`: stop what a diagbench that died left running, and say what."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from diagbench.cli.app import app, err, guarded, out

if TYPE_CHECKING:
    from diagbench.execute.sweep import Sweep, Waiting

__all__ = ["cleanup", "sweep_saying_so"]


@app.command()
def cleanup(
    runs_dir: Annotated[
        Path, typer.Option(metavar="DIR", help="where runs are (default runs/): their unrecorded attempts are recorded")
    ] = Path("runs"),
    envs: Annotated[
        bool, typer.Option("--envs", help="also remove the probe environments package isolations built (their cache)")
    ] = False,
) -> None:
    """Stop processes left by a diagbench that died, record them in its run, remove its temporary folders."""
    from diagbench.render.cleanup import describe_sweep

    sweep = sweep_saying_so("diagbench cleanup", [runs_dir])
    if sweep.empty:
        out.print("nothing to clean up: no process or temporary folder of an ended diagbench here", markup=False)
    for line in describe_sweep(sweep):
        out.print(line, markup=False, highlight=False, soft_wrap=True)  # one finding, one line
    if envs:
        _remove_envs()


def _remove_envs() -> None:
    """The probe-environment cache emptied, but the environments a live diagbench uses (each
    is leased while in use: an isolation's launches keep theirs)."""
    from diagbench.launch.envs import EnvCache

    cache = EnvCache()
    removed, busy = guarded(cache.remove_all)
    out.print(f"removed {len(removed)} probe environment(s) from {cache.root}", markup=False, highlight=False)
    if busy:
        names = ", ".join(p.name for p in busy)
        out.print(f"left {len(busy)} in use by a running diagbench: {names}", markup=False, highlight=False)


def sweep_saying_so(by: str, runs_dirs: Sequence[Path], hurry: threading.Event | None = None) -> Sweep:
    """Sweep the host (and `runs_dirs`); before waiting on a dead run's servers, say so on
    stderr: the wait may last that run's whole grace period."""
    from diagbench.execute.sweep import sweep_host
    from diagbench.render.cleanup import describe_wait

    def waiting(what: Waiting) -> None:
        err.print(f"diagbench: {describe_wait(what)}", markup=False, highlight=False, soft_wrap=True)

    return guarded(lambda: sweep_host(by, hurry, runs_dirs, waiting))
