"""The two small files through which a controller and its worker on another machine talk,
each written atomically into the shared run directory:

    cells/<attempt>/job.json       written by the controller: which attempt, which spec, the job id
    cells/<attempt>/progress.json  written by the worker: node, GPUs, current phase
"""

from __future__ import annotations

import contextlib
import json
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from diagbench.errors import RecordError
from diagbench.records.store import write_json

if TYPE_CHECKING:
    from diagbench.spec.load import Spec
    from diagbench.spec.plan import PlannedAttempt

__all__ = ["JOB_FILE", "JOB_FILE_VERSION", "PROGRESS_FILE", "JobFile", "Progress"]

JOB_FILE = "job.json"
PROGRESS_FILE = "progress.json"
JOB_FILE_VERSION = 1


@dataclass(frozen=True)
class JobFile:
    """What the worker needs to find its attempt, and which cluster job runs it. (The
    worker tags its server's tree itself: the tree's owner is the worker, on the node.)"""

    attempt: str
    cell_id: str
    repeat: int
    params: dict[str, str]
    spec_path: str  # absolute: the node reads the spec where the controller did
    spec_sha256: str
    submitted_at: float | None = None  # epoch seconds
    job_id: str | None = None
    version: int = JOB_FILE_VERSION

    @classmethod
    def of(cls, item: PlannedAttempt, spec: Spec, job_id: str | None = None) -> JobFile:
        """The job file of one planned attempt of `spec`, submitted now."""
        cell, spec_path = item.cell, str(spec.path.resolve())
        return cls(item.name, cell.id, item.repeat, dict(cell.params), spec_path, spec.sha256, time.time(), job_id)

    def write(self, folder: Path) -> None:
        write_json(folder / JOB_FILE, asdict(self))

    @classmethod
    def read(cls, folder: Path) -> JobFile:
        data = _read(folder / JOB_FILE)
        if data is None:
            raise RecordError(f"{folder / JOB_FILE}: missing or unreadable (is the run directory shared?)")
        if data.get("version") != JOB_FILE_VERSION:
            raise RecordError(f"{folder / JOB_FILE}: version {data.get('version')!r}, this diagbench reads 1")
        try:
            return cls(**data)
        except TypeError as exc:
            raise RecordError(f"{folder / JOB_FILE}: malformed ({exc})") from None


@dataclass(frozen=True)
class Progress:
    """The worker's side: where it runs and how far its server got."""

    job_id: str
    node: str
    gpus: list[str] = field(default_factory=list)
    phase: str = "starting"
    started_at: float = 0.0  # epoch seconds the worker started

    def write(self, folder: Path) -> None:
        write_json(folder / PROGRESS_FILE, asdict(self))

    @classmethod
    def read(cls, folder: Path) -> Progress | None:
        data = _read(folder / PROGRESS_FILE)
        try:
            return cls(**data) if data else None
        except TypeError:
            return None


def _read(path: Path) -> dict[str, Any] | None:
    with contextlib.suppress(OSError, ValueError):
        data = json.loads(path.read_text(encoding="utf-8"))
        return data if isinstance(data, dict) else None
    return None
