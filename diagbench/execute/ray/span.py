"""An attempt that spans nodes (`server.nodes: N`), as the process the worker launches in the
server's place: it asks Ray for a placement group of N bundles, one per node (STRICT_SPREAD),
starts the server's command on each (execute/ray/node.py) with the rendezvous variables
(`MASTER_ADDR`, `MASTER_PORT`, `NODE_RANK`, `NNODES`), and writes every node's output to its
own stdout as it arrives, each line behind its node prefix (`[node N] `, logs/ranks.py). So the
worker reads one log, decides on the line and tears down as for one process.

It ends when the first node's process ends (that node's exit code is its own; the others are
stopped), or on SIGTERM (every node stopped on the grace it was given). Either way it writes
each node's {node, pid, exit_code, signal, exited_s, node_id, host} to the --record file.

    python -m diagbench.execute.ray.span --nodes N --gpus G --grace S --record FILE -- ARGV...
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import signal
import sys
import threading
import time
from pathlib import Path
from types import ModuleType
from typing import Any

from diagbench.execute.ray.node import NodeProcess
from diagbench.execute.remote.nodes import Merge, parse_span, rendezvous_env
from diagbench.jsonvalue import JSON
from diagbench.safefiles import write_file

__all__ = ["main"]

DRAIN_READS = 16  # after a node's process ended: reads of what it left in the pipe (each waits a moment)
STOP_MARGIN_S = 1.0  # the nodes' grace is the span's, less this: they are stopped before the span is
# the worker's own variables that a node must not take over: its node's own come from Ray there
_NOT_PASSED = ("CUDA_VISIBLE_DEVICES", "HOSTNAME", "PWD", "OLDPWD", "SHLVL", "_")


class _Span:
    def __init__(self, args: argparse.Namespace):
        self.args = args
        self.stop = threading.Event()  # SIGTERM, or the first node's end
        self.first: int | None = None  # the node whose process ended first
        self.first_lock = threading.Lock()
        self.merge = Merge()
        self.actors: list[Any] = []
        self.places: list[dict[str, str]] = []  # each node's ip, node_id and host (NodeProcess.where)
        self.pids: list[int | None] = []
        self.started = time.time()

    def run(self) -> int:
        import ray
        from ray.util.placement_group import placement_group, remove_placement_group

        g = self.args.gpus
        bundle = {"CPU": 1.0, **({"GPU": float(g)} if g else {})}
        group = placement_group([dict(bundle) for _ in range(self.args.nodes)], strategy="STRICT_SPREAD")
        try:
            if not self._placed(group):
                return 128 + signal.SIGTERM
            self._start_nodes(ray, group)
            threads = [threading.Thread(target=self._pump, args=(k,), daemon=True) for k in range(len(self.actors))]
            for thread in threads:
                thread.start()
            self.stop.wait()
            self._stop_nodes(ray)
            for thread in threads:
                thread.join(timeout=self.args.grace + 5)
            return self._exit_code(ray)
        finally:
            for actor in self.actors:
                ray.kill(actor)
            remove_placement_group(group)

    def _placed(self, group: Any) -> bool:
        """Wait until Ray has placed every bundle (or SIGTERM)."""
        import ray

        ready = group.ready()
        while not self.stop.is_set():
            done, _ = ray.wait([ready], timeout=0.5)
            if done:
                return True
        return False

    def _start_nodes(self, ray: Any, group: Any) -> None:
        from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

        remote = ray.remote(NodeProcess)
        g = self.args.gpus
        for k in range(self.args.nodes):
            strategy = PlacementGroupSchedulingStrategy(group, placement_group_bundle_index=k)
            options = {"num_cpus": 1, "num_gpus": g, "max_concurrency": 4, "scheduling_strategy": strategy}
            self.actors.append(remote.options(**options).remote(k))
        self.places = ray.get([a.where.remote() for a in self.actors])
        port = ray.get(self.actors[0].free_port.remote())
        env = {k: v for k, v in os.environ.items() if k not in _NOT_PASSED and not k.startswith("RAY_")}
        starts = [
            a.start.remote(
                self.args.argv, env | rendezvous_env(k, len(self.actors), self.places[0]["ip"], port), os.getcwd()
            )
            for k, a in enumerate(self.actors)
        ]
        self.pids = ray.get(starts)
        self.started = time.time()
        self._write([self._node(k, None, None) for k in range(len(self.actors))])  # a span killed later still says

    def _pump(self, node: int) -> None:
        """One node's output into the merged log until it ends; its end may end the span."""
        import ray

        pending, actor = b"", self.actors[node]
        while True:
            data, ended, code = ray.get(actor.read.remote())
            if code is not None and not ended:  # its process ended; a child of it may keep the pipe open
                data, ended = self._drain(actor, data)
            pending = self.merge.feed(node, pending, data, final=ended or code is not None)
            if code is not None or (ended and self.stop.is_set()):
                break
            if ended:
                time.sleep(0.05)  # its output closed, its process not yet reaped
        with self.first_lock:
            if self.first is None and not self.stop.is_set():
                self.first = node
                self.stop.set()

    def _drain(self, actor: Any, data: bytes) -> tuple[bytes, bool]:
        """What a node whose process has ended still has in its pipe (a few reads, while it comes)."""
        import ray

        for _ in range(DRAIN_READS):
            more, ended, _code = ray.get(actor.read.remote())
            data += more
            if ended or not more:
                return data, ended
        return data, False

    def _stop_nodes(self, ray: ModuleType) -> None:
        grace = max(0.5, self.args.grace - STOP_MARGIN_S)
        ray.get([a.stop.remote(grace) for a in self.actors], timeout=grace + 30)

    def _exit_code(self, ray: ModuleType) -> int:
        exits = ray.get([a.exit.remote() for a in self.actors])
        self._write([self._node(k, code, at) for k, (code, at) in enumerate(exits)])
        if self.first is None:
            return 128 + signal.SIGTERM
        code = exits[self.first][0]
        return 128 - code if code is not None and code < 0 else int(code or 0)

    def _write(self, nodes: list[dict[str, JSON]]) -> None:
        write_file(Path(self.args.record), json.dumps({"first": self.first, "nodes": nodes}).encode())

    def _node(self, k: int, code: int | None, at: float | None) -> dict[str, JSON]:
        place = self.places[k] if k < len(self.places) else {}
        return {
            "node": k,
            "pid": self.pids[k] if k < len(self.pids) else None,
            "exit_code": code if code is None or code >= 0 else None,
            "signal": signal.Signals(-code).name if code is not None and code < 0 else None,
            "exited_s": round(at - self.started, 3) if at is not None else None,
            "node_id": place.get("node_id", ""),
            "host": place.get("host", ""),
        }


def _parse(argv: list[str]) -> argparse.Namespace:
    return parse_span("diagbench.execute.ray.span", argv, ("--gpus", {"type": int, "default": 0}))


def main(argv: list[str]) -> int:
    import ray

    args = _parse(argv)
    ray.init(address=os.environ.get("RAY_ADDRESS") or "auto", logging_level=logging.ERROR, log_to_driver=False)
    span = _Span(args)
    signal.signal(signal.SIGTERM, lambda *_: span.stop.set())  # teardown: every node stopped on its grace
    try:
        return span.run()
    finally:
        ray.shutdown()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
