"""Cleaning up after a diagbench that died: stop what it left running, record it in its
run directory, remove its temporary folders. `run`, `run --resume` and `cleanup` call
this first; it never touches what a live diagbench launched.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

from diagbench.errors import DiagbenchError
from diagbench.execute.orphans import CLEANUP_LOG, Orphan, append_to_log, log_bytes, record_orphans
from diagbench.jsonvalue import JSON, JSONObject
from diagbench.launch.ports import remove_stale_leases
from diagbench.launch.process import Teardown
from diagbench.launch.reaper import Stray, find_strays, leaked_folders, remove_folder, stop_stray
from diagbench.launch.tags import me
from diagbench.records.manifest import Manifest
from diagbench.records.record import Killed, not_launched
from diagbench.records.store import lock_holder, read_manifest, try_lock_run, write_json
from diagbench.safefiles import Folder
from diagbench.vocab import Outcome

__all__ = ["DEFAULT_GRACE_S", "MAX_GRACE_S", "Sweep", "Swept", "Waiting", "describe", "sweep_host"]

DEFAULT_GRACE_S = 10.0
MAX_GRACE_S = 30.0  # a dead run's own grace, but a cleanup never waits longer than this


@dataclass(frozen=True)
class Swept:
    """One attempt's leftovers, stopped, and where that was written down."""

    stray: Stray
    teardown: Teardown
    at: str  # when, ISO 8601
    recorded: Path | None  # the `cancelled` record written for it, if it had none
    note: str  # what became of its run directory


@dataclass
class Sweep:
    attempts: list[Swept] = field(default_factory=list)
    orphans: list[Orphan] = field(default_factory=list)  # launched, unrecorded, nothing left running
    folders: list[Path] = field(default_factory=list)  # temporary folders removed

    @property
    def empty(self) -> bool:
        return not self.attempts and not self.orphans and not self.folders


def sweep_host(
    by: str,
    hurry: threading.Event | None = None,
    runs_dirs: Sequence[Path] = (),
    on_wait: Callable[[Waiting], None] | None = None,
) -> Sweep:
    """Stop every attempt left by a diagbench that has ended, and record each in its run,
    with the launched attempts that left nothing running and no record (looked for under
    `runs_dirs` and where tagged processes' runs are). `by` names the command sweeping (for
    the records: "diagbench cleanup"); `on_wait` hears, before it, each dead run waited on."""
    seen: set[Path] = set()
    strays = find_strays(seen)
    sweep = Sweep()
    teardowns: list[Teardown] = []
    if strays:  # teardowns at once (each may wait its grace), then the records one by one
        graces = [_grace(_manifest(s.tag.run_dir)) for s in strays]
        for waiting in _waits(strays, graces):
            if on_wait is not None:
                on_wait(waiting)
        with ThreadPoolExecutor(max_workers=min(16, len(strays)), thread_name_prefix="sweep") as pool:
            teardowns = list(pool.map(lambda s, g: stop_stray(s, g, hurry), strays, graces))
    at = datetime.now(timezone.utc).isoformat(timespec="seconds")
    skip = {(s.tag.run_dir, s.tag.attempt) for s in strays}
    sweep.orphans = record_orphans([*runs_dirs, *sorted({d.parent for d in seen})], by, at, skip)
    sweep.attempts = [_write_down(s, t, by) for s, t in zip(strays, teardowns, strict=True)]
    sweep.folders = [f for f in leaked_folders() if remove_folder(f)]
    remove_stale_leases()  # bookkeeping of ports, nothing to report
    return sweep


@dataclass(frozen=True)
class Waiting:
    """A dead run whose leftovers the sweep stops, and the longest it may wait for them."""

    owner_pid: int
    run_dir: Path
    grace_s: float


def _waits(strays: Sequence[Stray], graces: Sequence[float]) -> list[Waiting]:
    """One per dead diagbench and run directory, with the longest grace among its strays."""
    longest: dict[tuple[int, Path], float] = {}
    for stray, grace in zip(strays, graces, strict=True):
        key = (stray.tag.owner.pid, stray.tag.run_dir)
        longest[key] = max(grace, longest.get(key, 0.0))
    return [Waiting(pid, run_dir, grace) for (pid, run_dir), grace in longest.items()]


def _write_down(stray: Stray, teardown: Teardown, by: str) -> Swept:
    """Record what was stopped in the dead run's directory, if it is there and free."""
    run_dir = stray.tag.run_dir
    at = datetime.now(timezone.utc).isoformat(timespec="seconds")
    if not _has_manifest(run_dir):
        return Swept(stray, teardown, at, None, f"its run directory {run_dir} is gone")
    try:
        lock = try_lock_run(run_dir)
    except DiagbenchError as exc:  # an unwritable run directory must not stop the sweep
        return Swept(stray, teardown, at, None, f"not recorded: {exc}")
    if lock is None:
        note = f"its run directory is in use by diagbench {lock_holder(run_dir)}, which records it"
        return Swept(stray, teardown, at, None, note)
    try:
        recorded = _record(stray, teardown, at, by, _manifest(run_dir))
        _log(stray, teardown, at, by)
    except DiagbenchError as exc:  # an unwritable run directory must not stop the sweep
        return Swept(stray, teardown, at, None, f"not recorded: {exc}")
    finally:
        lock.release()
    return Swept(stray, teardown, at, recorded, f"written to {run_dir / CLEANUP_LOG}")


def _has_manifest(run_dir: Path) -> bool:
    """Whether `run_dir` is a folder of this user holding a manifest (not a link to one)."""
    try:
        with Folder.open(run_dir, owned=True) as run:
            return run.lstat("manifest.json") is not None
    except OSError:
        return False


def _grace(manifest: Manifest | None) -> float:
    """The dead run's own grace period (its servers may need it to exit cleanly), bounded."""
    grace = manifest.grace_s if manifest is not None else None
    return DEFAULT_GRACE_S if grace is None else min(grace, MAX_GRACE_S)


def describe(stray: Stray, teardown: Teardown, at: str, by: str) -> str:
    """The reason written into the record: what was stopped, when, by whom."""
    owner = stray.tag.owner
    killed = ", ".join(f"pid {k.pid} {k.name} ({k.signal})" for k in teardown.killed) or "nothing (all gone by then)"
    return (
        f"diagbench pid {owner.pid} ended during this attempt; at {at} {by} (pid {me().pid}) "
        f"stopped what it left running: {killed}"
    )


def _record(stray: Stray, teardown: Teardown, at: str, by: str, manifest: Manifest | None) -> Path | None:
    """A `cancelled` record for the attempt if it has none (its diagbench died before writing one)."""
    attempt, run_dir = stray.tag.attempt, stray.tag.run_dir
    path = run_dir / "cells" / attempt / "result.json"
    planned = manifest.planned(attempt) if manifest is not None else None
    if planned is None or not _unrecorded(run_dir, attempt):
        return None
    record = not_launched(
        planned,
        Outcome.CANCELLED,
        describe(stray, teardown, at, by),
        ended_at=at,
        log_bytes=log_bytes(run_dir, attempt),
        killed=teardown.killed,
        left_behind=teardown.left_behind,
        teardown_s=round(teardown.seconds, 4),
        sigterm_at=teardown.sigterm_at,
    )
    write_json(path, record.to_json(), below=run_dir, owned=True)
    return path


def _unrecorded(run_dir: Path, attempt: str) -> bool:
    """Whether the attempt's folder is a real folder (no link on the way) with no result.json."""
    try:
        with Folder.open(run_dir, owned=True) as run, run.walk(("cells", attempt)) as cell:
            return cell.lstat("result.json") is None
    except OSError:
        return False


def _log(stray: Stray, teardown: Teardown, at: str, by: str) -> None:
    entry: dict[str, JSON] = {
        "at": at,
        "by": by,
        "by_pid": me().pid,
        "attempt": stray.tag.attempt,
        "owner_pid": stray.tag.owner.pid,
        "killed": [_killed_json(k) for k in teardown.killed],
        "left_behind": teardown.left_behind,
    }
    append_to_log(stray.tag.run_dir, entry)


def _killed_json(k: Killed) -> JSONObject:
    return {"pid": k.pid, "name": k.name, "signal": k.signal}


def _manifest(run_dir: Path) -> Manifest | None:
    try:
        return read_manifest(run_dir)
    except DiagbenchError:  # unreadable, or a newer diagbench's: its grace and plan are not guessed
        return None
