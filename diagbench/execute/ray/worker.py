"""The worker a Ray job runs (`diagbench worker --kind ray RUN_DIR ATTEMPT`): the generic worker
(execute/remote/worker.py), told where it runs by the job's environment, stopped by a file the
controller writes (Ray's own stop kills the job's tree a few seconds after SIGTERM, sooner than a
server's grace), and watched by a watchdog that stops the attempt's tagged processes if the
worker itself is killed."""

from __future__ import annotations

import json
import os
import signal
import socket
import threading
from pathlib import Path

from diagbench.execute.ray.watchdog import start_watchdog
from diagbench.execute.remote.nodes import spanned as nodes_span
from diagbench.execute.remote.nodes import with_nodes
from diagbench.execute.remote.worker import Site
from diagbench.execute.remote.worker import run_worker as run_remote
from diagbench.records.record import AttemptRecord
from diagbench.spec.load import ServerSpec

__all__ = ["STOPPED_REASON", "STOP_FILE", "job_id_here", "run_worker"]

STOP_FILE = "stop"  # cells/<attempt>/stop: the controller asks the worker to tear down and record
STOPPED_REASON = "stopped by diagbench's request to its Ray job (or SIGTERM from Ray's stop)"
LOOK_EVERY_S = 0.2


def job_id_here() -> str:
    """The submission id of the Ray job this process runs in (Ray puts it in the job's config)."""
    try:
        config = json.loads(os.environ.get("RAY_JOB_CONFIG_JSON_ENV_VAR", "{}"))
    except ValueError:
        return ""
    return str((config.get("metadata") or {}).get("job_submission_id") or "") if isinstance(config, dict) else ""


def run_worker(run_dir: Path, attempt: str) -> AttemptRecord:
    """Run the attempt in this Ray job, and record it."""
    gpus = [g for g in os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",") if g]
    site = Site("ray", job_id_here(), socket.gethostname(), STOPPED_REASON, gpus, spanned, with_nodes)
    folder = run_dir / "cells" / attempt
    start_watchdog()
    done = threading.Event()
    threading.Thread(target=_watch_stop_file, args=(folder / STOP_FILE, done), daemon=True).start()
    try:
        return run_remote(run_dir, attempt, site)
    finally:
        done.set()


def _watch_stop_file(path: Path, done: threading.Event) -> None:
    """The controller's stop request, as the worker's SIGTERM (its teardown on its own grace)."""
    asked = 0
    while not done.wait(LOOK_EVERY_S):
        if path.exists() and asked < 2:  # a second request (Ctrl-C twice) hurries the teardown
            stamp = path.stat().st_size
            if stamp > asked:
                asked = stamp
                os.kill(os.getpid(), signal.SIGTERM)


def spanned(server: ServerSpec, folder: Path) -> ServerSpec:
    """An attempt of several nodes: the span (execute/ray/span.py) launched in the server's place."""
    options = ["--nodes", str(server.nodes), "--gpus", str(server.gpus or 0), "--grace", f"{server.grace:g}"]
    return nodes_span(server, folder, "diagbench.execute.ray.span", options)
