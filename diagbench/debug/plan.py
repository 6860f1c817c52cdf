"""Which debug settings a failure calls for, and the launch they make (pure but for looking a
wrapper up on PATH): the command with each chosen set's change applied, in the sets' order."""

from __future__ import annotations

import os
import shutil
from collections.abc import Mapping
from dataclasses import dataclass

from diagbench.debug.record import Setting
from diagbench.debug.sets import DebugCatalogue, DebugSet
from diagbench.records.record import AttemptRecord
from diagbench.triage.apply import Launch, apply_change

__all__ = ["DebugPlan", "class_word", "plan_debug"]


@dataclass(frozen=True)
class DebugPlan:
    sets: tuple[DebugSet, ...]  # the sets that changed the launch
    launch: Launch
    settings: tuple[Setting, ...]
    notes: tuple[str, ...]  # sets left out, and why


def class_word(record: AttemptRecord) -> str:
    """The word the settings are chosen by: the failure class, else the outcome (`crashed`, `timeout`)."""
    return record.failure_class or record.outcome.value


def plan_debug(
    catalogue: DebugCatalogue, launch: Launch, server: str | None, record: AttemptRecord, wrappers: bool
) -> DebugPlan:
    """The debug launch for this failure: every set for it that changes something."""
    chosen = catalogue.choose(server, record.outcome.value, record.failure_class, record.signature, wrappers)
    applied: list[DebugSet] = []
    settings: list[Setting] = []
    notes: list[str] = []
    for debug_set in chosen:
        step = _apply(launch, debug_set)
        if isinstance(step, str):
            notes.append(f"{debug_set.id}: {step}")
            continue
        launch, diff = step
        applied.append(debug_set)
        settings += [Setting(change, debug_set.source, debug_set.id, debug_set.why) for change in diff]
    if not wrappers:
        left = [
            s.id
            for s in catalogue.choose(server, record.outcome.value, record.failure_class, record.signature, True)
            if s.wrap
        ]
        notes += [f"{name}: a wrapper, launched only with --sanitizer" for name in left]
    return DebugPlan(tuple(applied), launch, tuple(settings), tuple(notes))


def _apply(launch: Launch, debug_set: DebugSet) -> tuple[Launch, tuple[str, ...]] | str:
    """The launch with the set applied and the diff, or why it is left out."""
    diff: tuple[str, ...] = ()
    if debug_set.change.describe():
        changed = apply_change(launch, debug_set.change)
        if changed is None:
            return "already set in the command"
        launch, diff = changed.launch, changed.diff
    if debug_set.wrap:
        program = debug_set.wrap[0]
        if shutil.which(program, path=_path(launch.env)) is None:
            return f"{program} is not installed here (not on PATH)"
        if launch.argv[: len(debug_set.wrap)] == debug_set.wrap:
            return "the command runs under it already"
        launch = Launch((*debug_set.wrap, *launch.argv), launch.env)
        diff = (*diff, f"+ wrap: {' '.join(debug_set.wrap)}")
    return launch, diff


def _path(env: Mapping[str, str | None]) -> str | None:
    """The PATH the server gets: the command's own, else diagbench's."""
    value = env.get("PATH")
    return value if value is not None else os.environ.get("PATH")
