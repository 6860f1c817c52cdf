"""What a sweep did, in words: one line per attempt stopped or recorded and per folder removed."""

from __future__ import annotations

from diagbench.execute.orphans import Orphan
from diagbench.execute.sweep import Sweep, Swept, Waiting
from diagbench.safetext import one_line

__all__ = ["describe_sweep", "describe_wait"]


def describe_sweep(sweep: Sweep) -> list[str]:
    """One line per attempt whose leftovers were stopped, per attempt found with no record
    and nothing left, and per temporary folder removed."""
    lines = [_attempt_line(s) for s in sweep.attempts]
    lines += [_orphan_line(o) for o in sweep.orphans]
    lines += [f"removed {folder}: the temporary folder of a diagbench that has ended" for folder in sweep.folders]
    return [one_line(line) for line in lines]  # process names, folders, a dead run's words: shown, never obeyed


def describe_wait(waiting: Waiting) -> str:
    """Said before the sweep waits on a dead run's leftovers (it may take their whole grace)."""
    seconds = f"{waiting.grace_s:g}s"
    return f"stopping what diagbench pid {waiting.owner_pid} left running in {waiting.run_dir} (up to {seconds})"


def _attempt_line(swept: Swept) -> str:
    tag, teardown = swept.stray.tag, swept.teardown
    killed = ", ".join(f"pid {k.pid} {k.name} ({k.signal})" for k in teardown.killed) or "nothing left by then"
    where = f"attempt {tag.attempt} of {tag.run_dir}"
    written = f"recorded as cancelled in {swept.recorded}" if swept.recorded is not None else swept.note
    left = f"; STILL RUNNING: {teardown.left_behind}" if teardown.left_behind else ""
    return f"stopped what diagbench pid {tag.owner.pid} (ended) left of {where}: {killed}; {written}{left}"


def _orphan_line(orphan: Orphan) -> str:
    pid = orphan.owner_pid if orphan.owner_pid is not None else "unknown"
    where = f"attempt {orphan.attempt} of {orphan.run_dir}"
    written = f"recorded as cancelled in {orphan.recorded}" if orphan.recorded is not None else orphan.note
    return f"diagbench pid {pid} died while {where} ran (no process left, no record); {written}"
