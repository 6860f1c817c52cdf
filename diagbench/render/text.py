"""Text that came from a server (log lines, reasons, labels) made safe to show on a terminal.

A server's log can hold escape sequences that clear the screen, set the window title or move
the cursor, and bidirectional-override characters that make a line read differently from
what it holds. Before such text reaches a terminal its control characters are shown as
escapes (`\\x1b[2J`), never interpreted.
"""

from __future__ import annotations

import re

# C0 and C1 controls, DEL, zero-width and bidirectional formatting characters
_UNSAFE = re.compile("[\x00-\x1f\x7f-\x9f\u200b-\u200f\u202a-\u202e\u2060-\u2069\ufeff]")


def visible(text: str, keep: str = "\t\n") -> str:
    """`text` with every control or formatting character but those in `keep` written as an escape."""
    return _UNSAFE.sub(lambda m: m.group() if m.group() in keep else _escape(m.group()), text)


def _escape(char: str) -> str:
    code = ord(char)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"
