"""The command line: parse, call one core function, render, exit. Nothing else.

Each command lives in the module named for what it does (cli/commands.py names it); that
module is imported, registering the command, only when the command is used or listed."""

from __future__ import annotations

from diagbench.cli.app import app, output_cut_exit

__all__ = ["app", "main"]


def main() -> None:
    try:
        app()
    except SystemExit as done:
        raise SystemExit(output_cut_exit(done.code)) from None
