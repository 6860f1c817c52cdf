"""GPU hygiene: read GPU memory (NVML, else nvidia-smi) and wait for it to settle.

Without an NVIDIA GPU every function returns None at once, so CPU hosts pay nothing.
"""

from __future__ import annotations

import contextlib
import shutil
import subprocess
import threading
import time
from collections.abc import Callable
from typing import Any

SETTLE_TOLERANCE_MIB = 256
SETTLE_BOUND_S = 30.0
_SMI_TIMEOUT_S = 10


def _smi(query: str) -> list[list[str]] | None:
    if shutil.which("nvidia-smi") is None:
        return None
    try:
        out = subprocess.run(
            ["nvidia-smi", f"--query-gpu={query}", "--format=csv,noheader,nounits"],
            capture_output=True,
            text=True,
            timeout=_SMI_TIMEOUT_S,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    if out.returncode != 0:
        return None
    return [[f.strip() for f in line.split(",")] for line in out.stdout.strip().splitlines() if line.strip()]


def _nvml_used() -> list[int] | None:
    try:
        import pynvml  # nvidia-ml-py, optional
    except ImportError:
        return None
    try:
        pynvml.nvmlInit()
        count = pynvml.nvmlDeviceGetCount()
        return [
            int(pynvml.nvmlDeviceGetMemoryInfo(pynvml.nvmlDeviceGetHandleByIndex(i)).used) // (1 << 20)
            for i in range(count)
        ]
    except Exception:  # NVML raises its own error types; any failure means "no reading"
        return None


def memory_used_mib() -> list[int] | None:
    """Used memory per GPU in MiB, or None where no NVIDIA GPU can be read."""
    used = _nvml_used()
    if used is not None:
        return used
    rows = _smi("memory.used")
    if rows is None:
        return None
    with contextlib.suppress(ValueError):
        return [int(float(r[0])) for r in rows]
    return None


def describe() -> list[dict[str, Any]] | None:
    rows = _smi("name,driver_version,memory.total")
    if rows is None:
        return None
    return [
        {"name": r[0], "driver": r[1] if len(r) > 1 else None, "memory_total_mib": r[2] if len(r) > 2 else None}
        for r in rows
    ]


def wait_for_baseline(
    baseline: list[int],
    cancelled: threading.Event | None = None,
    bound_s: float = SETTLE_BOUND_S,
    read: Callable[[], list[int] | None] = memory_used_mib,
) -> tuple[list[int] | None, float]:
    """Wait (bounded) until every GPU's used memory is back within tolerance of `baseline`."""
    start = time.monotonic()
    delay = 0.1
    while True:
        now = read()
        settled = now is None or all(n <= b + SETTLE_TOLERANCE_MIB for n, b in zip(now, baseline, strict=False))
        waited = time.monotonic() - start
        if settled or waited >= bound_s or (cancelled is not None and cancelled.is_set()):
            return now, waited
        # GPU memory has no change notification to wait on, so this one wait polls.
        if cancelled is not None:
            cancelled.wait(delay)
        else:
            time.sleep(delay)
        delay = min(delay * 2, 1.0)
