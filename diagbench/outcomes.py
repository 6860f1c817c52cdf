"""The words of the contract (design.md 3.3): outcomes and failure classes."""

from __future__ import annotations

from enum import Enum


class Outcome(str, Enum):
    """How one launch ended."""

    READY = "ready"
    FAILED = "failed"
    CRASHED = "crashed"
    TIMEOUT = "timeout"
    LAUNCH_ERROR = "launch_error"
    CANCELLED = "cancelled"


OUTCOMES = tuple(o.value for o in Outcome)

FAILURE_CLASSES = (
    "cuda_graph_capture",
    "oom",
    "nccl",
    "port_in_use",
    "torch_compile",
    "triton",
    "illegal_memory_access",
    "killed",
    "segfault",
    "import_error",
    "other",
)
