"""Per-cell counts of outcomes over repeats (pure): `ready 2/3 · failed:cuda_graph_capture 1/3`."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

from diagbench.jsonvalue import JSON
from diagbench.records.record import AttemptRecord

__all__ = ["CellCounts", "cell_counts", "repeated"]


@dataclass(frozen=True)
class CellCounts:
    """How a cell's attempts ended: each label with its count, most frequent first."""

    cell_id: str
    counts: tuple[tuple[str, int], ...]  # over the attempts that ran
    not_run: tuple[tuple[str, int], ...]  # skipped, cancelled, internal_error

    @property
    def ran(self) -> int:
        return sum(n for _, n in self.counts)

    @property
    def flaky(self) -> bool:
        """The cell disagreed with itself: its attempts ended in more than one way."""
        return len(self.counts) > 1

    def __str__(self) -> str:
        shown = [f"{label} {n}/{self.ran}" for label, n in self.counts]
        shown += [f"{label} {n}" for label, n in self.not_run]
        return " · ".join(shown)

    def to_json(self) -> dict[str, JSON]:
        return {
            "cell_id": self.cell_id,
            "counts": dict(self.counts),
            "not_run": dict(self.not_run),
            "flaky": self.flaky,
            "summary": str(self),
        }


def cell_counts(records: Sequence[AttemptRecord]) -> list[CellCounts]:
    """One entry per cell, in the order the records list them."""
    out = []
    for cell_id in dict.fromkeys(r.cell_id for r in records):
        own = [r for r in records if r.cell_id == cell_id]
        ran = Counter(r.label for r in own if r.outcome.ran)
        idle = Counter(r.outcome.value for r in own if not r.outcome.ran)
        out.append(CellCounts(cell_id, _ordered(ran), _ordered(idle)))
    return out


def _ordered(counter: Counter[str]) -> tuple[tuple[str, int], ...]:
    # most_common keeps first-seen order among equal counts
    return tuple(counter.most_common())


def repeated(records: Sequence[AttemptRecord]) -> bool:
    """Whether any cell was launched more than once (only then do counts add anything)."""
    return any(c.ran + sum(n for _, n in c.not_run) > 1 for c in cell_counts(records))
