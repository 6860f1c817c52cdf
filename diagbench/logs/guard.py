"""Patterns that cannot freeze a run: every pattern a user wrote (a spec's `ready.log` and
failures, a pack of their own) runs under a time budget.

Python's `re` backtracks: `(?=a)(a+)+$` against `aaaa...!` takes longer than the universe
has, holding the GIL all along, so neither the timeout, nor Ctrl-C, nor SIGTERM is handled.
The built-in packs are reviewed and tested, so their patterns keep `re`. A user's pattern is
compiled with the `regex` module instead (the same syntax), which lets go of the GIL while it
matches (`concurrent`: signals and the other threads go on) and gives up after `BUDGET_S`
on one search: that line then counts as not matching, and standard error says so, once per
pattern, naming it and the fix.
"""

from __future__ import annotations

import re
import sys
import threading
from typing import TYPE_CHECKING, Union

if TYPE_CHECKING:
    import regex  # imported when a user's pattern is first compiled: start-up stays as it was

__all__ = ["BUDGET_S", "Guarded", "LineMatch", "line_regex", "overrun", "overruns"]

BUDGET_S = 0.25  # per search of one line (or one buffer, for the pure-Python candidate engine)

LineMatch = Union[re.Match[bytes], "regex.Match[bytes]"]

_said: set[str] = set()
_said_lock = threading.Lock()


class Guarded:
    """A compiled user pattern whose every search ends within the budget."""

    def __init__(self, pattern: bytes, name: str, flags: int = 0):
        import regex

        self.name = name
        self.rx = regex.compile(pattern, flags | regex.VERSION0)

    def search(self, buf: bytes | bytearray, pos: int = 0, endpos: int | None = None) -> regex.Match[bytes] | None:
        try:
            return self.rx.search(buf, pos, endpos, timeout=BUDGET_S, concurrent=True)
        except TimeoutError:
            overrun(self.name)
            return None

    def match(self, text: bytes) -> regex.Match[bytes] | None:
        try:
            return self.rx.match(text, timeout=BUDGET_S, concurrent=True)
        except TimeoutError:
            overrun(self.name)
            return None


def line_regex(pattern: bytes, name: str, vetted: bool) -> re.Pattern[bytes] | Guarded:
    """`re` for a built-in pack's pattern, a budgeted `regex` for anyone else's."""
    return re.compile(pattern) if vetted else Guarded(pattern, name)


def overrun(name: str) -> None:
    """Say, once per pattern, that a search gave up."""
    with _said_lock:
        if name in _said:
            return
        _said.add(name)
    sys.stderr.write(
        f"diagbench: warning: pattern {name} took more than {BUDGET_S} s on one line and was given up there "
        "(it backtracks: avoid nested repeats such as (a+)+ and lookarounds before them)\n"
    )


def overruns() -> list[str]:
    """The patterns that gave up at least once in this process."""
    with _said_lock:
        return sorted(_said)
