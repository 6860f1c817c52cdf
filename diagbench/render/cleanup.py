"""What a sweep did, in words: one line per attempt stopped and per folder removed."""

from __future__ import annotations

from diagbench.execute.sweep import Sweep, Swept


def describe_sweep(sweep: Sweep) -> list[str]:
    """One line per attempt whose leftovers were stopped, and per temporary folder removed."""
    lines = [_attempt_line(s) for s in sweep.attempts]
    lines += [f"removed {folder}: the temporary folder of a diagbench that has ended" for folder in sweep.folders]
    return lines


def _attempt_line(swept: Swept) -> str:
    tag, teardown = swept.stray.tag, swept.teardown
    killed = ", ".join(f"pid {k.pid} {k.name} ({k.signal})" for k in teardown.killed) or "nothing left by then"
    where = f"attempt {tag.attempt} of {tag.run_dir}"
    written = f"recorded as cancelled in {swept.recorded}" if swept.recorded is not None else swept.note
    left = f"; STILL RUNNING: {teardown.left_behind}" if teardown.left_behind else ""
    return f"stopped what diagbench pid {tag.owner.pid} (ended) left of {where}: {killed}; {written}{left}"
