"""Before the first job: does the address answer as a Ray job server, does a job's node see the
run directory with diagbench there, and has the cluster the nodes and GPUs an attempt asks
for? A mistake here is one message and exit 2, before anything is submitted.

The probe job runs `python -m diagbench.execute.ray.probe FOLDER` on some node: it writes
the cluster's nodes, as Ray lists them, into FOLDER/seen.json."""

from __future__ import annotations

import json
import logging
import shlex
import socket
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from diagbench.errors import UserError
from diagbench.execute.ray.client import RayClient, RayJob
from diagbench.safefiles import remove_folder

__all__ = ["Cluster", "check_cluster"]

PROBE_WAIT_S = 120.0  # a probe asks for no resource: on a cluster that answers it starts in seconds
LOOK_S = 0.25
SEEN = "seen.json"


class Cluster:
    """What the probe saw: the node it ran on, the Ray version, and each alive node's GPUs."""

    def __init__(self, node: str, version: str, gpus: list[float]):
        self.node, self.version, self.gpus = node, version, gpus

    def enough(self, per_node: int, nodes: int) -> str | None:
        """Why an attempt of `nodes` node(s) x `per_node` GPUs can never be placed, or None."""
        fit = sum(1 for g in self.gpus if g >= per_node)
        if fit >= nodes:
            return None
        have = ", ".join(f"{g:g}" for g in sorted(self.gpus, reverse=True)) or "none"
        need = f"{nodes} node(s) with {per_node} GPU(s) each" if nodes > 1 else f"a node with {per_node} GPU(s)"
        return f"an attempt needs {need}; the cluster's {len(self.gpus)} node(s) have {have} GPU(s)"


def check_cluster(client: RayClient, python: str, folder: Path, per_node: int, nodes: int) -> Cluster:
    """The job server answers, a probe job on a node writes into `folder`, and the cluster has
    room for one attempt; UserError with the fix otherwise."""
    version = client.version()
    folder.mkdir(parents=True, exist_ok=True)
    probe = Path(tempfile.mkdtemp(prefix=".diagbench-probe-", dir=folder)).resolve()
    job_id = f"diagbench-probe-{probe.name.rsplit('-', 1)[-1]}"
    try:
        entry = shlex.join([python, "-m", "diagbench.execute.ray.probe", str(probe)])
        client.submit({"entrypoint": entry, "submission_id": job_id, "entrypoint_num_cpus": 0})
        cluster = _wait(client, job_id, probe, folder, version)
    finally:
        client.stop(job_id)
        remove_folder(probe)  # never through a link: the probe folder is under the runs directory
    why = cluster.enough(per_node, nodes)
    if why is not None:
        raise UserError(f"the Ray cluster at {client.url} is too small: {why} (server.gpus, server.nodes)")
    return cluster


def _wait(client: RayClient, job_id: str, probe: Path, folder: Path, version: str) -> Cluster:
    deadline = time.monotonic() + PROBE_WAIT_S
    job: RayJob | None = None
    while time.monotonic() < deadline:
        if (probe / SEEN).is_file():
            seen = json.loads((probe / SEEN).read_text(encoding="utf-8"))
            return Cluster(str(seen.get("host", "?")), version, [float(g) for g in seen.get("gpus", [])])
        job = client.job(job_id) or job
        if job is not None and not job.active:
            tail = " | ".join(client.logs(job_id).strip().splitlines()[-2:])[-300:]
            raise UserError(
                f"Ray probe job {job_id} ended {job.state} without writing into {folder} ({tail or job.reason}): "
                "the nodes need diagbench (executor.python names their interpreter) and the run directory on a "
                "file system they mount; pass --runs-dir on shared storage"
            )
        time.sleep(LOOK_S)
    state = job.describe() if job is not None else "not seen"
    raise UserError(f"Ray probe job {job_id} is still {state} after {PROBE_WAIT_S:.0f}s: is the cluster busy or down?")


def _seen() -> dict[str, Any]:
    """On the node: the host, and each alive node's GPUs as Ray counts them."""
    import ray  # the nodes have Ray (diagbench[ray]); the controller needs none

    ray.init(logging_level=logging.ERROR, log_to_driver=False)
    try:
        nodes = getattr(ray, "nodes")  # noqa: B009  # Ray leaves it unannotated: mypy would refuse the call
        alive = [n for n in nodes() if n.get("Alive")]
        return {"host": socket.gethostname(), "gpus": [float(n["Resources"].get("GPU", 0)) for n in alive]}
    finally:
        ray.shutdown()


if __name__ == "__main__":
    where = Path(sys.argv[1])
    seen = _seen()
    (where / (SEEN + ".tmp")).write_text(json.dumps(seen), encoding="utf-8")
    (where / (SEEN + ".tmp")).rename(where / SEEN)
