"""`run --failed RUN`: a new run of the cells that did not come up in RUN (as pytest's --lf)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from diagbench.errors import UserError
from diagbench.records.store import load_run
from diagbench.spec.load import Spec
from diagbench.vocab import Outcome

__all__ = ["failed_cells", "failed_spec"]


def failed_cells(run: Path) -> list[str]:
    """The cells of RUN, in plan order, of which some attempt did not come up (failed, timed out,
    cancelled, skipped, or never recorded)."""
    loaded = load_run(run)
    planned = list(
        dict.fromkeys([*(a.cell_id for a in loaded.manifest.attempts), *(r.cell_id for r in loaded.records)])
    )
    ended = {a.attempt: a.cell_id for a in loaded.manifest.attempts}
    ready = {r.attempt for r in loaded.records if r.outcome is Outcome.READY}
    not_up = {cell for attempt, cell in ended.items() if attempt not in ready}
    not_up |= {r.cell_id for r in loaded.records if r.outcome is not Outcome.READY}
    return [c for c in planned if c in not_up]


def failed_spec(run: Path, spec: Spec) -> Spec:
    """`spec` with only the cells that did not come up in RUN; a usage error where every cell came
    up or where the spec no longer has one of them."""
    cells = failed_cells(run)
    if not cells:
        raise UserError(f"{run}: every cell came up; there is nothing to run again")
    known = {c.id for c in spec.cells}
    missing = [c for c in cells if c not in known]
    if missing:
        raise UserError(
            f"--failed {run}: the spec has no cell {', '.join(missing)} (was it edited since?); "
            "run the spec again whole, or --only AXIS=LABEL"
        )
    return dataclasses.replace(spec, cells=tuple(c for c in spec.cells if c.id in set(cells)))
