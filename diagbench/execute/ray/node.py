"""One node of an attempt that spans nodes: a Ray actor, placed on its bundle of the attempt's
placement group, that starts the server's process on its node (in a new session, tagged, as a
local launch), hands its output over as it is written, and stops its whole tree on that node
(the group and every process with its tag, SIGTERM, grace, SIGKILL). A watchdog on the node
stops the tree if the actor itself is killed (its span died)."""

from __future__ import annotations

import dataclasses
import os
import select
import socket
import threading
import time
from pathlib import Path
from typing import Any

from diagbench.errors import LaunchError
from diagbench.execute.ray.watchdog import start_watchdog
from diagbench.launch.process import Launch, ServerProcess, Teardown, stop_tree
from diagbench.launch.tags import Tag, current_scope, me, new_nonce

__all__ = ["NodeProcess"]

READ_WAIT_S = 0.2  # a read returns at once when output arrives; at the latest after this
CHUNK = 1 << 16


class NodeProcess:
    """The server's process on one node (made a Ray actor by span.py)."""

    def __init__(self, node: int):
        self.node = node
        self.proc: ServerProcess | None = None
        self.error = ""
        self.lock = threading.Lock()
        self.teardown: Teardown | None = None
        self.exited_at: float | None = None
        start_watchdog()  # this actor's own: if Ray kills it, its tree on this node is stopped

    def where(self) -> dict[str, str]:
        """This node: its address (the rendezvous's MASTER_ADDR for node 0), Ray's node id, host name."""
        import ray

        context = ray.get_runtime_context()
        ip = getattr(ray.util, "get_node_ip_address")()  # noqa: B009  # unannotated in Ray: mypy refuses the call
        return {"ip": ip, "node_id": context.get_node_id(), "host": socket.gethostname()}

    def free_port(self) -> int:
        """A port free on this node now, for the rendezvous (node 0's)."""
        with socket.socket() as probe:
            probe.bind(("", 0))
            return int(probe.getsockname()[1])

    def start(self, argv: list[str], env: dict[str, str], cwd: str) -> int | None:
        """Start the process (Ray's CUDA_VISIBLE_DEVICES for this bundle is the node's own); its pid."""
        full = {**os.environ, **env}
        given = Tag.from_env(full) or Tag(new_nonce(), "span", me(), Path(cwd), current_scope())
        # the node's own tag, owned by this actor: its watchdog and its teardown find this node's tree
        tag = dataclasses.replace(given, attempt=f"{given.attempt}.node{self.node}", owner=me())
        full |= tag.env()
        try:
            with self.lock:
                self.proc = ServerProcess(Launch(tuple(argv), full, Path(cwd), False, tag))
            return self.proc.pid
        except LaunchError as exc:
            self.error = str(exc)
            return None

    def read(self) -> tuple[bytes, bool, int | None]:
        """What the process wrote since the last read (waiting a moment for it), whether its output
        has ended, and its exit code (negative: the signal) once it has exited."""
        proc = self.proc
        if proc is None:
            return (f"diagbench: node {self.node}: {self.error}\n".encode() if self.error else b""), True, None
        select.select([proc.pipe], [], [], READ_WAIT_S)
        data, ended = b"", False
        for _ in range(32):
            chunk = proc.read(CHUNK)
            if chunk is None:
                ended = True
                break
            if not chunk:
                break
            data += chunk
        code = proc.exit_code()
        if code is not None and self.exited_at is None:
            self.exited_at = time.time()
        return data, ended, code

    def stop(self, grace: float) -> dict[str, Any]:
        """Stop this node's tree (its group and every process with its tag), on `grace`."""
        with self.lock:
            proc = self.proc
        if proc is None:
            return {"killed": 0, "left": []}
        self.teardown = stop_tree(proc, grace)
        return {"killed": len(self.teardown.killed), "left": list(self.teardown.left_behind)}

    def exit(self) -> tuple[int | None, float | None]:
        """The process's exit code and when it exited (epoch seconds), once it has."""
        proc = self.proc
        code = proc.exit_code() if proc is not None else None
        if code is not None and self.exited_at is None:
            self.exited_at = time.time()
        return code, self.exited_at
