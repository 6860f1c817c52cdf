"""Attempts a dead diagbench launched and never recorded, though nothing of them is left.

On Linux a server's main process dies with its diagbench (a parent-death signal); a server
with no children then leaves no process for the sweep to find, only its folder: a
`server.log` and no `result.json`. Left so, `report` would show the run as if that attempt
had never been planned to run. So the sweep also looks in the run directories it knows of
(the runs directory in use, and those named by any tagged process), and gives each such
attempt of a run that no live diagbench holds a `cancelled` record saying so.

A runs directory may be shared, or hold what someone else unpacked: a run directory is only
looked at when it is a real folder of this user, its files are read and written through the
files door (safefiles.py), and a `.lock`, a cell folder or a record planted as a link is
never followed (nor truncated, nor written through).
"""

from __future__ import annotations

import json
import stat
from collections.abc import Collection, Iterable
from dataclasses import dataclass
from pathlib import Path

from diagbench.errors import DiagbenchError
from diagbench.execute.executors import on_this_host
from diagbench.jsonvalue import JSON, JSONObject
from diagbench.launch.tags import me, running
from diagbench.records.manifest import PlannedEntry
from diagbench.records.record import not_launched
from diagbench.records.store import LOCK_FILE, MAX_RECORD_BYTES, read_manifest, try_lock_run, write_json
from diagbench.safefiles import Folder
from diagbench.vocab import Outcome

__all__ = ["CLEANUP_LOG", "Orphan", "append_to_log", "died_while_it_ran", "record_orphans"]

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
    is not walked), that a diagbench of this user wrote (it locked them) and that have an
    unrecorded launch."""
    seen: set[Path] = set()
    for runs_dir in runs_dirs:
        try:
            top = Folder.open(runs_dir)
        except OSError:
            continue
        with top:
            for name in top.names():
                child = _run_folder(top, name)
                if child is None:
                    continue  # `latest`, a link, another user's, or a folder no diagbench run wrote
                with child:
                    if _mtime(child, "verdicts.json") > _mtime(child, LOCK_FILE):
                        continue  # judged after it was last opened (locking writes the pid): it ended whole
                    if _unrecorded(child):
                        seen.add(child.path.resolve())
    return sorted(seen)


def _run_folder(top: Folder, name: str) -> Folder | None:
    """The run directory `name`, opened, if it is a real folder of this user holding a
    regular `.lock` and `manifest.json`."""
    info = top.lstat(name)
    if info is None or not stat.S_ISDIR(info.st_mode):
        return None
    try:
        child = top.folder(name, owned=True)
    except OSError:
        return None
    if all(_regular(child, f) for f in (LOCK_FILE, "manifest.json")):
        return child
    child.close()
    return None


def _regular(folder: Folder, name: str) -> bool:
    info = folder.lstat(name)
    return info is not None and stat.S_ISREG(info.st_mode)


def _unrecorded(run: Folder) -> list[str]:
    """The attempts launched (a server.log) since the run was last judged, with no result.json.
    A run is judged (verdicts.json) after its last attempt ended, so an older log without a
    record is no death: its record was removed by hand (`--resume` relaunches it). A cell
    folder that is a link is none of this run's."""
    judged = _mtime(run, "verdicts.json")
    found = []
    try:
        cells = run.folder("cells")
    except OSError:
        return []
    with cells:
        for name in cells.names():
            try:
                cell = cells.folder(name)
            except OSError:
                continue
            with cell:
                if _mtime(cell, "server.log") > judged and cell.lstat("result.json") is None:
                    found.append(name)
    return found


def _mtime(folder: Folder, name: str) -> int:
    """When `name` in `folder` was last written, in ns; -1 if it is not there (a link's own time)."""
    info = folder.lstat(name)
    return info.st_mtime_ns if info is not None else -1


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
        with Folder.open(run_dir, owned=True) as run:
            unrecorded = _unrecorded(run)  # again, under the lock
        attempts = [a for a in unrecorded if a in planned and a not in skip]
        return [_record(run_dir, planned[a], owner, by, at) for a in attempts]
    except OSError:
        return []  # gone, or no longer this user's, since it was found
    finally:
        lock.release()


def _last_holder(run_dir: Path) -> int | None:
    """The pid of the last diagbench that held the run (its lock file says `pid N`)."""
    try:
        with Folder.open(run_dir) as run:
            words = run.read(LOCK_FILE, 4096).decode("utf-8", errors="replace").split()
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
    record = not_launched(
        planned,
        Outcome.CANCELLED,
        died_while_it_ran(owner, by, at),
        ended_at=at,
        log_bytes=log_bytes(run_dir, attempt),
    )
    try:
        write_json(folder / "result.json", record.to_json(), below=run_dir, owned=True)
        entry: dict[str, JSON] = {"at": at, "by": by, "by_pid": me().pid, "attempt": attempt, "owner_pid": owner}
        append_to_log(run_dir, {**entry, "killed": [], "left_behind": []})  # as a sweep's: nothing was left
    except DiagbenchError as exc:  # an unwritable run directory must not stop the sweep
        return Orphan(run_dir, attempt, owner, None, f"not recorded: {exc}")
    return Orphan(run_dir, attempt, owner, folder / "result.json", f"written to {run_dir / CLEANUP_LOG}")


def log_bytes(run_dir: Path, attempt: str) -> int:
    """The size of an attempt's server.log (0 when it is not a regular file in a real folder)."""
    try:
        with Folder.open(run_dir) as run, run.walk(("cells", attempt)) as cell:
            info = cell.lstat("server.log")
    except OSError:
        return 0
    return info.st_size if info is not None and stat.S_ISREG(info.st_mode) else 0


def append_to_log(run_dir: Path, entry: JSONObject) -> None:
    """Append to the run's cleanup.json: every sweep of it, record or not."""
    entries = _read_log(run_dir)
    entries = [*(entries if isinstance(entries, list) else []), entry]
    write_json(run_dir / CLEANUP_LOG, entries, below=run_dir, owned=True)


def _read_log(run_dir: Path) -> JSON:
    try:
        with Folder.open(run_dir) as run:
            read: JSON = json.loads(run.read(CLEANUP_LOG, MAX_RECORD_BYTES).decode("utf-8"))
    except (OSError, ValueError):
        return None
    return read
