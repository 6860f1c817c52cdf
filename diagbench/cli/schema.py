"""`diagbench schema NAME`: print a JSON Schema shipped with diagbench."""

from __future__ import annotations

from typing import Annotated

import typer

from diagbench.cli.app import app, guarded, write_out

__all__ = ["schema"]


@app.command()
def schema(
    name: Annotated[
        str, typer.Argument(help="spec, result, verdicts, manifest, classify, isolation, triage, limit or debug")
    ],
) -> None:
    """Print the JSON Schema of a spec or of a record (for editors and validators)."""
    from diagbench.schemas import schema_text

    write_out(guarded(lambda: schema_text(name)))
