"""What a view renders to: a document written as it is, or something shown on the terminal.

Every view has one function that takes its value and a format word (vocab.py: `ReportFormat`,
`DiffFormat`, `TextOrJson`) and `match`es every word with `assert_never` after the last case, so
a format word added without a renderer is an error mypy names, never a silent fallback.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, TypeAlias

if TYPE_CHECKING:
    from rich.console import Console, RenderableType
    from rich.text import Text

__all__ = ["Rendering", "Shown"]


@dataclass(frozen=True)
class Shown:
    """For a person at the terminal: `body` fitted to its width (tables, coloured lines), then
    `lines` printed whole, never cut at its width nor read as markup (a path someone copies, a
    log line)."""

    body: RenderableType | None = None
    lines: tuple[str | Text, ...] = ()

    def print_to(self, console: Console) -> None:
        if self.body is not None:
            console.print(self.body)
        for line in self.lines:
            console.print(line, markup=False, highlight=False, crop=False, soft_wrap=True)


# a str is a document (JSON, Markdown, HTML, JUnit): written to standard output byte for byte
Rendering: TypeAlias = str | Shown
