"""What every executor that spans nodes shares (`server.nodes: N`): the process launched in the
server's place (a *span*, each spanning plugin's own), the rendezvous variables
each node's process is given, one log merged from the nodes' output behind their node prefix
(`[node N] `, logs/ranks.py), and the nodes' exits the span leaves in `cells/<attempt>/nodes.json`
for the record."""

from __future__ import annotations

import argparse
import dataclasses
import json
import shlex
import sys
import threading
from pathlib import Path
from typing import BinaryIO

from diagbench.errors import RecordError
from diagbench.logs.ranks import node_prefix
from diagbench.records.parts import NodeExit
from diagbench.records.record import AttemptRecord
from diagbench.records.typed import build
from diagbench.safefiles import read_regular
from diagbench.spec.load import ServerSpec
from diagbench.vocab import Outcome

__all__ = ["NODES_FILE", "Merge", "parse_span", "read_nodes", "rendezvous_env", "spanned", "with_nodes"]

NODES_FILE = "nodes.json"  # cells/<attempt>/nodes.json: each node's process, written by the span
NODES_LIMIT = 1 << 20  # a nodes.json of 10,000 nodes is a few hundred kB
LONG_LINE = 1 << 20  # a node's line longer than this is passed on in parts (memory stays flat)


def rendezvous_env(node: int, nodes: int, master: str, port: int) -> dict[str, str]:
    """What torchrun-style launchers read to find each other."""
    return {"MASTER_ADDR": master, "MASTER_PORT": str(port), "NODE_RANK": str(node), "NNODES": str(nodes)}


def spanned(server: ServerSpec, folder: Path, module: str, options: list[str]) -> ServerSpec:
    """The server as its span (`python -m MODULE OPTIONS --record FILE -- ARGV`) launched in its place;
    a server of one node unchanged."""
    if server.nodes <= 1:
        return server
    head = [sys.executable, "-m", module, *options, "--record", str(folder.resolve() / NODES_FILE), "--"]
    if not server.shell:
        return dataclasses.replace(server, command=(*head, *server.command))
    # a shell command: the cell's words follow the spec's, so they reach it as "$@"
    script = server.command[0] + ' "$@"'
    text = f"exec {shlex.join([*head, '/bin/sh', '-c'])} {shlex.quote(script)} sh"
    return dataclasses.replace(server, command=(text,))


class Merge:
    """Every node's output into one stream, whole lines at a time, each behind its node's prefix."""

    def __init__(self, out: BinaryIO | None = None) -> None:
        self.lock = threading.Lock()
        self.out = out or sys.stdout.buffer

    def feed(self, node: int, pending: bytes, data: bytes, final: bool) -> bytes:
        """Write the complete lines of `pending + data`; what is left (a line not yet ended)."""
        buf = pending + data
        cut = buf.rfind(b"\n") + 1
        if (final and buf[cut:]) or len(buf) - cut > LONG_LINE:
            buf, cut = buf + b"\n", len(buf) + 1
        if cut:
            prefix = node_prefix(node)
            lines = buf[:cut].split(b"\n")[:-1]
            text = b"".join(prefix + line.replace(b"\r", b"\r" + prefix) + b"\n" for line in lines)
            with self.lock:
                self.out.write(text)
                self.out.flush()
        return buf[cut:]


def with_nodes(record: AttemptRecord, folder: Path) -> AttemptRecord:
    """The nodes' processes in the record (and the command as the spec wrote it, not the span);
    a crash is put on the node whose process ended first, the one the others followed."""
    seen = read_nodes(folder / NODES_FILE)
    if seen is None:
        return record
    nodes, first = seen
    command = record.command
    if "--" in command and any(w.startswith("diagbench.execute.") and w.endswith(".span") for w in command):
        command = command[command.index("--") + 1 :]
    record = dataclasses.replace(record, nodes=nodes, command=command)
    if first is not None and record.outcome is Outcome.CRASHED:
        node = nodes[first]
        how = f"exit code {node.exit_code}" if node.exit_code is not None else f"signal {node.signal}"
        reason = f"node {first}'s process ended first ({how}); the other nodes were stopped"
        record = dataclasses.replace(record, reason=f"{reason}: {record.reason}" if record.reason else reason)
    return record


def read_nodes(path: Path) -> tuple[tuple[NodeExit, ...], int | None] | None:
    """A span's nodes.json; None if it wrote none (or wrote it wrong: then the record goes without)."""
    try:
        data = json.loads(read_regular(path, NODES_LIMIT).decode("utf-8"))  # a FIFO or a link there is no record
        nodes = tuple(build(NodeExit, n, f"nodes[{i}].") for i, n in enumerate(data["nodes"]))
    except (OSError, ValueError, KeyError, TypeError, RecordError):
        return None
    first = data.get("first")
    return nodes, first if type(first) is int and 0 <= first < len(nodes) else None


def parse_span(module: str, argv: list[str], *more: tuple[str, dict[str, object]]) -> argparse.Namespace:
    """A span's command line: `--nodes N --grace S --record FILE [its own options] -- ARGV`."""
    parser = argparse.ArgumentParser(prog=f"python -m {module}")
    parser.add_argument("--nodes", type=int, required=True)
    parser.add_argument("--grace", type=float, default=10.0)
    parser.add_argument("--record", required=True)
    for flag, options in more:
        parser.add_argument(flag, **options)  # type: ignore[arg-type]  # argparse's keywords, as given
    parser.add_argument("argv", nargs=argparse.REMAINDER)
    args = parser.parse_args(argv)
    args.argv = args.argv[1:] if args.argv[:1] == ["--"] else args.argv
    if args.nodes < 1 or not args.argv:
        parser.error("--nodes N (1 or more) and the command after --")
    return args
