"""An attempt that spans nodes on Slurm (`server.nodes: N`), as the process the worker launches in
the server's place. The job holds N nodes (`sbatch --nodes=N --ntasks-per-node=1`); the span starts
one job step over them, `srun --nodes=N --ntasks=N --ntasks-per-node=1 --label`, whose task on
each node is this module again (`--task`): it starts the server's command with the rendezvous
variables (`MASTER_ADDR`: the span's node, `MASTER_PORT`, `NODE_RANK`: Slurm's `SLURM_NODEID`,
`NNODES`) in a session of its own, tagged as a local launch, stops that tree on SIGTERM (srun
passes the signal on to its tasks), and leaves its node's exit in `nodes/<N>.json` beside the
attempt. The step's output, each line behind srun's task label (`1: ...`), is written to stdout
behind the node prefix (`[node 1] `, logs/ranks.py), so the worker reads one log, decides on the
line and tears down as for one process.

The span ends when the first node's process ends (its exit code is the span's; the others are
stopped), or on SIGTERM (every node stopped on the grace it was given). Either way it writes each
node's {node, pid, exit_code, signal, exited_s, host} to the --record file.

    python -m diagbench.execute.slurm.span --nodes N --grace S --record FILE -- ARGV...
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import os
import re
import select
import signal
import socket
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from diagbench.errors import LaunchError
from diagbench.execute.remote.nodes import Merge, parse_span, rendezvous_env
from diagbench.jsonvalue import JSON, JSONObject, as_object
from diagbench.launch.process import Launch, ServerProcess, stop_tree
from diagbench.launch.tags import Tag, current_scope, me, new_nonce
from diagbench.safefiles import read_regular, write_file

__all__ = ["main", "split_label"]

NODE_LIMIT = 1 << 16  # a node's <k>.json: pid, exit, signal, host, time

_LABEL = re.compile(rb"^ *(\d{1,5}): ")  # srun --label: the task's number, padded to the widest
LOOK_EVERY_S = 0.2
STOP_MARGIN_S = 1.0  # the nodes' grace is the span's, less this: they are stopped before the span is
NODES_FOLDER = "nodes"  # beside the record: each task's own nodes/<N>.json
STOP_FILE = "stop"  # nodes/stop: the span asks every task to stop its node's tree


def split_label(line: bytes) -> tuple[int | None, bytes]:
    """(the task of an `srun --label` line, the line without its label); (None, line) for srun's own."""
    found = _LABEL.match(line)
    return (int(found.group(1)), line[found.end() :]) if found else (None, line)


@dataclass
class _Node:
    """One node's process as its task left it (`nodes/<N>.json`), checked field by field."""

    node: int
    pid: int | None = None
    exit_code: int | None = None
    signal: str | None = None
    exited_s: float | None = None
    host: str = ""

    def read(self, seen: JSONObject, started: float) -> None:
        self.pid, self.exit_code = _whole(seen.get("pid")), _whole(seen.get("exit_code"))
        name, host, ended = seen.get("signal"), seen.get("host"), seen.get("ended_at")
        self.signal = name if isinstance(name, str) and name in signal.Signals.__members__ else None
        self.host = host[:255] if isinstance(host, str) else ""
        if isinstance(ended, (int, float)) and not isinstance(ended, bool) and math.isfinite(ended):
            self.exited_s = round(ended - started, 3)  # Infinity is no JSON to write

    def to_json(self) -> dict[str, JSON]:
        return {
            "node": self.node,
            "pid": self.pid,
            "exit_code": self.exit_code,
            "signal": self.signal,
            "exited_s": self.exited_s,
            "node_id": self.host,
            "host": self.host,
        }


def _whole(value: JSON) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and abs(value) < 1 << 31 else None


class _Span:
    """The step over every node, its output relabelled, its end decided by the first node's."""

    def __init__(self, args: argparse.Namespace):
        self.args = args
        self.folder = Path(args.record).parent / NODES_FOLDER
        self.stop = threading.Event()  # SIGTERM, or the first node's end
        self.merge = Merge()
        self.started = time.time()

    def run(self) -> int:
        self.folder.mkdir(exist_ok=True)
        for old in [*self.folder.glob("*.json"), self.folder / STOP_FILE]:  # of an earlier try of this attempt
            old.unlink(missing_ok=True)
        with socket.socket() as probe:
            probe.bind(("", 0))
            port = int(probe.getsockname()[1])
        task = [sys.executable, "-m", "diagbench.execute.slurm.span", "--task", "--nodes", str(self.args.nodes)]
        task += ["--grace", f"{max(0.5, self.args.grace - STOP_MARGIN_S):g}", "--record", self.args.record]
        task += ["--master", socket.gethostname(), "--port", str(port), "--", *self.args.argv]
        n = str(self.args.nodes)
        srun = ["srun", f"--nodes={n}", f"--ntasks={n}", "--ntasks-per-node=1", "--label", "--unbuffered", *task]
        env = dict(os.environ)
        tag = Tag.from_env(env) or Tag(new_nonce(), "span", me(), Path.cwd(), current_scope())
        try:
            step = ServerProcess(Launch(tuple(srun), env | tag.env(), Path.cwd(), False, tag))
        except LaunchError as exc:
            sys.stdout.write(f"diagbench: could not start the job step over {n} nodes: {exc}\n")
            return 127
        self._write()  # a span killed later still says which nodes it had
        pump = threading.Thread(target=self._pump, args=(step,), daemon=True)
        pump.start()
        first: int | None = None
        while not self.stop.wait(LOOK_EVERY_S):
            first = self._first()
            if first is not None or step.exit_code() is not None:
                break
        self._stop_step(step)
        pump.join(timeout=5)
        if first is None and not self.stop.is_set():
            first = self._first()  # the step ended on its own: its tasks left their exits
        self._write(first)
        if first is None:
            code = step.exit_code()
            return 128 + signal.SIGTERM if code is None or self.stop.is_set() else abs(code)
        node = self._nodes()[first]
        if node.exit_code is not None:
            return node.exit_code
        return 128 + (signal.Signals[node.signal] if node.signal is not None else signal.SIGTERM)

    def _stop_step(self, step: ServerProcess) -> None:
        """Every node's tree stopped on its grace: a stop file the tasks look for (a signal to srun
        cancels the step, or reaches every process of the task, so Slurm kills the servers before
        their tasks can stop them whole and say how they ended); srun stopped only if its tasks
        outlive the grace."""
        write_file(self.folder / STOP_FILE, b"")  # never through a link the server planted there
        until = time.monotonic() + self.args.grace + STOP_MARGIN_S
        while step.exit_code() is None and time.monotonic() < until:
            time.sleep(0.05)
        stop_tree(step, STOP_MARGIN_S)

    def _pump(self, step: ServerProcess) -> None:
        pending = b""
        while True:
            select.select([step.pipe], [], [], LOOK_EVERY_S)
            data = step.read()
            if data is None:
                break
            pending = self._lines(pending + data)
        if pending:
            self._lines(pending + b"\n")

    def _lines(self, buf: bytes) -> bytes:
        cut = buf.rfind(b"\n") + 1
        for line in buf[:cut].split(b"\n")[:-1]:
            task, text = split_label(line)
            if task is None:  # srun's own words, as they are
                with self.merge.lock:
                    self.merge.out.write(line + b"\n")
                    self.merge.out.flush()
            else:
                self.merge.feed(task, b"", text + b"\n", final=False)
        return buf[cut:]

    def _nodes(self) -> list[_Node]:
        nodes = [_Node(k) for k in range(self.args.nodes)]
        for node in nodes:
            try:  # the server can plant one: read through the files door, every field checked
                seen = as_object(json.loads(read_regular(self.folder / f"{node.node}.json", NODE_LIMIT)))
            except (OSError, ValueError):
                continue
            if seen is not None:
                node.read(seen, self.started)
        return nodes

    def _first(self) -> int | None:
        """The node whose process ended first, once one has."""
        ended = [(n.exited_s, n.node) for n in self._nodes() if n.exited_s is not None]
        return min(ended)[1] if ended else None

    def _write(self, first: int | None = None) -> None:
        nodes = [n.to_json() for n in self._nodes()]
        write_file(Path(self.args.record), json.dumps({"first": first, "nodes": nodes}).encode())


def _task(args: argparse.Namespace) -> int:
    """One node's task: the server's command with the rendezvous variables, stopped whole on SIGTERM."""
    node = int(os.environ.get("SLURM_NODEID", "0"))
    env = dict(os.environ) | rendezvous_env(node, args.nodes, args.master, args.port)
    given = Tag.from_env(env) or Tag(new_nonce(), "span", me(), Path.cwd(), current_scope())
    tag = dataclasses.replace(given, attempt=f"{given.attempt}.node{node}", owner=me())
    folder = Path(args.record).parent / NODES_FOLDER
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())  # Slurm's own end of the step
    try:
        proc = ServerProcess(Launch(tuple(args.argv), env | tag.env(), Path.cwd(), False, tag))
    except LaunchError as exc:
        sys.stdout.write(f"diagbench: node {node}: {exc}\n")
        _leave(folder, node, None, 127)
        return 127
    out = sys.stdout.buffer
    while not stop.is_set() and not (folder / STOP_FILE).exists():
        select.select([proc.pipe], [], [], LOOK_EVERY_S)
        data = proc.read()
        if data:
            out.write(data)
            out.flush()
        if proc.exit_code() is not None and not data:
            break
    if proc.exit_code() is None:  # asked to stop: its whole tree, on its grace
        stop_tree(proc, args.grace)
    code = proc.exit_code()
    _leave(folder, node, proc.pid, code)
    return 128 - code if code is not None and code < 0 else int(code or 0)


def _leave(folder: Path, node: int, pid: int | None, code: int | None) -> None:
    seen = {
        "pid": pid,
        "exit_code": code if code is None or code >= 0 else None,
        "signal": signal.Signals(-code).name if code is not None and code < 0 else None,
        "host": socket.gethostname(),
        "ended_at": time.time(),
    }
    write_file(folder / f"{node}.json", json.dumps(seen).encode())  # replaced whole, never through a link


def _parse(argv: list[str]) -> argparse.Namespace:
    return parse_span(
        "diagbench.execute.slurm.span",
        argv,
        ("--task", {"action": "store_true"}),  # srun's task on one node
        ("--master", {"default": ""}),
        ("--port", {"type": int, "default": 0}),
    )


def main(argv: list[str]) -> int:
    args = _parse(argv)
    if args.task:
        return _task(args)
    span = _Span(args)
    signal.signal(signal.SIGTERM, lambda *_: span.stop.set())  # teardown: every node stopped on its grace
    return span.run()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
