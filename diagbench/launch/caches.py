"""An attempt's fresh compile caches (`server.fresh_caches`): a new empty folder under the
temporary folder, removed when the attempt ends. Its name carries its owner, so a later
diagbench removes it if this one dies first."""

from __future__ import annotations

import contextlib
import tempfile
from collections.abc import Iterator, Sequence
from pathlib import Path

from diagbench.errors import WriteError
from diagbench.launch.tags import Owner, caches_prefix, current_scope
from diagbench.safefiles import remove_folder

__all__ = ["FIX", "SHARED_TMP", "caches_places", "compile_caches"]

SHARED_TMP = Path("/tmp")  # where a diagbench with another TMPDIR (or none) made its folders
FIX = "server.fresh_caches makes a folder per attempt there: free some space, or set TMPDIR to a writable folder"


@contextlib.contextmanager
def compile_caches(variables: Sequence[str], owner: Owner) -> Iterator[Path | None]:
    """A folder with a subfolder per variable for as long as the block runs (None without any)."""
    if not variables:
        yield None
        return
    folder = _new_caches(variables, owner)
    try:
        yield folder
    finally:
        remove_folder(folder)


def _new_caches(variables: Sequence[str], owner: Owner) -> Path:
    """The folder, made whole, or a WriteError: a full or unwritable temporary folder stops
    the run as a full disk does (it is not a diagbench bug), and nothing half-made is left."""
    folder: Path | None = None
    try:
        folder = Path(tempfile.mkdtemp(prefix=caches_prefix(owner, current_scope())))
        for var in variables:  # made now: TMPDIR must exist, or Python falls back to /tmp
            (folder / var.lower()).mkdir()
    except OSError as exc:
        if folder is not None:
            remove_folder(folder)
        raise WriteError(Path(tempfile.gettempdir()), exc, FIX) from None  # the folder the user can mend
    return folder


def caches_places() -> list[Path]:
    """Where a dead diagbench's caches folders may be: this process's temporary folder, and
    /tmp (the one it had is unknown: TMPDIR differs between shells, jobs and users)."""
    here = Path(tempfile.gettempdir())
    return [here] if here.resolve() == SHARED_TMP.resolve() else [here, SHARED_TMP]
