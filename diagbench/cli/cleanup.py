"""`diagbench cleanup`: stop what a diagbench that died left running, and say what."""

from __future__ import annotations

from diagbench.cli.app import app, guarded, out


@app.command()
def cleanup() -> None:
    """Stop processes left by a diagbench that died, record them in its run, remove its temporary folders."""
    from diagbench.execute.sweep import sweep_host
    from diagbench.render.cleanup import describe_sweep

    sweep = guarded(lambda: sweep_host("diagbench cleanup"))
    if sweep.empty:
        out.print("nothing to clean up: no process or temporary folder of an ended diagbench here", markup=False)
    for line in describe_sweep(sweep):
        out.print(line, markup=False, highlight=False, soft_wrap=True)  # one finding, one line
