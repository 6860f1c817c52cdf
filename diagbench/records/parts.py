"""The typed parts of `result.json` besides words and numbers: the root cause, the hang, where
the attempt ran, its GPUs' memory hygiene and its price. Each is a frozen dataclass that
records/typed.py reads and writes by its annotations: a part gains a field by declaring it."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from diagbench.records.typed import OMIT_NONE, Plain

if TYPE_CHECKING:
    from diagbench.logs.rootcause import Cause

__all__ = ["Behind", "GpuSettle", "Hang", "NodeExit", "Placement", "Price", "RankWait", "RootCause"]


@dataclass(frozen=True)
class RootCause(Plain):
    """The root cause the log reader followed (the root exception or native report of the error
    that explains the outcome), as records, classify and triage keep it."""

    type: str
    message: str
    line_no: int

    @classmethod
    def of(cls, cause: Cause) -> RootCause:
        return cls(cause.type, cause.message, cause.line_no)

    def text(self) -> str:
        """`torch.OutOfMemoryError: CUDA out of memory ... (L212)`."""
        said = f"{self.type}: {self.message}" if self.message else self.type
        return f"{said} (L{self.line_no})"


@dataclass(frozen=True)
class RankWait(Plain):
    """Where one rank of a hung launch waits (launch/hangranks.py)."""

    rank: int
    pid: int
    site: str  # `all_reduce (worker.py:22)`: its wait, at the program's own line
    wait: str | None = None  # `all_reduce`, `time.sleep`
    at: str | None = None  # the program's innermost frame, `worker.py:22`
    source: str = ""  # what said its rank: RANK, SLURM_PROCID, spawn order


@dataclass(frozen=True)
class Behind(Plain):
    """A rank behind the others by PyTorch's flight recorder: its last collective's sequence id
    against the furthest rank's, in one process group."""

    rank: int
    group: str
    last_seq: int  # the collective_seq_id of its last recorded collective (0: none)
    ahead_seq: int  # the furthest rank's
    collective: str | None  # what the furthest ranks wait in that it never entered (`nccl:all_reduce`)


@dataclass(frozen=True)
class Hang(Plain):
    """Where the tree waited when its stacks were taken (launch/hangsite.py chose the thread)."""

    pid: int
    name: str
    thread: str | None  # its name (id)
    frames: tuple[str, ...]  # that thread's top frames, innermost first
    site: str | None  # the innermost frame that says what it waits for
    waiting_frame: str | None = field(default=None, metadata=OMIT_NONE)  # as the stacks file writes it
    files: tuple[str, ...] = ()  # stacks/<pid>.txt of every process, relative to the attempt's folder
    notes: tuple[str, ...] = ()  # what could not be read (ptrace refused, py-spy missing)
    taken_s: float | None = field(default=None, metadata=OMIT_NONE)  # what taking them cost, before teardown
    ranks: tuple[RankWait, ...] = ()  # where each rank waits, by rank (a launch of many ranks)
    odd_ranks: tuple[int, ...] = ()  # the ranks not where the others wait
    words: str | None = field(default=None, metadata=OMIT_NONE)  # `rank 0 waits in all_reduce (w.py:22); ...`
    behind: tuple[Behind, ...] = ()  # flight recorder: ranks whose last collective is behind the others'


@dataclass(frozen=True)
class Placement(Plain):
    """Where an attempt ran: `local` on this host, or a cluster's job on one of its nodes."""

    kind: str
    job_id: str | None = None
    node: str | None = None
    gpus: tuple[str, ...] | None = field(default=None, metadata=OMIT_NONE)  # a job's CUDA_VISIBLE_DEVICES
    queued_s: float | None = field(default=None, metadata=OMIT_NONE)  # a job's submission to its worker's start
    host: str | None = field(default=None, metadata=OMIT_NONE)  # the job's host, where node is the cluster's node id


@dataclass(frozen=True)
class NodeExit(Plain):
    """One node's process of an attempt spanning nodes (server.nodes), as its span saw it end."""

    node: int  # its NODE_RANK: `[node N] ` before its lines in server.log
    pid: int | None
    exit_code: int | None  # None while it ran, or when a signal ended it
    signal: str | None = None
    exited_s: float | None = None  # seconds after the nodes started: the exit order
    node_id: str = ""  # the cluster's id of the node
    host: str = ""


@dataclass(frozen=True)
class GpuSettle(Plain):
    """GPU memory hygiene around an attempt: the run's baseline, what was in use before its
    launch, how long that took to settle, and what was left after (MiB per GPU)."""

    baseline_mib: tuple[int, ...]
    before_mib: tuple[int, ...] | None  # None: the GPUs could not be read
    settle_wait_s: float
    after_mib: tuple[int, ...] | None = None


@dataclass(frozen=True, kw_only=True)
class Price(Plain):
    """A pricing load's figures (triage --price): N requests in turn, within a budget."""

    version: int = 1
    request: str = ""  # METHOD PATH
    requests: int
    ok: int
    failed: int
    seconds: float
    throughput_rps: float | None = None  # answered requests per second of busy time
    tokens_per_s: float | None = None  # output tokens per second, where the answers count them
    latency_p50_s: float | None = None
    latency_p95_s: float | None = None
    error: str | None = None  # the first failure, if any
