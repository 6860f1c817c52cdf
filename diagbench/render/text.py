"""Text that came from a server (log lines, reasons, labels) made safe to show on a terminal.

A server's log can hold escape sequences that clear the screen, set the window title or move
the cursor, and bidirectional-override characters that make a line read differently from
what it holds. Before such text reaches a terminal its control characters are shown as
escapes (`\\x1b[2J`), never interpreted. The policy for every output is diagbench/safetext.py.
"""

from __future__ import annotations

from diagbench.safetext import terminal

__all__ = ["visible"]


def visible(text: str, keep: str = "\t\n") -> str:
    """`text` with every control or formatting character but those in `keep` written as an escape."""
    return terminal(text, keep)
