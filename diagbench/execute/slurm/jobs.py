"""One attempt as one Slurm batch job: what it asks for and the script it runs (the files
through which the controller and the worker talk are execute/remote/files.py's).

    cells/<attempt>/job.sh         the batch script (setup lines, then the worker)
    cells/<attempt>/slurm.out      the job's own stdout and stderr (the worker's, not the server's)
"""

from __future__ import annotations

import contextlib
import math
import shlex
import sys
from dataclasses import asdict, dataclass
from pathlib import Path

from diagbench.execute.slurm.keys import ARGS, PARTITION, PYTHON, SETUP, TIME
from diagbench.jsonvalue import JSON
from diagbench.spec.executor import ExecutorSpec
from diagbench.spec.load import ServerSpec

__all__ = [
    "OUTPUT_FILE",
    "SCRIPT_FILE",
    "WALLTIME_MARGIN_S",
    "SlurmSettings",
    "job_name",
    "job_script",
    "output_tail",
    "walltime",
]

SCRIPT_FILE = "job.sh"
OUTPUT_FILE = "slurm.out"
# walltime beyond timeout + grace: the worker's start, the spec load, teardown's confirm
# and drain, and Slurm's own minute granularity
WALLTIME_MARGIN_S = 120.0


@dataclass(frozen=True)
class SlurmSettings:
    """What every job of a run asks Slurm for, and how the node starts the worker."""

    walltime_s: float
    gpus: int = 0
    partition: str | None = None
    args: tuple[str, ...] = ()
    setup: tuple[str, ...] = ()
    python: str = sys.executable
    nodes: int = 1  # server.nodes: the job holds this many nodes, one task on each (execute/slurm/span.py)

    @classmethod
    def of(cls, spec: ExecutorSpec, server: ServerSpec) -> SlurmSettings:
        # server.gpus comes with GPU slots; a spec without it asks for no GPU
        gpus = getattr(server, "gpus", None) or 0
        return cls(
            walltime_s=spec.read(TIME) or server.timeout + server.grace + WALLTIME_MARGIN_S,
            gpus=int(gpus),
            partition=spec.read(PARTITION),
            args=spec.read(ARGS),
            setup=spec.read(SETUP),
            python=spec.read(PYTHON) or sys.executable,
            nodes=max(1, int(getattr(server, "nodes", 1) or 1)),
        )

    def sbatch_options(self, with_gpus: bool = True, time: str | None = None) -> list[str]:
        """Options every job of the run shares; the user's own args come last, so they win."""
        options = [f"--time={time or walltime(self.walltime_s)}"]
        if self.partition:
            options.append(f"--partition={self.partition}")
        if with_gpus and self.gpus > 0:
            options.append(f"--gres=gpu:{self.gpus}")  # per node
        if with_gpus and self.nodes > 1:  # the probe job needs one node
            options += [f"--nodes={self.nodes}", "--ntasks-per-node=1"]
        # a requeued job would launch the same attempt twice into one folder
        options.append("--no-requeue")
        return [*options, *self.args]

    def to_json(self) -> dict[str, JSON]:
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
    worker = shlex.join([settings.python, "-m", "diagbench", "worker", "--kind", "slurm", str(run_dir), attempt])
    return "\n".join(
        [
            "#!/bin/sh",
            f"# diagbench attempt {attempt} of {run_dir.name}: one launch, recorded in this folder",
            *settings.setup,
            f"exec {worker}",
            "",
        ]
    )


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
