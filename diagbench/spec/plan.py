"""Attempts: each selected cell launched `repeat` times, named for their folder."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from diagbench.spec.matrix import Cell


@dataclass(frozen=True)
class PlannedAttempt:
    cell: Cell
    repeat: int

    @property
    def name(self) -> str:
        return f"{self.cell.index:03d}-{self.cell.slug}-r{self.repeat}"

    @property
    def attempt(self) -> str:  # as a record names it
        return self.name

    @property
    def cell_id(self) -> str:
        return self.cell.id

    @property
    def params(self) -> Mapping[str, str]:
        return self.cell.params


def plan_attempts(cells: Sequence[Cell], repeat: int) -> list[PlannedAttempt]:
    return [PlannedAttempt(cell, r) for cell in cells for r in range(1, repeat + 1)]
