"""The worker a Slurm job runs (`diagbench worker RUN_DIR ATTEMPT`): the generic worker
(execute/remote/worker.py), told where it runs by the job's environment."""

from __future__ import annotations

import os
import socket
from pathlib import Path

from diagbench.execute.remote.nodes import spanned as nodes_span
from diagbench.execute.remote.nodes import with_nodes
from diagbench.execute.remote.worker import Site
from diagbench.execute.remote.worker import run_worker as run_remote
from diagbench.records.record import AttemptRecord
from diagbench.spec.load import ServerSpec

__all__ = ["SIGTERM_REASON", "run_worker"]

SIGTERM_REASON = "stopped by SIGTERM from Slurm (scancel, preemption or the job's time limit)"


def run_worker(run_dir: Path, attempt: str) -> AttemptRecord:
    """Run the attempt in this Slurm job, and record it."""
    gpus = [g for g in os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",") if g]
    node = os.environ.get("SLURMD_NODENAME") or socket.gethostname()
    site = Site("slurm", os.environ.get("SLURM_JOB_ID", ""), node, SIGTERM_REASON, gpus, spanned, with_nodes)
    return run_remote(run_dir, attempt, site)


def spanned(server: ServerSpec, folder: Path) -> ServerSpec:
    """An attempt of several nodes: one job step over the job's nodes (execute/slurm/span.py)."""
    return nodes_span(
        server, folder, "diagbench.execute.slurm.span", ["--nodes", str(server.nodes), "--grace", f"{server.grace:g}"]
    )
