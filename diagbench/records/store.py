"""The run directory: atomic, versioned JSON records, and reading them back.

runs/<run-id>/manifest.json      written before the first launch
runs/<run-id>/cells/<attempt>/   server.log, result.json
runs/<run-id>/verdicts.json
runs/latest -> <run-id>
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import stat
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from diagbench.errors import RecordError, RunDirError
from diagbench.records.record import AttemptRecord

MANIFEST_VERSION = 1
MAX_RECORD_BYTES = 64 << 20  # a record is kilobytes; anything this large is not one


def write_json(path: Path, data: Any) -> None:
    """Write atomically: a reader sees the old file or the whole new one, never half."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            json.dump(data, handle, indent=2, sort_keys=False)
            handle.write("\n")
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def new_run_id(spec_name: str) -> str:
    safe = re.sub(r"[^A-Za-z0-9_.-]+", "-", spec_name).strip("-") or "run"
    return time.strftime("%Y%m%d-%H%M%S", time.localtime()) + "-" + safe


@dataclass(frozen=True)
class RunDir:
    path: Path

    @property
    def cells(self) -> Path:
        return self.path / "cells"

    def attempt_dir(self, attempt: str) -> Path:
        folder = self.cells / attempt
        folder.mkdir(parents=True, exist_ok=True)
        return folder

    def write_manifest(self, manifest: dict[str, Any]) -> None:
        write_json(self.path / "manifest.json", manifest)

    def write_result(self, record: AttemptRecord) -> None:
        write_json(self.attempt_dir(record.attempt) / "result.json", record.to_json())

    def write_verdicts(self, verdicts: list[dict[str, Any]]) -> None:
        write_json(self.path / "verdicts.json", verdicts)


def open_run(runs_dir: Path, run_id: str) -> RunDir:
    path = runs_dir / run_id
    try:
        path.mkdir(parents=True, exist_ok=False)
    except FileExistsError:
        raise RunDirError(f"run directory {path} already exists (choose another --run-id)") from None
    except OSError as exc:
        raise RunDirError(f"cannot create run directory {path}: {exc.strerror}") from None
    (path / "cells").mkdir()
    _point_latest(runs_dir, run_id)
    return RunDir(path)


def _point_latest(runs_dir: Path, run_id: str) -> None:
    link, tmp = runs_dir / "latest", runs_dir / f".latest.{os.getpid()}"
    with contextlib.suppress(FileNotFoundError):
        tmp.unlink()
    try:
        os.symlink(run_id, tmp)
        os.replace(tmp, link)  # atomic: `latest` always points at a whole run
    except OSError:  # a file system without symlinks: the run itself is what matters
        with contextlib.suppress(OSError):
            tmp.unlink()


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
    manifest: dict[str, Any]
    records: list[AttemptRecord]
    unreadable: list[Unreadable] = field(default_factory=list)


def load_run(path: Path) -> LoadedRun:
    """Read a finished, partial or interrupted run back from disk: every readable record,
    and each unreadable one named with its reason. A manifest written by a newer diagbench
    is refused (its meaning is not guessed)."""
    manifest_path = path / "manifest.json"
    if not path.is_dir():
        raise RunDirError(f"{path}: no such run directory (runs are under runs/, e.g. runs/latest)")
    if not manifest_path.exists():
        raise RunDirError(f"{path}: no manifest.json here; is this a diagbench run directory?")
    unreadable: list[Unreadable] = []
    manifest = _read_manifest(manifest_path, unreadable)
    records = []
    for result in sorted((path / "cells").glob("*/result.json")):
        try:
            records.append(_read_record(result))
        except RecordError as exc:
            unreadable.append(Unreadable(result, str(exc)))
    return LoadedRun(path.resolve(), manifest, records, unreadable)


def _read_manifest(path: Path, unreadable: list[Unreadable]) -> dict[str, Any]:
    try:
        manifest = _read_json(path)
    except RecordError as exc:
        unreadable.append(Unreadable(path, str(exc)))
        return {}
    version = manifest.get("manifest_version", MANIFEST_VERSION)
    if not isinstance(version, int) or isinstance(version, bool):
        unreadable.append(Unreadable(path, f"field 'manifest_version': expected an integer, got {version!r}"))
        return {}
    if version > MANIFEST_VERSION:
        raise RunDirError(
            f"{path}: manifest_version {version}: written by a newer diagbench (this one reads "
            f"{MANIFEST_VERSION}); read it with that version (pip install -U diagbench)"
        )
    return manifest


def _read_record(path: Path) -> AttemptRecord:
    record = AttemptRecord.from_json(_read_json(path))
    if record.attempt != path.parent.name:  # the folder is the attempt: a record cannot point elsewhere
        raise RecordError(f"field 'attempt': {record.attempt!r} is not its folder {path.parent.name!r}")
    return record


def _read_json(path: Path) -> dict[str, Any]:
    """A JSON object from a regular file of sane size; RecordError says what is wrong."""
    try:
        info = path.stat()
        if not stat.S_ISREG(info.st_mode):
            raise RecordError("not a regular file")
        if info.st_size > MAX_RECORD_BYTES:
            raise RecordError(f"{info.st_size} bytes: too large for a record")
        data = json.loads(path.read_bytes().decode("utf-8"))
    except OSError as exc:
        raise RecordError(f"cannot be read: {exc.strerror}") from None
    except UnicodeDecodeError:
        raise RecordError("not UTF-8 text") from None
    except ValueError as exc:
        raise RecordError(f"not valid JSON ({exc})") from None
    if not isinstance(data, dict):
        raise RecordError(f"expected a JSON object, got {type(data).__name__}")
    return data
