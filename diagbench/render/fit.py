"""Tables that fit the terminal, whatever its width (80 columns at least), without breaking a word.

A table is laid out in the first of these ways that fits:

1. one line per row, boxed, every column: the long columns (`flex`: a deciding line, a
   meaning) take the width left, wrapped at words, the deciding line cut with an ellipsis;
2. the same with the low-value columns dropped, the lowest value first (`drop`);
3. the short columns on one aligned line, each long value moved under it on lines of its own.

Only the layout lives here: cell text comes in as `Text`, already made safe by the caller.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

__all__ = ["FLEX_MIN", "INDENT", "MIN_WIDTH", "Column", "fit", "fit_lines", "wrap"]

MIN_WIDTH = 80  # what every table fits into, however narrow the terminal says it is
FLEX_MIN = 28  # a long column narrower than this reads worse than a line of its own
INDENT = "    "
_WORD = re.compile(r"(?:`[^`\n]*`|[^\s`]|`)+")  # a `snippet` in backticks is one word: pasted whole
_CHUNK = re.compile(r"\s+|[^\s,]+,?|,")  # words, and the parts of a cell id after each comma


@dataclass(frozen=True)
class Column:
    """One column: its header and its cells (one per row).

    `drop`: 0 never dropped; the highest is dropped first when the table would not fit.
    `flex`: a long value that takes the width left; `lines` caps it (None: as many as it needs),
    the last line kept ending in an ellipsis."""

    header: str
    cells: Sequence[Text]
    drop: int = 0
    flex: bool = False
    lines: int | None = None

    @property
    def natural(self) -> int:
        widest = max((len(line) for cell in self.cells for line in cell.plain.split("\n")), default=0)
        return max(len(self.header), widest)


def fit(title: str, columns: Sequence[Column], width: int | None, boxed: bool = True) -> RenderableType:
    """`columns` as a table no wider than `width` (at least MIN_WIDTH; None: unbounded); a
    droppable or long column with nothing in it is left out at any width. `boxed=False`: the
    third layout at every width (a table of sentences reads the same in every run)."""
    room = max(width or 10_000, MIN_WIDTH)
    columns = [c for c in columns if not (c.drop or c.flex) or any(cell.plain for cell in c.cells)]  # says nothing
    if not boxed:
        return _stacked(title, _short_fit(columns, room), room)
    kept = list(columns)
    while not _boxed_fits(kept, room):
        droppable = [c for c in kept if c.drop]
        if not droppable:
            return _stacked(title, _short_fit(columns, room), room)
        kept.remove(max(droppable, key=lambda c: c.drop))
    return _boxed(title, kept, room)


def wrap(text: str, width: int, lines: int | None = None) -> list[str]:
    """`text` in lines of at most `width`, broken at spaces or after commas (a cell id's
    `kernel=stock,compile=on`); a word longer than a line is cut with an ellipsis. At most
    `lines` lines, the last one ending in an ellipsis when some text was left out."""
    out: list[str] = []
    line = ""
    for chunk in _CHUNK.findall(text.replace("\n", " ")):
        if chunk.isspace():
            line += " " if line else ""
        elif len(line) + len(chunk) <= width:
            line += chunk
        else:
            if line.strip():
                out.append(line.rstrip())
            line = chunk if len(chunk) <= width else chunk[: width - 1] + "…"
    if line.strip():
        out.append(line.rstrip())
    if lines is not None and len(out) > lines:
        last = out[lines - 1]
        out = [*out[: lines - 1], (last if len(last) < width else last[: width - 1]) + "…"]
    return out or [""]


def _fixed(columns: Sequence[Column]) -> int:
    return sum(c.natural for c in columns if not c.flex) + 3 * len(columns) + 1  # borders and padding


def _boxed_fits(columns: Sequence[Column], room: int) -> bool:
    flex = [c for c in columns if c.flex]
    return _fixed(columns) + sum(min(c.natural, FLEX_MIN) for c in flex) <= room


def _flex_widths(columns: Sequence[Column], room: int) -> dict[int, int]:
    """Each long column its floor (FLEX_MIN, or less if it needs less), then what is left
    shared in proportion to what each still wants."""
    flex = [c for c in columns if c.flex]
    floor = {id(c): min(c.natural, FLEX_MIN) for c in flex}
    left = room - _fixed(columns) - sum(floor.values())
    wanted = sum(c.natural - floor[id(c)] for c in flex)
    if wanted <= left:
        return {id(c): c.natural for c in flex}
    return {id(c): floor[id(c)] + left * (c.natural - floor[id(c)]) // max(wanted, 1) for c in flex}


def _boxed(title: str, columns: Sequence[Column], room: int) -> Table:
    widths = _flex_widths(columns, room)
    table = Table(title=title or None, title_justify="left", expand=False)
    for c in columns:
        table.add_column(c.header, no_wrap=True, overflow="ellipsis", width=widths.get(id(c), c.natural))
    for i in range(len(columns[0].cells) if columns else 0):
        row = []
        for c in columns:
            cell = c.cells[i]
            if c.flex:
                cell = Text("\n".join(wrap(cell.plain, widths[id(c)], c.lines)), style=cell.style)
            row.append(cell)
        table.add_row(*row)
    return table


def _short_fit(columns: Sequence[Column], room: int) -> list[Column]:
    """The columns, the lowest value dropped first, until the short ones fit on one line."""
    kept = list(columns)
    while sum(c.natural + 2 for c in kept if not c.flex) - 2 > room and any(c.drop for c in kept):
        kept.remove(max((c for c in kept if c.drop), key=lambda c: c.drop))
    return kept


def _stacked(title: str, columns: Sequence[Column], room: int) -> RenderableType:
    """The short columns aligned on one line (no box), each long value indented below it."""
    short = [c for c in columns if not c.flex]
    flex = [c for c in columns if c.flex]
    widths = [c.natural for c in short]
    parts: list[RenderableType] = []
    if title:
        parts.append(Text(title, style="italic", no_wrap=True, overflow="ellipsis"))
    parts.append(_line([Text(c.header, style="bold") for c in short], widths, room))
    for i in range(len(columns[0].cells) if columns else 0):
        parts.append(_line([c.cells[i] for c in short], widths, room))
        for c in (c for c in flex if c.cells[i].plain):  # an empty value: no line
            label = f"{c.header}: " if len(flex) > 1 else ""
            body = wrap(label + c.cells[i].plain, room - len(INDENT), c.lines)
            parts.extend(Text(INDENT + line, style=c.cells[i].style, no_wrap=True) for line in body if line)
    return Group(*parts)


def _line(cells: Sequence[Text], widths: Sequence[int], room: int) -> Text:
    line = Text(no_wrap=True, overflow="ellipsis")
    for n, (cell, size) in enumerate(zip(cells, widths, strict=True)):
        if n:
            line.append("  ")
        line.append_text(cell)
        if n < len(cells) - 1:
            line.append(" " * (size - len(cell.plain)))
    if len(line.plain) > room:
        line.truncate(room - 1)
        line.append("…")
    return line


def fit_lines(text: str, width: int | None) -> str:
    """Plain text (a plan, a diff) no wider than `width` where it can be: a long line is
    broken at spaces, its continuation indented under it; a word longer than the line (a
    path, a `snippet` in backticks) stays whole on a line of its own, never cut."""
    room = max(width or 10_000, MIN_WIDTH)
    out: list[str] = []
    for line in text.split("\n"):
        if len(line) <= room:
            out.append(line)
            continue
        first = " " * (len(line) - len(line.lstrip(" ")))
        lead, current = first, ""
        for word in _WORD.findall(line):
            if current and len(lead) + len(current) + 1 + len(word) > room:
                out.append(lead + current)
                lead, current = first + "    ", word
            else:
                current = f"{current} {word}" if current else word
        out.append(lead + current)
    return "\n".join(out)
