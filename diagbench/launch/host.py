"""Where a run happened: host, OS, Python, CPUs, GPUs, torch/triton, git SHA."""

from __future__ import annotations

import importlib.metadata
import os
import platform
import socket
import sys
from pathlib import Path

from diagbench import __version__
from diagbench.jsonvalue import JSON
from diagbench.launch import gpu
from diagbench.launch.helpers import run_helper
from diagbench.records.redact import redact_argv

__all__ = ["collect"]


def collect(cwd: Path) -> dict[str, JSON]:
    return {
        "hostname": socket.gethostname(),
        "os": platform.platform(),
        "python": sys.version.split()[0],
        "cpus": os.cpu_count(),
        "gpus": gpu.describe(),
        "packages": {name: _version(name) for name in ("torch", "triton", "sglang", "vllm")},
        "git_sha": _git_sha(cwd),
        "diagbench": __version__,
        "argv": redact_argv(sys.argv),
    }


def _version(name: str) -> str | None:
    """Installed version, read from metadata (never imports torch: that takes seconds)."""
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return None


GIT_TIMEOUT_S = 5.0


def _git_sha(cwd: Path) -> str | None:
    """The commit the spec's folder is at (`-dirty` with changes), or None outside a repository."""
    env = {**os.environ, "GIT_OPTIONAL_LOCKS": "0", "GIT_TERMINAL_PROMPT": "0"}  # read only: no index refresh
    head = run_helper(["git", "rev-parse", "HEAD"], GIT_TIMEOUT_S, env, cwd)
    if not head.ok:
        return None
    dirty = run_helper(["git", "status", "--porcelain"], GIT_TIMEOUT_S, env, cwd)
    return head.out().strip() + ("-dirty" if dirty.out().strip() else "")
