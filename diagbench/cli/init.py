"""`diagbench init CMD`: a starting spec for a pasted command line."""

from __future__ import annotations

from typing import Annotated

import typer

from diagbench.cli.app import app, err, guarded, write_out

__all__ = ["init"]


@app.command()
def init(
    command: Annotated[str, typer.Argument(metavar="CMD", help="the launch command, as you would paste it in a shell")],
    server: Annotated[
        str | None, typer.Option(metavar="NAME", help="the server (vllm, sglang, ...); default: guessed from CMD")
    ] = None,
) -> None:
    """Print a starting spec for CMD: its port as {port}, the server's ready rule, a timeout, one factor."""
    from diagbench.spec.scaffold import scaffold_spec

    found = guarded(lambda: scaffold_spec(command, server))
    write_out(found.text)
    for note in found.notes:
        err.print(f"diagbench: note: {note}", markup=False)
