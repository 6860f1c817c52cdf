"""`diagbench diff RUN_A RUN_B`: what changed between two runs of one experiment."""

from __future__ import annotations

from dataclasses import dataclass, field

from diagbench.judge.view import RunView
from diagbench.records.record import AttemptRecord


@dataclass
class Changes:
    cells: list[tuple[str, str, str]] = field(default_factory=list)  # cell, before, after
    verdicts: list[tuple[str, str, str]] = field(default_factory=list)  # hypothesis, before, after
    regressions: int = 0  # cells that were ready and are not any more


def _by_cell(records: list[AttemptRecord]) -> dict[str, str]:
    """One word per cell: its outcome, or the outcomes of its repeats joined."""
    out: dict[str, list[str]] = {}
    for r in records:
        out.setdefault(r.cell_id, []).append(r.label)
    return {cell: "/".join(sorted(set(words))) for cell, words in out.items()}


def diff_runs(a: RunView, b: RunView) -> Changes:
    changes = Changes()
    before, after = _by_cell(a.records), _by_cell(b.records)
    # a cell that did not launch (skipped, cancelled) is no regression: only what ran is compared
    ran_before = _by_cell([r for r in a.records if r.outcome.ran])
    ran_after = _by_cell([r for r in b.records if r.outcome.ran])
    for cell in sorted(set(before) | set(after)):
        old, new = before.get(cell, "not run"), after.get(cell, "not run")
        if old != new:
            changes.cells.append((cell, old, new))
            if ran_before.get(cell) == "ready" and ran_after.get(cell, "ready") != "ready":
                changes.regressions += 1
    old_v = {v.id: v.verdict for v in a.verdicts}
    new_v = {v.id: v.verdict for v in b.verdicts}
    for hid in sorted(set(old_v) | set(new_v)):
        if old_v.get(hid) != new_v.get(hid):
            changes.verdicts.append((hid, old_v.get(hid, "absent"), new_v.get(hid, "absent")))
    return changes
