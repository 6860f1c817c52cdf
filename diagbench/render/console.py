"""The two consoles every command writes to: results on stdout, messages on stderr."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rich.console import Console


def stdout_console() -> Console:
    """Results. Off a terminal (a CI log) tables are wide so lines stay unbroken."""
    from rich.console import Console

    console = Console(highlight=False)
    if not console.is_terminal and not os.environ.get("COLUMNS"):  # unset or empty
        return Console(highlight=False, width=160)
    return console


def stderr_console() -> Console:
    """Messages: one message, one line."""
    from rich.console import Console

    return Console(stderr=True, highlight=False, soft_wrap=True)


class _Lazy:
    """A console made on first use: rich costs start-up time that `classify --json` and
    `--help` never need."""

    def __init__(self, stream: str):
        self._stream = stream
        self._console: Console | None = None

    def __getattr__(self, name: str) -> Any:
        return getattr(self._made(), name)

    # `with console:` (rich's Live, each refresh) looks these up on the type, never through __getattr__
    def __enter__(self) -> Console:
        return self._made().__enter__()

    def __exit__(self, *exc: Any) -> None:
        self._made().__exit__(*exc)

    def _made(self) -> Console:
        if self._console is None:
            self._console = stdout_console() if self._stream == "stdout" else stderr_console()
        return self._console


def lazy_console(stream: str) -> Console:
    """`stdout_console()` or `stderr_console()`, made when first used."""
    return _Lazy(stream)  # type: ignore[return-value]  # a Console in all but its making
