"""Stall detection: an attempt that, for `server.stall` seconds, wrote nothing and did no work.

Progress is any of:
- the log grew (a new line, or a `\\r` progress bar that moved: any byte counts);
- the process tree's CPU time (user + system of the main process and every live
  descendant, plus what reaped children left in their parents' counters) grew by at least
  CPU_BUSY_FRACTION of one core over the window: a silent compile is busy, never stalled;
- on the GPUs the attempt was handed (where NVML answers), utilisation moved by at least
  GPU_UTIL_POINTS points or used memory by at least GPU_MEMORY_MIB since the window began.

Each sign of progress restarts the window; a window of `stall` seconds with none is a stall.
A process spinning on a lock burns CPU and is busy by this rule (the full timeout still ends
it); a GPU kernel that never ends holds utilisation flat, so with a silent host it is a stall.
The check runs on the attempt's existing wake-ups (at most every CHECK_EVERY_MAX_S), never per line.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import psutil

from diagbench.launch import gpu

__all__ = [
    "CHECK_EVERY_MAX_S",
    "CHECK_EVERY_MIN_S",
    "CPU_BUSY_FRACTION",
    "CPU_BUSY_MIN_S",
    "GPU_MEMORY_MIB",
    "GPU_UTIL_POINTS",
    "StallWatch",
    "check_every",
    "rule_words",
    "tree_cpu_seconds",
]

CPU_BUSY_FRACTION = 0.05  # of one core, averaged over the window: less is "no work"
CPU_BUSY_MIN_S = 0.02  # below this much CPU time, whatever the window, no work was done
GPU_UTIL_POINTS = 10  # a change of utilisation smaller than this is noise
GPU_MEMORY_MIB = 64  # a change of used memory smaller than this is noise
CHECK_EVERY_MAX_S = 1.0  # look at most this long apart (a fifth of the window when shorter)
CHECK_EVERY_MIN_S = 0.1


def check_every(stall_s: float) -> float:
    """How often the attempt looks for a stall of `stall_s` seconds."""
    return max(CHECK_EVERY_MIN_S, min(CHECK_EVERY_MAX_S, stall_s / 5))


def rule_words(stall_s: float) -> str:
    """The rule as `plan` shows it."""
    return (
        f"stalled after {stall_s:g}s with no new log line or progress bar, the tree's CPU time grown by "
        f"< {CPU_BUSY_FRACTION:.0%} of a core, and its GPUs' utilisation within {GPU_UTIL_POINTS} points "
        f"and memory within {GPU_MEMORY_MIB} MiB (checked every {check_every(stall_s):g}s)"
    )


@dataclass(frozen=True)
class _Mark:
    """The start of the current quiet window."""

    at: float
    log_bytes: int
    cpu_s: float
    gpus: tuple[tuple[int, int], ...]


class StallWatch:
    """Tells, when asked on a wake-up, whether the attempt has been quiet for `stall_s`."""

    def __init__(
        self,
        pid: int,
        stall_s: float,
        gpu_indices: Sequence[int],
        now: float,
        read_gpus: Callable[[Sequence[int]], list[tuple[int, int]] | None] = gpu.activity,
    ):
        self.pid, self.stall_s, self.gpu_indices = pid, stall_s, tuple(gpu_indices)
        self._read_gpus = read_gpus
        self.every = check_every(stall_s)
        self.next_check = now + self.every
        self._mark = _Mark(now, 0, tree_cpu_seconds(pid), self._gpus())

    def quiet_for(self, now: float, log_bytes: int) -> float | None:
        """Seconds without progress when that reaches `stall_s` (a stall), else None.
        Reads the tree's counters only when a check is due."""
        if now < self.next_check:
            return None
        self.next_check = now + self.every
        mark = self._mark
        if log_bytes != mark.log_bytes:
            self._restart(now, log_bytes)
            return None
        cpu = tree_cpu_seconds(self.pid)
        if cpu - mark.cpu_s >= max(CPU_BUSY_MIN_S, CPU_BUSY_FRACTION * self.stall_s):
            self._restart(now, log_bytes, cpu)
            return None
        gpus = self._gpus()
        if _gpus_moved(mark.gpus, gpus):
            self._restart(now, log_bytes, cpu, gpus)
            return None
        quiet = now - mark.at
        return quiet if quiet >= self.stall_s else None

    def _restart(
        self, now: float, log_bytes: int, cpu: float | None = None, gpus: tuple[tuple[int, int], ...] | None = None
    ) -> None:
        cpu = tree_cpu_seconds(self.pid) if cpu is None else cpu
        self._mark = _Mark(now, log_bytes, cpu, self._gpus() if gpus is None else gpus)

    def _gpus(self) -> tuple[tuple[int, int], ...]:
        if not self.gpu_indices:
            return ()
        return tuple(self._read_gpus(self.gpu_indices) or ())


def _gpus_moved(before: tuple[tuple[int, int], ...], after: tuple[tuple[int, int], ...]) -> bool:
    if len(before) != len(after):
        return bool(before and after)  # NVML stopped or started answering: no evidence either way
    return any(
        abs(u1 - u0) >= GPU_UTIL_POINTS or abs(m1 - m0) >= GPU_MEMORY_MIB
        for (u0, m0), (u1, m1) in zip(before, after, strict=True)
    )


def tree_cpu_seconds(pid: int) -> float:
    """CPU time of `pid` and its live descendants, with what their reaped children used."""
    total = 0.0
    with contextlib.suppress(psutil.Error):
        main = psutil.Process(pid)
        for proc in [main, *main.children(recursive=True)]:
            with contextlib.suppress(psutil.Error):
                t = proc.cpu_times()
                total += t.user + t.system + t.children_user + t.children_system
    return total
