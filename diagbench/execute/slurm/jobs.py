"""One attempt as one Slurm batch job: what it asks for, the script it runs, and the two
small files through which the controller and the worker on the node talk.

    cells/<attempt>/job.sh         the batch script (setup lines, then the worker)
    cells/<attempt>/job.json       written by the controller: which attempt, which spec, the job id
    cells/<attempt>/progress.json  written by the worker: node, GPUs, current phase
    cells/<attempt>/slurm.out      the job's own stdout and stderr (the worker's, not the server's)
"""

from __future__ import annotations

import contextlib
import json
import math
import shlex
import sys
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from diagbench.errors import RecordError
from diagbench.records.store import write_json
from diagbench.spec.executor import ExecutorSpec
from diagbench.spec.load import ServerSpec

JOB_FILE = "job.json"
PROGRESS_FILE = "progress.json"
SCRIPT_FILE = "job.sh"
OUTPUT_FILE = "slurm.out"
# walltime beyond timeout + grace: the worker's start, the spec load, teardown's confirm
# and drain, and Slurm's own minute granularity
WALLTIME_MARGIN_S = 120.0
JOB_FILE_VERSION = 1


@dataclass(frozen=True)
class SlurmSettings:
    """What every job of a run asks Slurm for, and how the node starts the worker."""

    walltime_s: float
    gpus: int = 0
    partition: str | None = None
    args: tuple[str, ...] = ()
    setup: tuple[str, ...] = ()
    python: str = sys.executable

    @classmethod
    def of(cls, spec: ExecutorSpec, server: ServerSpec) -> SlurmSettings:
        # server.gpus comes with GPU slots; a spec without it asks for no GPU
        gpus = getattr(server, "gpus", None) or 0
        return cls(
            walltime_s=spec.time or server.timeout + server.grace + WALLTIME_MARGIN_S,
            gpus=int(gpus),
            partition=spec.partition,
            args=spec.args,
            setup=spec.setup,
            python=spec.python or sys.executable,
        )

    def sbatch_options(self, with_gpus: bool = True, time: str | None = None) -> list[str]:
        """Options every job of the run shares; the user's own args come last, so they win."""
        options = [f"--time={time or walltime(self.walltime_s)}"]
        if self.partition:
            options.append(f"--partition={self.partition}")
        if with_gpus and self.gpus > 0:
            options.append(f"--gres=gpu:{self.gpus}")
        # a requeued job would launch the same attempt twice into one folder
        options.append("--no-requeue")
        return [*options, *self.args]

    def to_json(self) -> dict[str, Any]:
        return {**asdict(self), "walltime": walltime(self.walltime_s), "args": list(self.args)}


def walltime(seconds: float) -> str:
    """Slurm's `[D-]HH:MM:SS`, rounded up to whole minutes (Slurm keeps limits in minutes)."""
    minutes = max(1, math.ceil(seconds / 60))
    days, minutes = divmod(minutes, 24 * 60)
    clock = f"{minutes // 60:02d}:{minutes % 60:02d}:00"
    return f"{days}-{clock}" if days else clock


def job_name(attempt: str) -> str:
    return f"diagbench-{attempt}"


def job_script(settings: SlurmSettings, run_dir: Path, attempt: str) -> str:
    """The batch script: the user's setup lines, then the worker in the job's place (exec,
    so a signal to the batch step reaches the worker itself)."""
    worker = shlex.join([settings.python, "-m", "diagbench", "worker", str(run_dir), attempt])
    return "\n".join(
        [
            "#!/bin/sh",
            f"# diagbench attempt {attempt} of {run_dir.name}: one launch, recorded in this folder",
            *settings.setup,
            f"exec {worker}",
            "",
        ]
    )


@dataclass(frozen=True)
class JobFile:
    """What the worker needs to find its attempt, and which Slurm job runs it. (The
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


def output_tail(folder: Path, lines: int = 3, limit: int = 300) -> str:
    """The last lines the job itself wrote (a worker that could not start says why there)."""
    with contextlib.suppress(OSError):
        with (folder / OUTPUT_FILE).open("rb") as handle:
            handle.seek(0, 2)
            handle.seek(max(0, handle.tell() - 4096))
            text = handle.read().decode("utf-8", errors="replace")
        tail = " | ".join(line.strip() for line in text.splitlines()[-lines:] if line.strip())
        return tail[-limit:]
    return ""
