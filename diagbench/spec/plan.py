"""Attempts: each selected cell launched `repeat` times, named for their folder."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from diagbench.spec.matrix import Cell

__all__ = ["CellPlan", "OrderedAttempt", "Plan", "PlannedAttempt", "plan_attempts"]


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


@dataclass(frozen=True)
class CellPlan:
    """One selected cell as `plan` shows it: what it runs (secrets blanked, `{port}` where the
    free port goes) and the hypotheses it decides."""

    index: int
    cell_id: str
    params: Mapping[str, str]
    argv: tuple[str, ...]
    shell: bool  # argv[0] is run by /bin/sh -c
    env: Mapping[str, str | None]  # the changes to the inherited environment (None: unset)
    decides: tuple[str, ...]


@dataclass(frozen=True)
class OrderedAttempt:
    """An attempt in the order --stop-when-decided launches in, and what it decides (none: skipped)."""

    attempt: str
    decides: tuple[str, ...]


@dataclass(frozen=True)
class Plan:
    """What a run of a spec would do, computed once: `plan` renders it as text or JSON."""

    spec_name: str
    path: Path
    cells_total: int
    port: int | None  # None: a free port per cell
    cwd: Path
    ready_log: str | None
    ready_http: str | None
    ready_request: str | None  # `POST /v1/completions -> 200`
    packs: tuple[str, ...]
    timeout_s: float
    grace_s: float
    fresh_caches: tuple[str, ...]
    cells: tuple[CellPlan, ...]
    not_decidable: tuple[str, ...]  # hypotheses no selected cell decides
    slots: str | None = None  # the slots, in words (none: not resolved)
    gpus_in_use: bool = False
    launch_order: tuple[OrderedAttempt, ...] | None = None  # with --stop-when-decided only
    stall_s: float | None = None  # server.stall (or --stall)
    stall_rule: str | None = None  # what counts as a stall, in words (launch/stall.py says), with stall_s
    spin_s: float | None = None  # server.spin: the same waits in every rank this long (launch/spin.py)
    stacks: str = "on-timeout"  # when stacks are taken, or faulthandler
    warnings: tuple[str, ...] = ()  # what the spec likely gets wrong (no ready rule a server of unknown kind prints)
