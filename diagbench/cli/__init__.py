"""The command line: parse, call one core function, render, exit. Nothing else.

Each command lives in the module named for what it does; importing them registers them."""

from __future__ import annotations

from diagbench.cli import (  # noqa: F401  (registers the commands)
    cleanup,
    inspect,
    isolate,
    probe,
    run,
    schema,
    triage,
    worker,
)
from diagbench.cli.app import app


def main() -> None:
    app()
