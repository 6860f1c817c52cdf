"""Attempts a dead diagbench launched and never recorded, though nothing of them is left.

On Linux a server's main process dies with its diagbench (a parent-death signal); a server
with no children then leaves no process for the sweep to find, only its folder: a
`server.log` and no `result.json`. Left so, `report` would show the run as if that attempt
had never been planned to run. So the sweep also looks in the run directories it knows of
(the runs directory in use, and those named by any tagged process), and gives each such
attempt of a run that no live diagbench holds a `cancelled` record saying so.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Iterable
from dataclasses import dataclass
from pathlib import Path

from diagbench.errors import DiagbenchError
from diagbench.execute.executors import on_this_host
from diagbench.jsonvalue import JSON, JSONObject
from diagbench.launch.tags import me, running
from diagbench.records.manifest import PlannedEntry
from diagbench.records.record import not_launched
from diagbench.records.store import LOCK_FILE, read_manifest, try_lock_run, write_json
from diagbench.vocab import Outcome

CLEANUP_LOG = "cleanup.json"


@dataclass(frozen=True)
class Orphan:
    """An attempt of a dead diagbench, found launched and unrecorded, and what became of it."""

    run_dir: Path
    attempt: str
    owner_pid: int | None  # the dead diagbench, as its run's lock file names it
    recorded: Path | None  # the `cancelled` record written for it
    note: str  # why it was not recorded, when it was not


def record_orphans(
    runs_dirs: Iterable[Path], by: str, at: str, skip: Collection[tuple[Path, str]] = ()
) -> list[Orphan]:
    """Record every launched, unrecorded attempt of the runs under `runs_dirs` whose
    diagbench has ended, but those in `skip` (run directory, attempt): the sweep records
    those itself, with what it stopped. `by` names the command, `at` the time."""
    found: list[Orphan] = []
    for run_dir in _run_dirs(runs_dirs):
        found += _record_run(run_dir, by, at, {a for d, a in skip if d == run_dir})
    return found


def _run_dirs(runs_dirs: Iterable[Path]) -> list[Path]:
    """The run directories directly under each runs directory (never deeper: the file system
    is not walked), that a diagbench wrote (it locked them) and that have an unrecorded launch."""
    seen: set[Path] = set()
    for runs_dir in runs_dirs:
        try:
            children = sorted(runs_dir.iterdir())
        except OSError:
            continue
        for child in children:
            if child.is_symlink() or not (child / LOCK_FILE).is_file() or not (child / "manifest.json").is_file():
                continue  # `latest`, or a folder no diagbench run wrote
            if _mtime(child / "verdicts.json") > _mtime(child / LOCK_FILE):
                continue  # judged after it was last opened (locking writes the pid): it ended whole
            key = child.resolve()
            if key not in seen and _unrecorded(child):
                seen.add(key)
    return sorted(seen)


def _unrecorded(run_dir: Path) -> list[str]:
    """The attempts launched (a server.log) since the run was last judged, with no result.json.
    A run is judged (verdicts.json) after its last attempt ended, so an older log without a
    record is no death: its record was removed by hand (`--resume` relaunches it)."""
    try:
        folders = sorted((run_dir / "cells").iterdir())
    except OSError:
        return []
    judged = _mtime(run_dir / "verdicts.json")
    return [f.name for f in folders if _mtime(f / "server.log") > judged and not (f / "result.json").exists()]


def _mtime(path: Path) -> int:
    """When `path` was last written, in ns; -1 if it is not there."""
    try:
        return path.stat().st_mtime_ns
    except OSError:
        return -1


def _record_run(run_dir: Path, by: str, at: str, skip: set[str]) -> list[Orphan]:
    owner = _last_holder(run_dir)  # read before locking: taking the lock writes our pid there
    if owner is not None and (owner == me().pid or running(owner)):
        return []  # alive (a file system without locks cannot say): never touch a live run
    try:
        lock = try_lock_run(run_dir)
    except DiagbenchError:  # one that cannot even be locked (another user's) is not ours to write
        return []
    if lock is None:
        return []  # a live diagbench holds it: it records its own attempts
    try:
        planned = _planned(run_dir)
        attempts = [a for a in _unrecorded(run_dir) if a in planned and a not in skip]  # again, under the lock
        return [_record(run_dir, planned[a], owner, by, at) for a in attempts]
    finally:
        lock.release()


def _last_holder(run_dir: Path) -> int | None:
    """The pid of the last diagbench that held the run (its lock file says `pid N`)."""
    try:
        words = (run_dir / LOCK_FILE).read_text(encoding="utf-8", errors="replace").split()
    except OSError:
        return None
    return int(words[1]) if len(words) >= 2 and words[0] == "pid" and words[1].isdigit() else None


def _planned(run_dir: Path) -> dict[str, PlannedEntry]:
    """The attempts the manifest plans, by name; none for a run of a cluster's executor, whose jobs may still
    run on the cluster and write their own records after diagbench died."""
    try:
        manifest = read_manifest(run_dir)
    except DiagbenchError:
        return {}
    if not on_this_host(manifest.settings.executor_kind):
        return {}
    return {a.attempt: a for a in manifest.attempts}


def died_while_it_ran(owner: int | None, by: str, at: str) -> str:
    """The record's reason."""
    pid = owner if owner is not None else "unknown"
    found = f"found with no record and nothing left running by {by} (pid {me().pid}) at {at}"
    return f"diagbench (pid {pid}) died while it ran; {found}"


def _record(run_dir: Path, planned: PlannedEntry, owner: int | None, by: str, at: str) -> Orphan:
    attempt = planned.attempt
    folder = run_dir / "cells" / attempt
    log = folder / "server.log"
    record = not_launched(
        planned,
        Outcome.CANCELLED,
        died_while_it_ran(owner, by, at),
        ended_at=at,
        log_bytes=log.stat().st_size if log.is_file() else 0,
    )
    try:
        write_json(folder / "result.json", record.to_json())
        entry: dict[str, JSON] = {"at": at, "by": by, "by_pid": me().pid, "attempt": attempt, "owner_pid": owner}
        append_to_log(run_dir, {**entry, "killed": [], "left_behind": []})  # as a sweep's: nothing was left
    except DiagbenchError as exc:  # an unwritable run directory must not stop the sweep
        return Orphan(run_dir, attempt, owner, None, f"not recorded: {exc}")
    return Orphan(run_dir, attempt, owner, folder / "result.json", f"written to {run_dir / CLEANUP_LOG}")


def append_to_log(run_dir: Path, entry: JSONObject) -> None:
    """Append to the run's cleanup.json: every sweep of it, record or not."""
    path = run_dir / CLEANUP_LOG
    entries = _read_json(path)
    write_json(path, [*(entries if isinstance(entries, list) else []), entry])


def _read_json(path: Path) -> JSON:
    try:
        read: JSON = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return read
