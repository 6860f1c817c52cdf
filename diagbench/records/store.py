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
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from diagbench.errors import RunDirError
from diagbench.records.record import AttemptRecord

MANIFEST_VERSION = 1


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
class LoadedRun:
    path: Path
    manifest: dict[str, Any]
    records: list[AttemptRecord]


def load_run(path: Path) -> LoadedRun:
    """Read a finished, partial or interrupted run back from disk."""
    manifest_path = path / "manifest.json"
    if not path.is_dir():
        raise RunDirError(f"{path}: no such run directory (runs are under runs/, e.g. runs/latest)")
    if not manifest_path.is_file():
        raise RunDirError(f"{path}: no manifest.json here; is this a diagbench run directory?")
    manifest = _read_json(manifest_path)
    records = []
    for result in sorted((path / "cells").glob("*/result.json")):
        records.append(AttemptRecord.from_json(_read_json(result)))
    return LoadedRun(path.resolve(), manifest, records)


def _read_json(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise RunDirError(f"{path}: unreadable ({exc})") from None
    if not isinstance(data, dict):
        raise RunDirError(f"{path}: expected a JSON object")
    return data
