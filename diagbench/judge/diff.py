"""`diagbench diff RUN_A RUN_B`: what changed between two runs of one experiment.

A cell's state is how its attempts that ran ended; a cell none of whose attempts ran
(cancelled, skipped, diagbench's own failure, or absent from the run) is "not run", the
same for all of them. A regression is a cell whose every attempt came up before and one
of which ran and did not come up after; "not run" is never a regression, either way.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from diagbench.jsonvalue import JSON
from diagbench.judge.cells import cell_counts
from diagbench.judge.underneath import PhaseShift, Underneath, compare_environments, phase_shifts
from diagbench.judge.view import RunView
from diagbench.records.record import AttemptRecord
from diagbench.vocab import Outcome

__all__ = ["CellChange", "CellState", "Changes", "cell_states", "diff_runs", "hang_sites"]


@dataclass(frozen=True)
class CellState:
    """How one cell's attempts ended in one run."""

    counts: tuple[tuple[str, int], ...] = ()  # (label, count) of the attempts that ran, most frequent first
    not_run: tuple[str, ...] = ()  # why the others did not: cancelled, skipped, internal_error, absent

    @property
    def ran(self) -> bool:
        return bool(self.counts)

    @property
    def all_ready(self) -> bool:
        return self.ran and all(label == Outcome.READY.value for label, _ in self.counts)

    @property
    def words(self) -> str:
        """`ready`, `ready 2/3, failed:oom 1/3`, or `not run (cancelled)`."""
        if not self.counts:
            return f"not run ({', '.join(self.not_run) or 'absent'})"
        total = sum(n for _, n in self.counts)
        if len(self.counts) == 1 and total == 1:
            return self.counts[0][0]
        return ", ".join(f"{label} {n}/{total}" for label, n in self.counts)

    def to_json(self) -> dict[str, JSON]:
        return {"outcomes": dict(self.counts), "not_run": list(self.not_run), "words": self.words}


@dataclass(frozen=True)
class CellChange:
    cell_id: str
    before: CellState
    after: CellState

    @property
    def regression(self) -> bool:
        return self.before.all_ready and self.after.ran and not self.after.all_ready

    def to_json(self) -> dict[str, JSON]:
        return {
            "cell_id": self.cell_id,
            "before": self.before.to_json(),
            "after": self.after.to_json(),
            "regression": self.regression,
        }


@dataclass
class Changes:
    cells: list[CellChange] = field(default_factory=list)
    verdicts: list[tuple[str, str, str]] = field(default_factory=list)  # hypothesis, before, after
    warnings: list[str] = field(default_factory=list)  # the runs are not of one experiment, as far as we can tell
    unchanged: list[tuple[str, CellState]] = field(default_factory=list)
    underneath: Underneath = field(default_factory=Underneath)  # the server's environment, compared
    phases: list[PhaseShift] = field(default_factory=list)  # start-up phases that moved beyond the noise
    hang_sites: list[tuple[str, str, str]] = field(default_factory=list)  # cell, sites before, sites after

    @property
    def regressions(self) -> int:
        """Cells that were ready and are not any more."""
        return sum(1 for c in self.cells if c.regression)


def cell_states(records: Sequence[AttemptRecord]) -> dict[str, CellState]:
    """Each cell's state; why a cell did not run is kept only when none of its attempts did."""
    return {
        c.cell_id: CellState(c.counts, () if c.counts else tuple(word for word, _ in c.not_run))
        for c in cell_counts(records)
    }


def diff_runs(a: RunView, b: RunView) -> Changes:
    changes = Changes(warnings=_warnings(a, b))
    changes.underneath = compare_environments(a.environment, b.environment)
    changes.phases = phase_shifts(a.records, b.records)
    before, after = cell_states(a.records), cell_states(b.records)
    for cell in sorted(set(before) | set(after)):
        old, new = before.get(cell, CellState()), after.get(cell, CellState())
        if _same(old, new):
            changes.unchanged.append((cell, new))
        else:
            changes.cells.append(CellChange(cell, old, new))
    changes.hang_sites = _hang_site_changes(a.records, b.records)
    old_v = {v.id: v.verdict.value for v in a.verdicts}
    new_v = {v.id: v.verdict.value for v in b.verdicts}
    for hid in sorted(set(old_v) | set(new_v)):
        if old_v.get(hid) != new_v.get(hid):
            changes.verdicts.append((hid, old_v.get(hid, "absent"), new_v.get(hid, "absent")))
    return changes


def hang_sites(records: Sequence[AttemptRecord]) -> dict[str, str]:
    """Per cell, where its hung attempts waited (`a; b` when they differ); cells without stacks left out."""
    found: dict[str, list[str]] = {}
    for r in records:
        if r.hang is not None:
            found.setdefault(r.cell_id, []).append(r.hang.site or "?")
    return {cell: "; ".join(dict.fromkeys(sites)) for cell, sites in found.items()}


def _hang_site_changes(a: Sequence[AttemptRecord], b: Sequence[AttemptRecord]) -> list[tuple[str, str, str]]:
    """Cells that hung in both runs, somewhere else the second time."""
    before, after = hang_sites(a), hang_sites(b)
    return [(c, before[c], after[c]) for c in sorted(set(before) & set(after)) if before[c] != after[c]]


def _same(old: CellState, new: CellState) -> bool:
    """Not-run is one state, whatever kept the cell from running; counts compare in any order."""
    return dict(old.counts) == dict(new.counts)


def _warnings(a: RunView, b: RunView) -> list[str]:
    if a.spec_name != b.spec_name:
        return [f"the runs come from different specs ({a.spec_name!r} and {b.spec_name!r}): cells are matched by id"]
    out = []
    if a.spec_sha256 and b.spec_sha256 and a.spec_sha256 != b.spec_sha256:
        out.append(
            f"the spec {a.spec_name!r} changed between the runs (sha256 {a.spec_sha256[:12]}… and "
            f"{b.spec_sha256[:12]}…): a change may come from the spec, not the stack"
        )
    if a.hypotheses_sha256 != b.hypotheses_sha256:
        out.append("the hypotheses differ between the runs: their verdicts answer different questions")
    return out
