"""The command line: parse, call one core function, render, exit. Nothing else.

Each command lives in the module named for what it does (cli/commands.py names it); that
module is imported, registering the command, only when the command is used or listed.
`classify --json LOG` runs without typer first (cli/fastpath.py): typer's start-up was a
third of classify's. The typer app itself is `diagbench.cli.app.app`."""

from __future__ import annotations

import sys

__all__ = ["main"]


def main() -> None:
    from diagbench.cli.fastpath import classify_json

    code = classify_json(sys.argv[1:])
    if code is not None:
        from diagbench.render.console import cut_output

        if cut_output("stdout") is None:
            raise SystemExit(code)
    from diagbench.cli.app import app, output_cut_exit

    if code is not None:  # standard output was cut: said in one line, as for any command
        raise SystemExit(output_cut_exit(code))
    try:
        app()
    except SystemExit as done:
        raise SystemExit(output_cut_exit(done.code)) from None
