"""Where a log line came from in a launch of many ranks or nodes.

An attempt that spans nodes writes one `server.log`: each node's lines, as they arrive, behind
a node prefix (`[node 1] `), so a reader, live or offline, knows the node of every line. The
servers' own rank prefixes follow it. This module owns both: the executors write the node
prefix through `node_prefix`, and the readers take it off through `split_node_prefix`;
`line_origin` (bytes) and `text_origin` (text) read the rank prefix after it.

The rank prefixes, each as its source prints it:

- PyTorch: `[rank1]: ` before every line of an uncaught exception's traceback, once the
  default process group is up (torch/distributed/distributed_c10d.py, init_process_group:
  `excepthook_prefix = f"[rank{get_rank()}]"`, written as `f"{excepthook_prefix}: {s}"`),
  and `[rank1]:[W1206 ...] ...` before c10's C++ log lines (c10/util/Logging.h SetGlobalRank,
  called from distributed_c10d.py `_update_default_pg`).
- torchrun's `--tee` / `--log-dir`: `[default0]:` before each line it copies from a worker's
  log file, the role name (`--role`, default "default") and the local rank
  (torch/distributed/elastic/multiprocessing/tail_log.py, TailLog.start:
  `header = f"[{self._name}{local_rank}]:"`). A `log_line_prefix_template` of `[${rank}]:`
  (local_elastic_agent.py) prints the global rank alone: `[1]:`.
- SGLang's schedulers: `[2026-01-01 10:00:00 DP0 TP1 EP1] `: the logging format
  `[%(asctime)s{maybe_ms}{prefix}] %(message)s` (sglang 0.5.23 srt/utils/common.py:2630
  configure_logger), the prefix built in srt/managers/scheduler.py:6280-6291
  configure_scheduler_process: ` DP{n}`, ` PP{n}`, ` ATTN_CP{n}`, ` MOE_DP{n}`, ` TP{n}`, ` EP{n}`,
  in that order, each only where that size is over one.
- vLLM: `(VllmWorker rank=1 pid=7) ` (vLLM 0.8-0.10 v1/executor/multiproc_executor.py,
  WorkerProc: `_add_prefix(sys.stdout, f"VllmWorker rank={rank}", pid)`),
  `(VllmWorkerProcess pid=7) ` (vLLM 0.6-0.7 executor/multiproc_worker_utils.py `_add_prefix`),
  and the logger's `(%(vllm_process_name)s pid=%(process)d) ` (vllm 0.32 logger.py:28 _FORMAT)
  with the names vLLM gives its processes: `EngineCore_DP0` (v1/engine/core.py:1408,
  v1/engine/utils.py:284), `VllmWorker-1` (v1/executor/multiproc_executor.py:747, the
  process's name until it sets its title) and `Worker_DP0_PP0_TP1_EP1`
  (multiproc_executor.py:1077-1103 setup_proc_title_and_log_prefix). Ray's log monitor
  prints an actor's lines behind `(RayWorkerWrapper pid=7, ip=10.0.0.2) ` (ray
  _private/worker.py print_worker_logs): a process, no rank.

A line with none of these costs one look at its first byte (`[` or `(`, else nothing).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = ["LineOrigin", "line_origin", "node_prefix", "split_node_prefix", "text_origin"]

_NODE = re.compile(rb"^\[node (\d{1,4})\] ")
_ANSI = r"(?:\x1b\[[0-9;]{0,12}m){0,2}"  # vLLM colours its prefix on a terminal
# every alternative is anchored, its repeats bounded and separated by fixed words: no backtracking
_RANK_PATTERN = (
    r"^(?:\[node (?P<node>\d{1,4})\] )?(?:"
    r"\[rank(?P<torch>\d{1,6})\]: ?"  # torch's excepthook and c10's logging
    # torchrun --tee: [default0]:, then torch's own [rank0]: where the rank's exception hook wrote it
    r"|\[(?P<role>[A-Za-z_][A-Za-z_-]{0,30})(?P<local>\d{1,6})\]:(?:\[rank(?P<teed>\d{1,6})\]: ?| ?)"
    r"|\[(?P<global>\d{1,6})\]: "  # torchrun's prefix template [${rank}]:
    r"|\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d(?:\.\d{3})?(?P<sglang>(?: (?:DP|PP|ATTN_CP|MOE_DP|TP|EP)\d{1,5}){1,6})\] "
    r"|" + _ANSI + r"\((?P<vllm>VllmWorker rank=(?P<vrank>\d{1,6})|[A-Za-z][\w:.-]{0,60})"
    r" pid=(?P<pid>\d{1,9})(?:, ip=[\w.:-]{1,64})?\)" + _ANSI + r" ?"
    r")"
)
_RANK_BYTES = re.compile(_RANK_PATTERN.encode())
_RANK_TEXT = re.compile(_RANK_PATTERN)
_SGLANG_PART = re.compile(r"(DP|PP|ATTN_CP|MOE_DP|TP|EP)(\d+)")
_VLLM_TP = re.compile(r"(?:^Worker|_)TP(\d+)")
_VLLM_NAME_RANK = re.compile(r"^VllmWorker-(\d+)$")
_STARTS = (ord("["), ord("("), 0x1B)  # the first byte of every prefix above
_SGLANG_STARTS = ("DP", "PP", "AT", "MO", "TP", "EP")
_RANKED_WORDS = ("DP", "PP", "ATTN_CP", "MOE_DP", "TP", "EP", "VllmWorker", "Worker", "RayWorkerWrapper")


@dataclass(frozen=True)
class LineOrigin:
    """The node (its index in the attempt, 0-based) and the rank a line names, where known.

    `rank`: the global rank where the prefix says one (torch's `[rank1]:`, vLLM's `rank=1`, an
    SGLang or vLLM tensor-parallel rank when no other parallel rank is shown); `local_rank`:
    torchrun's `[default1]:`; `who`: the prefix in words (`rank1`, `TP1 EP0`, `Worker_TP1`,
    `RayWorkerWrapper pid=7`): the process a line is from, whether or not its rank is known."""

    node: int | None = None
    rank: int | None = None
    local_rank: int | None = None
    who: str | None = None

    @property
    def ranked(self) -> bool:
        """Whether the prefix is one rank's (a worker of a parallel group), not another process's
        (vLLM's API server or engine core, a launcher)."""
        return self.rank is not None or self.local_rank is not None or (self.who or "").startswith(_RANKED_WORDS)

    @property
    def record(self) -> bool:
        """Whether the prefix starts a log record whose further lines carry none (SGLang's
        format puts it before a record's first line only; torch's, torchrun's and vLLM's
        prefixes are on every line)."""
        return self.who is not None and self.who[:2] in _SGLANG_STARTS

    @property
    def key(self) -> str | None:
        """One process's lines share this: its node and its words (None: no prefix)."""
        if self.who is None:
            return None
        return self.who if self.node is None else f"node {self.node} {self.who}"


def node_prefix(node: int) -> bytes:
    """The prefix a node-spanning attempt puts before each line of node `node` in server.log."""
    return b"[node %d] " % node


def split_node_prefix(line: bytes) -> tuple[int | None, bytes]:
    """(the node, the line without its node prefix); (None, line) when it has none."""
    found = _NODE.match(line)
    if found is None:
        return None, line
    return int(found.group(1)), line[found.end() :]


def line_origin(line: bytes) -> LineOrigin:
    """Where a raw log line came from: its node and rank prefixes (LineOrigin() for none)."""
    if not line or line[0] not in _STARTS:
        return _NONE
    found = _RANK_BYTES.match(line)
    if found is None:
        node, _ = split_node_prefix(line)
        return _NONE if node is None else LineOrigin(node)
    return _origin({k: v.decode() if v is not None else None for k, v in found.groupdict().items()})


def text_origin(line: str) -> tuple[LineOrigin, int]:
    """Where a decoded line came from, and how long its prefixes are (0 for none)."""
    if not line or line[0] not in "[(\x1b":
        return _NONE, 0
    found = _RANK_TEXT.match(line)
    if found is None:
        node = _NODE.match(line.encode(errors="replace")[:16]) if line.startswith("[node ") else None
        return (_NONE, 0) if node is None else (LineOrigin(int(node.group(1))), node.end())
    return _origin(found.groupdict()), found.end()


_NONE = LineOrigin()


def _origin(groups: dict[str, str | None]) -> LineOrigin:
    node = int(groups["node"]) if groups["node"] else None
    if groups["torch"] is not None:
        rank = int(groups["torch"])
        return LineOrigin(node, rank, None, f"rank{rank}")
    if groups["local"] is not None:
        local = int(groups["local"])
        teed = int(groups["teed"]) if groups["teed"] is not None else None
        return LineOrigin(node, teed, local, f"{groups['role']}{local}")
    if groups["global"] is not None:
        rank = int(groups["global"])
        return LineOrigin(node, rank, None, f"rank{rank}")
    if groups["sglang"] is not None:
        return _sglang(node, groups["sglang"].strip())
    return _vllm(node, groups["vllm"] or "", groups["vrank"], groups["pid"] or "")


def _sglang(node: int | None, words: str) -> LineOrigin:
    """`TP1`, `TP1 EP1`: rank 1 (EP ranks lie inside the TP group); with DP, PP or CP shown,
    the global rank needs the sizes, which the line does not say."""
    parts = dict(_SGLANG_PART.findall(words))
    only_tp = set(parts) <= {"TP", "EP"} and "TP" in parts
    return LineOrigin(node, int(parts["TP"]) if only_tp else None, None, words)


def _vllm(node: int | None, name: str, vrank: str | None, pid: str) -> LineOrigin:
    """vLLM's and Ray's `(Name pid=N)`: a worker's rank where its name says it."""
    if vrank is not None:
        return LineOrigin(node, int(vrank), None, name)
    if (numbered := _VLLM_NAME_RANK.match(name)) is not None:
        return LineOrigin(node, int(numbered.group(1)), None, name)
    tp = _VLLM_TP.search(name)
    plain_tp = tp is not None and name.startswith("Worker") and not any(p in name for p in ("_DP", "_PP", "_PCP"))
    if plain_tp and tp is not None:
        return LineOrigin(node, int(tp.group(1)), None, name)
    return LineOrigin(node, None, None, f"{name} pid={pid}")  # by process: all workers are `Worker` at first
