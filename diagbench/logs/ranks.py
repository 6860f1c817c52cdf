"""Where a log line came from in a launch of many ranks or nodes.

An attempt that spans nodes writes one `server.log`: each node's lines, as they arrive, behind
a node prefix (`[node 1] `), so a reader, live or offline, knows the node of every line. The
servers' own rank prefixes (`[rank1]:`, SGLang's `TP1`, vLLM's `(VllmWorker rank=1 pid=N)`)
follow it. This module owns both: the executors write the node prefix through `node_prefix`,
and the readers take it off through `split_node_prefix`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = ["LineOrigin", "node_prefix", "split_node_prefix"]

_NODE = re.compile(rb"^\[node (\d{1,4})\] ")


@dataclass(frozen=True)
class LineOrigin:
    """The node (its index in the attempt, 0-based) and the global rank a line names, where known."""

    node: int | None = None
    rank: int | None = None


def node_prefix(node: int) -> bytes:
    """The prefix a node-spanning attempt puts before each line of node `node` in server.log."""
    return b"[node %d] " % node


def split_node_prefix(line: bytes) -> tuple[int | None, bytes]:
    """(the node, the line without its node prefix); (None, line) when it has none."""
    found = _NODE.match(line)
    if found is None:
        return None, line
    return int(found.group(1)), line[found.end() :]
