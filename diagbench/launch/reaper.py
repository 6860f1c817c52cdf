"""What a diagbench that died left behind: tagged processes whose owner is gone, and its
temporary folders. Found by tag and owner, never by name, so the servers of a live
diagbench (or of one in another container) are never touched.

On Linux the server's main process dies with its diagbench (a parent-death signal), but
its workers, their double-forked daemons, and everything on other systems live on until
a later diagbench (`run`, `run --resume`, `cleanup`) finds them here.
"""

from __future__ import annotations

import os
import threading
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

import psutil

from diagbench import safefiles
from diagbench.launch.caches import caches_places
from diagbench.launch.process import Teardown, process_group, stop_processes, tagged_processes
from diagbench.launch.tags import CACHES_PREFIX, Owner, Tag, caches_owner, current_scope, in_scope, scope_mark

__all__ = ["Stray", "find_strays", "leaked_folders", "remove_folder", "stop_stray"]


@dataclass(frozen=True)
class Stray:
    """The live processes of one attempt whose diagbench is gone."""

    tag: Tag
    pids: tuple[int, ...]


def find_strays(seen: set[Path] | None = None) -> list[Stray]:
    """Every attempt on this host (of this diagbench's scope) with processes left by a
    diagbench that has ended; `seen` gets the run directory of every such tagged process,
    live or not."""
    gone: dict[Owner, bool] = {}
    found: dict[Tag, list[int]] = defaultdict(list)
    for proc, tag in tagged_processes():
        if not in_scope(tag.scope):
            continue
        if seen is not None:
            seen.add(tag.run_dir)
        if tag.owner not in gone:
            gone[tag.owner] = tag.owner.gone()
        if gone[tag.owner]:
            found[tag].append(proc.pid)
    return [Stray(tag, tuple(sorted(pids))) for tag, pids in found.items()]


def stop_stray(stray: Stray, grace: float, hurry: threading.Event | None = None) -> Teardown:
    """Stop one attempt's leftovers as teardown would have: their groups and every process
    with their tag, SIGTERM, `grace`, SIGKILL."""

    def members() -> list[psutil.Process]:
        return [proc for proc, tag in tagged_processes() if tag == stray.tag]

    groups = {pgid for proc in members() if (pgid := process_group(proc)) is not None}
    return stop_processes(members, lambda: groups, grace, hurry)


def leaked_folders() -> list[Path]:
    """Temporary folders (an attempt's fresh compile caches) whose diagbench (of this
    diagbench's scope) has ended."""
    found = []
    for place in caches_places():
        for folder in place.glob(CACHES_PREFIX + "*"):
            named = caches_owner(folder.name)
            if named is not None and named[1] == scope_mark(current_scope()) and _ours(folder) and named[0].gone():
                found.append(folder)
    return sorted(found)


def _ours(folder: Path) -> bool:
    """A real folder (not a link) of this user: a name in /tmp is anyone's to choose."""
    try:
        return folder.is_dir() and not folder.is_symlink() and folder.stat().st_uid == os.getuid()
    except OSError:
        return False


def remove_folder(folder: Path) -> bool:
    """Remove a dead diagbench's folder (this user's, never through a link); True if it is gone."""
    return safefiles.remove_folder(folder)
