"""The Ray plugin: `--executor ray` (or `executor: ray`), `--ray-address` (else $RAY_ADDRESS) and
`--ray-env`; one Ray job per attempt (execute/ray/executor.py)."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from diagbench.errors import UserError
from diagbench.execute.plugin import ExecutorOption, PluginBase, Settled
from diagbench.execute.ray.keys import ADDRESS, ADDRESS_VAR, ENV, KIND, PYTHON
from diagbench.spec.executor import ExecutorKey, ExecutorSpec

if TYPE_CHECKING:  # registered for every command line (its options): the rest is loaded when a run uses it
    from diagbench.execute.plugin import Build
    from diagbench.execute.scheduler import Executor
    from diagbench.execute.slots import SlotPlan
    from diagbench.records.record import AttemptRecord
    from diagbench.spec.gpus import GpuRequest
    from diagbench.spec.load import Spec

__all__ = ["RayPlugin"]


class RayPlugin(PluginBase):
    """Attempts as Ray jobs on an existing cluster, checked first by a probe job that must see
    the run directory and find room for an attempt."""

    kind: str = KIND
    on_this_host: bool = False
    spans_nodes: bool = True  # a placement group, one process per node (execute/ray/span.py)
    keys: tuple[ExecutorKey, ...] = (ADDRESS, ENV, PYTHON)
    options: tuple[ExecutorOption, ...] = (
        ExecutorOption("--ray-address", "address", "URL", f"the Ray dashboard: http://HEAD:8265 (${ADDRESS_VAR})"),
        ExecutorOption("--ray-env", "env", "NAME", "a variable of this environment each job gets", many=True),
    )

    def check(self, spec: Spec, layers: ExecutorSpec, folder: Path) -> Settled:
        from diagbench.execute.ray.client import RayClient
        from diagbench.execute.ray.executor import RaySettings
        from diagbench.execute.ray.probe import check_cluster
        from diagbench.records.redact import Redactor

        address = layers.read(ADDRESS) or os.environ.get(ADDRESS_VAR, "").strip()
        if not address:
            raise UserError(
                f"--executor ray needs the cluster's address: --ray-address http://HEAD:8265, or ${ADDRESS_VAR}"
            )
        python = layers.read(PYTHON) or sys.executable
        gpus, nodes = spec.server.gpus or 0, spec.server.nodes
        settings = RaySettings(address, python, gpus, nodes, layers.read(ENV))
        client = RayClient(address)
        try:
            cluster = check_cluster(client, python, folder, gpus, nodes)
        finally:
            client.close()
        shown = Redactor.of().text(address)  # a password in the URL is not recorded
        return Settled(settings, {"address": shown, "ray_version": cluster.version, "probe_node": cluster.node})

    def notes(
        self, spec: Spec, layers: ExecutorSpec, given: ExecutorSpec, parallel: int | None, gpus: bool
    ) -> list[str]:
        if gpus:
            raise UserError(
                "--gpus applies to local runs; on Ray the cluster hands out GPUs: set server.gpus (GPUs per attempt)"
            )
        missing = [n for n in layers.read(ENV) if n not in os.environ]
        return [f"--ray-env {n}: not set here, so the jobs do not get it" for n in missing]

    def slots(
        self, spec: Spec, given: SlotPlan | None, gpus: GpuRequest | None, parallel: int | None, attempts: int
    ) -> SlotPlan:
        """Plain slots (Ray places the jobs by their resources), one per attempt unless --parallel."""
        from diagbench.execute.slots import queue_slots

        per, nodes = spec.server.gpus or 0, spec.server.nodes
        shape = f"{nodes} nodes x {per} GPU(s)" if nodes > 1 else f"{per} GPU(s)"
        return queue_slots(spec.server, parallel, attempts, f"Ray: {shape} per job", "Ray")

    def build(self, run: Build) -> Executor:
        from diagbench.execute.ray.executor import RayExecutor

        return RayExecutor(run.spec, run.settled.settings, run.run_dir, run.gate, run.done)

    def recorded(self, layers: ExecutorSpec) -> dict[str, object]:
        """The address (a password in it blanked), the variables' names (never their values), the interpreter."""
        from diagbench.records.redact import Redactor

        address = layers.read(ADDRESS)
        return {
            "address": Redactor.of().text(address) if address else None,
            "env": list(layers.read(ENV)),
            "python": layers.read(PYTHON),
        }

    def worker(self, run_dir: Path, attempt: str) -> AttemptRecord:
        from diagbench.execute.ray.worker import run_worker

        return run_worker(run_dir, attempt)
