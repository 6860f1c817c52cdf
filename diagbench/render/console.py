"""The two consoles every command writes to: results on stdout, messages on stderr."""

from __future__ import annotations

import os

from rich.console import Console


def stdout_console() -> Console:
    """Results. Off a terminal (a CI log) tables are wide so lines stay unbroken."""
    console = Console(highlight=False)
    if not console.is_terminal and not os.environ.get("COLUMNS"):  # unset or empty
        return Console(highlight=False, width=160)
    return console


def stderr_console() -> Console:
    """Messages: one message, one line."""
    return Console(stderr=True, highlight=False, soft_wrap=True)
