"""The run directory: atomic, versioned JSON records, and reading them back.

runs/<run-id>/manifest.json      written before the first launch
runs/<run-id>/cells/<attempt>/   server.log, result.json
runs/<run-id>/verdicts.json
runs/<run-id>/.lock              flock-ed by the one diagbench writing the run (`run`, `--resume`)
runs/latest -> <run-id>            the newest `run` (never an isolation)
runs/latest-isolation -> <run-id>  the newest `isolate`

Records are written whole or not at all; a write that fails (disk full, read-only) is a
`WriteError` naming the file and the OS's words, and what was written before stays readable.
Everything below a run directory is reached through the files door (safefiles.py): a cell
folder, a `.lock` or a record planted as a link is never followed, truncated or written
through, and a run directory of another user is never written.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import re
import secrets
import stat
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from diagbench.errors import RecordError, RunDirError, UserError, WriteError
from diagbench.jsonvalue import JSON
from diagbench.records import sink
from diagbench.records.manifest import Manifest, NewerManifest
from diagbench.records.record import AttemptRecord
from diagbench.safefiles import Folder, Unsafe, read_regular

__all__ = [
    "LATEST",
    "LATEST_ISOLATION",
    "LINKS",
    "LOCK_FILE",
    "MAX_RECORD_BYTES",
    "LoadedRun",
    "RunDir",
    "RunDirExists",
    "RunLock",
    "Unreadable",
    "check_run_id",
    "load_run",
    "lock_holder",
    "lock_run",
    "new_run_id",
    "open_existing_run",
    "open_new_run",
    "open_run",
    "read_manifest",
    "try_lock_run",
    "write_json",
]

MAX_RECORD_BYTES = 64 << 20  # a record is kilobytes; anything this large is not one
LOCK_FILE = ".lock"
_RUN_ID = re.compile(r"[A-Za-z0-9_-][A-Za-z0-9._-]*")


def write_json(path: Path, data: JSON, below: Path | None = None, owned: bool = False) -> None:
    """Write atomically: a reader sees the old file or the whole new one, never half.
    Created like server.log (0644 less the umask): records and logs read alike. Every string
    in `data` passes the sinks' redaction (`records.sink`): no record holds a secret. The
    folders from `below` (default: the file's own folder) down to the file are walked without
    following a link, and the file is renamed into place, never written through a link;
    `owned`: only if `below` is this user's."""
    text = json.dumps(sink.record(data), indent=2, sort_keys=False) + "\n"
    write_below(below or path.parent, path, text.encode("utf-8"), owned)


def write_below(below: Path, path: Path, data: bytes, owned: bool = False) -> None:
    """`path` (somewhere under `below`) replaced whole; WriteError if it cannot be."""
    parts = path.relative_to(below).parts
    try:
        with Folder.open(below, owned) as top, top.walk(parts[:-1]) as folder:
            folder.write(parts[-1], data)
    except OSError as exc:
        raise WriteError(path, exc) from None


LATEST = "latest"  # runs/latest: the newest run of a spec
LATEST_ISOLATION = "latest-isolation"  # runs/latest-isolation: the newest isolation (never runs/latest)
LINKS = (LATEST, LATEST_ISOLATION)


def new_run_id(spec_name: str) -> str:
    safe = re.sub(r"[^A-Za-z0-9_.-]+", "-", spec_name).strip("-.") or "run"
    return time.strftime("%Y%m%d-%H%M%S", time.localtime()) + "-" + safe


def check_run_id(run_id: str) -> None:
    """A run id is one plain folder name under the runs directory: nothing else is written."""
    if not _RUN_ID.fullmatch(run_id) or run_id in LINKS:
        why = f"is reserved (runs/{run_id} points at the newest one)" if run_id in LINKS else "is not a plain name"
        raise UserError(
            f"--run-id {run_id!r} {why}: use letters, digits, '.', '_' and '-', "
            "not starting with '.' (e.g. --run-id nightly-2025-05-01)"
        )


@dataclass(frozen=True)
class RunDir:
    path: Path
    lock: RunLock | None = field(default=None, compare=False, repr=False)  # held while this diagbench writes it

    @property
    def cells(self) -> Path:
        return self.path / "cells"

    def attempt_dir(self, attempt: str) -> Path:
        """The attempt's folder, made if missing: a real folder of this run, never a link, and
        holding no link, FIFO or device (diagbench writes none: a `server.log` planted as a
        link to another file would be truncated by the launch that writes it)."""
        folder = self.cells / attempt
        try:
            with Folder.open(self.path, owned=True) as top, top.walk(("cells", attempt), make=True) as cell:
                for name in cell.names():
                    info = cell.lstat(name)
                    if info is not None and not (stat.S_ISREG(info.st_mode) or stat.S_ISDIR(info.st_mode)):
                        cell.unlink(name)
        except OSError as exc:
            raise WriteError(folder, exc) from None
        return folder

    def write_document(self, relative: str, text: str) -> None:
        """A document of the run directory (`cells/<attempt>/diagbench-error.txt`) replaced
        whole, blanked by the sink (`records.sink.document`)."""
        write_below(self.path, self.path / relative, sink.document(text).encode("utf-8"), owned=True)

    def write_json(self, relative: str, data: JSON) -> None:
        write_json(self.path / relative, data, below=self.path)

    def release(self) -> None:
        if self.lock is not None:
            self.lock.release()

    def write_manifest(self, manifest: Manifest) -> None:
        self.write_json("manifest.json", manifest.to_json())

    def write_result(self, record: AttemptRecord) -> None:
        self.attempt_dir(record.attempt)
        self.write_json(f"cells/{record.attempt}/result.json", record.to_json())

    def write_verdicts(self, verdicts: Sequence[JSON]) -> None:
        self.write_json("verdicts.json", verdicts)


def open_new_run(runs_dir: Path, spec_name: str, latest: str = LATEST) -> RunDir:
    """A new run directory under the default id; two runs of one spec started in the same
    second get `-2`, `-3`... rather than one failing on the other's folder."""
    base = new_run_id(spec_name)
    for n in range(1, 100):
        with contextlib.suppress(RunDirExists):
            return open_run(runs_dir, base if n == 1 else f"{base}-{n}", latest)
    return open_run(runs_dir, base, latest)  # says which folder is in the way


class RunDirExists(RunDirError):
    """The run directory is already there (another --run-id, or a moment later)."""


def open_run(runs_dir: Path, run_id: str, latest: str = LATEST) -> RunDir:
    """A new run directory, locked for this diagbench; `runs_dir/<latest>` points at it."""
    check_run_id(run_id)
    path = runs_dir / run_id
    try:
        path.mkdir(parents=True, exist_ok=False)
    except FileExistsError:
        holder = lock_holder(path)
        busy = f", in use by diagbench {holder}" if holder else ""
        raise RunDirExists(f"run directory {path} already exists{busy} (choose another --run-id)") from None
    except OSError as exc:
        raise RunDirError(f"cannot create run directory {path}: {exc.strerror}") from None
    lock = lock_run(path)
    try:
        (path / "cells").mkdir()
    except OSError as exc:
        lock.release()
        raise WriteError(path / "cells", exc) from None
    _point_latest(runs_dir, run_id, latest)
    return RunDir(path, lock)


def open_existing_run(path: Path) -> RunDir:
    """An existing run directory to finish, locked for this diagbench."""
    return RunDir(path, lock_run(path))


class RunLock:
    """An `flock` on <run>/.lock: one diagbench at a time writes a run directory. The
    kernel drops it when its holder dies, so a killed diagbench never leaves it stuck."""

    _held: dict[Path, RunLock] = {}  # noqa: RUF012  # this process's locks, by run directory
    _guard = threading.Lock()

    def __init__(self, path: Path, fd: int | None):
        self.path, self.fd = path, fd

    def release(self) -> None:
        if self.fd is None:
            return
        with RunLock._guard:
            RunLock._held.pop(self.path, None)
        os.close(self.fd)  # closing drops the flock
        self.fd = None


def lock_run(path: Path) -> RunLock:
    """Lock the run directory for this process, or say who has it (exit 2)."""
    lock = try_lock_run(path)
    if lock is None:
        raise RunDirError(
            f"run directory {path} is in use by diagbench {lock_holder(path) or '(pid unknown)'} "
            "(wait for it to finish, or stop it; then run again)"
        )
    return lock


def try_lock_run(path: Path) -> RunLock | None:
    """The run directory's lock, or None if another diagbench holds it. Where this process
    holds it already, a lock whose release does nothing. The `.lock` must be a regular file
    of this user (never a link: the pid written into it must land nowhere else)."""
    key = path.resolve()
    with RunLock._guard:  # threads of one process take it one at a time, and see each other's
        if key in RunLock._held:
            return RunLock(key, None)
        try:
            with Folder.open(path) as folder:
                fd = folder.lock_file(LOCK_FILE)
        except OSError as exc:
            why = exc.strerror if isinstance(exc, Unsafe) else exc.strerror or str(exc)
            raise RunDirError(f"cannot lock run directory {path}: {LOCK_FILE}: {why}") from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            return None
        except OSError:  # a file system without locks (some network mounts): proceed unguarded
            pass
        with contextlib.suppress(OSError):
            os.ftruncate(fd, 0)
            os.pwrite(fd, f"pid {os.getpid()}\n".encode(), 0)
        lock = RunLock(key, fd)
        RunLock._held[key] = lock
    return lock


def lock_holder(path: Path) -> str | None:
    """'pid N' of the diagbench holding the run directory, or None if nobody does (or its
    `.lock` is no regular file: nothing diagbench locked)."""
    try:
        with Folder.open(path) as folder:
            fd = folder.open_file(LOCK_FILE)
    except OSError:
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return os.pread(fd, 100, 0).decode("utf-8", errors="replace").strip() or "(pid unknown)"
    except OSError:
        return None
    finally:
        os.close(fd)
    return None


def _point_latest(runs_dir: Path, run_id: str, name: str) -> None:
    tmp = f".{name}.{os.getpid()}.{secrets.token_hex(4)}"
    with contextlib.suppress(OSError), Folder.open(runs_dir) as folder:
        try:
            os.symlink(run_id, tmp, dir_fd=folder.fd)
            os.replace(tmp, name, src_dir_fd=folder.fd, dst_dir_fd=folder.fd)  # atomic: always a whole run
        except OSError:  # a file system without symlinks: the run itself is what matters
            folder.unlink(tmp)


@dataclass(frozen=True)
class Unreadable:
    """A record that could not be read, and why: named to the user, never hiding the rest."""

    path: Path
    why: str

    def __str__(self) -> str:
        return f"{self.path}: {self.why}"


@dataclass(frozen=True)
class LoadedRun:
    path: Path
    manifest: Manifest
    records: list[AttemptRecord]
    unreadable: list[Unreadable] = field(default_factory=list)


def _where_runs_are(path: Path) -> str:
    """Where to look: runs/ here, or (there is none here) the folder the run was started in."""
    if Path("runs").is_dir():
        return "runs are under runs/, e.g. runs/latest"
    return (
        f"there is no runs/ folder in {Path.cwd()}: give the run's path as seen from here, or run "
        "diagbench in the folder the run was started in"
    )


def load_run(path: Path) -> LoadedRun:
    """Read a finished, partial or interrupted run back from disk: every readable record,
    and each unreadable one named with its reason. A manifest written by a newer diagbench
    is refused (its meaning is not guessed)."""
    manifest_path = path / "manifest.json"
    if not path.is_dir():
        raise RunDirError(f"{path}: no such run directory ({_where_runs_are(path)})")
    if not manifest_path.exists():
        raise RunDirError(f"{path}: no manifest.json here; is this a diagbench run directory?")
    unreadable: list[Unreadable] = []
    manifest = _read_manifest(manifest_path, unreadable)
    records, unreadable = _read_records(path, unreadable)
    return LoadedRun(path.resolve(), manifest, records, unreadable)


def _read_records(path: Path, unreadable: list[Unreadable]) -> tuple[list[AttemptRecord], list[Unreadable]]:
    """Each attempt's result.json, read in a real folder under cells/: a cell folder planted
    as a link is named as unreadable, never read through."""
    records: list[AttemptRecord] = []
    try:
        cells = Folder.open(path).walk(("cells",))
    except OSError:
        return records, unreadable
    with cells:
        for name in cells.names():
            info = cells.lstat(name)
            if info is None or not (stat.S_ISDIR(info.st_mode) or stat.S_ISLNK(info.st_mode)):
                continue
            result = cells.path / name / "result.json"
            try:
                with cells.folder(name) as folder:
                    if folder.lstat("result.json") is None:
                        continue  # launched, or planned, and not ended yet
                    records.append(_read_record(result, folder))
            except Unsafe as exc:
                unreadable.append(Unreadable(result, str(exc.strerror)))
            except OSError as exc:
                unreadable.append(Unreadable(result, f"cannot be read: {exc.strerror}"))
            except RecordError as exc:
                unreadable.append(Unreadable(result, str(exc)))
    return records, unreadable


def _read_manifest(path: Path, unreadable: list[Unreadable]) -> Manifest:
    try:
        return read_manifest(path.parent)
    except RecordError as exc:
        unreadable.append(Unreadable(path, str(exc)))
        return Manifest.from_json({})


def read_manifest(run: Path) -> Manifest:
    """The one reader of a run's manifest.json: RecordError if it cannot be read at all (a
    malformed part is named in its `problems`); RunDirError if a newer diagbench wrote it."""
    path = run / "manifest.json"
    data = _read_json(path)
    try:
        return Manifest.from_json(data)
    except NewerManifest as exc:
        raise RunDirError(f"{path}: {exc}") from None


def _read_record(path: Path, folder: Folder) -> AttemptRecord:
    record = AttemptRecord.from_json(_read_json(path, folder))
    if record.attempt != path.parent.name:  # the folder is the attempt: a record cannot point elsewhere
        raise RecordError(f"field 'attempt': {record.attempt!r} is not its folder {path.parent.name!r}")
    return record


def _read_json(path: Path, folder: Folder | None = None) -> dict[str, JSON]:
    """A JSON object from a regular file of sane size (read in `folder` when given: no link
    followed on the way); RecordError says what is wrong."""
    try:
        raw = folder.read(path.name, MAX_RECORD_BYTES) if folder else read_regular(path, MAX_RECORD_BYTES)
        data = json.loads(raw.decode("utf-8"))  # never through a link, nor a FIFO
    except Unsafe as exc:  # a link, a FIFO, a device, a file too large: never followed nor read
        raise RecordError(str(exc.strerror)) from None
    except OSError as exc:
        raise RecordError(f"cannot be read: {exc.strerror}") from None
    except UnicodeDecodeError:
        raise RecordError("not UTF-8 text") from None
    except ValueError as exc:
        raise RecordError(f"not valid JSON ({exc})") from None
    if not isinstance(data, dict):
        raise RecordError(f"expected a JSON object, got {type(data).__name__}")
    return data
