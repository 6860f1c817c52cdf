"""The worker a Ray job runs (`diagbench worker --kind ray RUN_DIR ATTEMPT`): the generic worker
(execute/remote/worker.py), told where it runs by the job's environment, stopped by a file the
controller writes (Ray's own stop kills the job's tree a few seconds after SIGTERM, sooner than a
server's grace), and watched by a watchdog that stops the attempt's tagged processes if the
worker itself is killed."""

from __future__ import annotations

import dataclasses
import json
import os
import shlex
import signal
import socket
import sys
import threading
from pathlib import Path

from diagbench.errors import RecordError
from diagbench.execute.ray.span import span_command
from diagbench.execute.ray.watchdog import start_watchdog
from diagbench.execute.remote.worker import Site
from diagbench.execute.remote.worker import run_worker as run_remote
from diagbench.records.parts import NodeExit
from diagbench.records.record import AttemptRecord
from diagbench.records.typed import build
from diagbench.spec.load import ServerSpec
from diagbench.vocab import Outcome

__all__ = ["STOPPED_REASON", "STOP_FILE", "job_id_here", "run_worker"]

NODES_FILE = "nodes.json"  # cells/<attempt>/nodes.json: each node's process, written by the span
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
    if server.nodes <= 1:
        return server
    gpus, record = server.gpus or 0, folder.resolve() / NODES_FILE
    if not server.shell:
        command = span_command(sys.executable, server.nodes, gpus, server.grace, record, list(server.command))
        return dataclasses.replace(server, command=tuple(command))
    # a shell command: the cell's words follow the spec's, so they reach it as "$@"
    inner = span_command(sys.executable, server.nodes, gpus, server.grace, record, ["/bin/sh", "-c"])
    script = server.command[0] + ' "$@"'
    text = f"exec {shlex.join(inner)} {shlex.quote(script)} sh"
    return dataclasses.replace(server, command=(text,))


def with_nodes(record: AttemptRecord, folder: Path) -> AttemptRecord:
    """The nodes' processes in the record (and the command as the spec wrote it, not the span);
    a crash is put on the node whose process ended first, the one the others followed."""
    seen = _read_nodes(folder / NODES_FILE)
    if seen is None:
        return record
    nodes, first = seen
    command = record.command
    if "--" in command and "diagbench.execute.ray.span" in command:
        command = command[command.index("--") + 1 :]
    record = dataclasses.replace(record, nodes=nodes, command=command)
    if first is not None and record.outcome is Outcome.CRASHED:
        node = nodes[first]
        how = f"exit code {node.exit_code}" if node.exit_code is not None else f"signal {node.signal}"
        reason = f"node {first}'s process ended first ({how}); the other nodes were stopped"
        record = dataclasses.replace(record, reason=f"{reason}: {record.reason}" if record.reason else reason)
    return record


def _read_nodes(path: Path) -> tuple[tuple[NodeExit, ...], int | None] | None:
    """The span's nodes.json; None if it wrote none (or wrote it wrong: then the record goes without)."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        nodes = tuple(build(NodeExit, n, f"nodes[{i}].") for i, n in enumerate(data["nodes"]))
    except (OSError, ValueError, KeyError, TypeError, RecordError):
        return None
    first = data.get("first")
    return nodes, first if isinstance(first, int) and 0 <= first < len(nodes) else None
