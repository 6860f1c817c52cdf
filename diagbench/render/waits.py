"""What diagbench waits on before a run's first launch (its own helper programs: each
server interpreter asked what it has installed), shown while it lasts: a line that counts
the seconds on a terminal, or one line when it starts and one when it ends (CI logs)."""

from __future__ import annotations

import contextlib
from collections.abc import Sequence

from rich.console import Console
from rich.status import Status

from diagbench.render.text import visible

__all__ = ["HelperLine", "helper_words"]

PLAIN_END_S = 1.0  # off a terminal, a wait this long or more also gets a line when it ends


def helper_words(what: str, pending: Sequence[str], elapsed_s: float, limit_s: float) -> str:
    """`asking the server's interpreter what it has installed: /v/bin/python (12s of at most 60s)`."""
    if not pending:
        return f"{what}: answered after {elapsed_s:.1f}s"
    return f"{what}: {', '.join(pending)} ({elapsed_s:.0f}s of at most {limit_s:.0f}s)"


class HelperLine:
    """The waiting line of one console (never raises: a failing console shows nothing)."""

    def __init__(self, console: Console):
        self.console = console
        self.status: Status | None = None
        self.said = False

    def tell(self, what: str, pending: Sequence[str], elapsed_s: float, limit_s: float) -> None:
        text = visible(helper_words(what, pending, elapsed_s, limit_s))  # paths are the user's: no markup
        with contextlib.suppress(OSError, SystemExit):
            if self.console.is_terminal:
                self._live(text, bool(pending))
            elif pending and not self.said:
                self.said = True
                self.console.print(text, markup=False, highlight=False, soft_wrap=True)
            elif not pending and self.said and elapsed_s >= PLAIN_END_S:
                self.console.print(text, markup=False, highlight=False, soft_wrap=True)

    def _live(self, text: str, pending: bool) -> None:
        if pending and self.status is None:
            self.status = self.console.status(text)
            self.status.start()
        elif pending and self.status is not None:
            self.status.update(text)
        elif self.status is not None:
            self.status.stop()
            self.status = None
            self.console.print(text, markup=False, highlight=False, soft_wrap=True)
