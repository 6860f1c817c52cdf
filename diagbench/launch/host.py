"""Where a run happened: host, OS, Python, CPUs, GPUs, torch/triton, git SHA."""

from __future__ import annotations

import contextlib
import importlib.metadata
import os
import platform
import socket
import subprocess
import sys
from pathlib import Path

from diagbench import __version__
from diagbench.jsonvalue import JSON
from diagbench.launch import gpu
from diagbench.records.redact import redact_argv


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


def _git_sha(cwd: Path) -> str | None:
    with contextlib.suppress(OSError, subprocess.SubprocessError):
        out = subprocess.run(["git", "rev-parse", "HEAD"], cwd=cwd, capture_output=True, text=True, timeout=5)
        if out.returncode == 0:
            dirty = subprocess.run(["git", "status", "--porcelain"], cwd=cwd, capture_output=True, text=True, timeout=5)
            return out.stdout.strip() + ("-dirty" if dirty.stdout.strip() else "")
    return None
