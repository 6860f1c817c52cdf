"""The matrix as a grid: which axes go down the rows and which across, and what each cell holds.

Pure layout, shared by the HTML report and its diff: no markup here.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from itertools import combinations

from diagbench.records.manifest import PlannedEntry
from diagbench.records.record import AttemptRecord

__all__ = ["MAX_COLUMNS", "Grid", "GridCell", "build_grid", "spans", "split_axes"]

MAX_COLUMNS = 8  # wider grids stop reading as a grid on a laptop screen


@dataclass(frozen=True)
class GridCell:
    """One cell of the matrix: its id, and how its attempts ended (label -> count)."""

    cell_id: str
    attempts: tuple[str, ...]  # planned attempt folders, in order
    counts: tuple[tuple[str, int], ...]  # (label, count), most frequent first
    outcomes: tuple[tuple[str, int], ...]  # (outcome word, count): what colours the cell

    @property
    def recorded(self) -> int:
        return sum(n for _, n in self.counts)


@dataclass(frozen=True)
class Grid:
    row_axes: tuple[str, ...]
    col_axes: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...]  # label tuples, in the order the labels were written
    cols: tuple[tuple[str, ...], ...]
    cells: Mapping[tuple[tuple[str, ...], tuple[str, ...]], GridCell]  # (row, col) -> cell; absent: not in the run
    constants: tuple[tuple[str, str], ...] = ()  # axes with one label in this run: said once, not drawn


def split_axes(levels: Mapping[str, Sequence[str]]) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """Rows and columns: the split closest to square with at most MAX_COLUMNS columns,
    preferring the last axes as columns (as written); one axis reads best as rows."""
    names = list(levels)
    if len(names) < 2:
        return tuple(names), ()
    best: tuple[tuple[float, bool, tuple[int, ...]], tuple[int, ...]] | None = None
    counts = [len(levels[n]) for n in names]
    total = math.prod(counts)
    narrowest = sorted(counts)
    for size in range(1, len(names)):
        if math.prod(narrowest[:size]) > MAX_COLUMNS:
            break  # every split with this many column axes (or more) is too wide: never 2^n splits
        for cols in combinations(range(len(names)), size):
            width = math.prod(counts[i] for i in cols)
            if width > MAX_COLUMNS:
                continue
            height = total // width  # the product of the other axes' label counts
            suffix = cols == tuple(range(len(names) - size, len(names)))
            score = (abs(math.log(height) - math.log(width)), not suffix, tuple(-i for i in cols))
            if best is None or score < best[0]:
                best = (score, cols)
    chosen = best[1] if best else (len(names) - 1,)
    return tuple(n for i, n in enumerate(names) if i not in chosen), tuple(names[i] for i in chosen)


def build_grid(planned: Sequence[PlannedEntry], records: Sequence[AttemptRecord]) -> Grid:
    """The grid of the planned cells (manifest `attempts`), filled from the records."""
    levels: dict[str, list[str]] = {}
    by_cell: dict[str, tuple[dict[str, str], list[str]]] = {}
    recorded = {r.cell_id: r.params for r in records}
    for attempt in planned:
        params = dict(attempt.params or recorded.get(attempt.cell_id, {}))
        for axis, label in params.items():
            if label not in levels.setdefault(axis, []):
                levels[axis].append(label)
        by_cell.setdefault(attempt.cell_id, (params, []))[1].append(attempt.attempt)
    constants = tuple((a, labels[0]) for a, labels in levels.items() if len(labels) == 1)
    varying = {a: labels for a, labels in levels.items() if len(labels) > 1} or dict(list(levels.items())[:1])
    row_axes, col_axes = split_axes(varying)
    cells = {}
    for cell_id, (params, attempts) in by_cell.items():
        key = (tuple(params.get(a, "") for a in row_axes), tuple(params.get(a, "") for a in col_axes))
        cells[key] = _cell(cell_id, attempts, [r for r in records if r.cell_id == cell_id])
    present_rows = {key[0] for key in cells}
    present_cols = {key[1] for key in cells}
    return Grid(
        row_axes,
        col_axes,
        _in_axis_order(present_rows, [levels[a] for a in row_axes]),
        _in_axis_order(present_cols, [levels[a] for a in col_axes]),
        cells,
        tuple(c for c in constants if c[0] not in row_axes),
    )


def _in_axis_order(present: set[tuple[str, ...]], labels: Sequence[list[str]]) -> tuple[tuple[str, ...], ...]:
    """The tuples present, in the order the product of the axes' labels would list them,
    without listing that product (2^n rows for n factors of an isolation)."""
    rank = [{label: i for i, label in enumerate(axis)} for axis in labels]
    listed = [row for row in present if all(label in rank[i] for i, label in enumerate(row))]
    return tuple(sorted(listed, key=lambda row: tuple(rank[i][label] for i, label in enumerate(row))))


def _cell(cell_id: str, attempts: list[str], records: list[AttemptRecord]) -> GridCell:
    labels = Counter(r.label for r in records)
    outcomes = Counter(r.outcome.value for r in records)
    return GridCell(cell_id, tuple(attempts), tuple(labels.most_common()), tuple(outcomes.most_common()))


def spans(labels: Sequence[tuple[str, ...]], level: int) -> list[tuple[str, int]]:
    """Header runs at one level: consecutive tuples sharing their first `level + 1` labels
    merge into one header cell (label, how many it spans)."""
    out: list[tuple[str, int]] = []
    previous: tuple[str, ...] | None = None
    for labels_here in labels:
        prefix = labels_here[: level + 1]
        if prefix == previous:
            out[-1] = (out[-1][0], out[-1][1] + 1)
        else:
            out.append((labels_here[level], 1))
        previous = prefix
    return out
