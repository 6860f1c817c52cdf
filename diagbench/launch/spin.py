"""The spin rule (`server.spin: D`, opt-in): a hang whose host keeps busy.

The stall rule (launch/stall.py) counts CPU time as work, so a host spinning in
`cudaStreamSynchronize` or an NCCL wait while a GPU kernel never ends is busy by it, and
only the full timeout ends the attempt. The spin rule samples the tree's stacks instead
(`py-spy dump --native`, every SAMPLE_EVERY_S, on a thread of its own so the log is still
read as it is written): when every rank (where the tree has ranks, launch/ranks.py; else
every Python process whose wait is known) has stayed at the same waiting frame, its wait at
the same program line and the same frames, for D and at least SAMPLES_MIN samples in a row,
the attempt is stalled. A rank whose frames name no known wait or no line of the program (it
computes), or that is importing (a starved start-up sits in an import's read), keeps the
window from starting.

Opt-in because a long silent GPU kernel, a big compile under a lock or a collective that is
merely slow looks just the same from the host: only the user knows how long is too long.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable

import psutil

from diagbench.launch.hangsite import UNKNOWN, Where, where
from diagbench.launch.ranks import ProcessInfo, assign_ranks, read_env_rank
from diagbench.launch.stacks import Thread, sample_threads

__all__ = ["SAMPLES_MIN", "SAMPLE_EVERY_S", "SpinWatch", "spin_rule"]

SAMPLE_EVERY_S = 1.0
SAMPLE_TIMEOUT_S = 5.0
SAMPLES_MIN = 3  # the same waits in this many samples in a row at least, however long the window
State = tuple[tuple[str, str | None, str | None, int], ...]  # (who, wait, at, hash of its frames) per process


def spin_rule(spin_s: float) -> str:
    return (
        f"ended by the spin rule (server.spin {spin_s:g}s): every rank waited at the same frame, which a long "
        "silent GPU kernel does too: give it more, or leave it out"
    )


class SpinWatch:
    """Samples the tree's stacks on a daemon thread; `spinning(now)` says, on the attempt's
    wake-ups, whether the same waits have held for `spin_s`, and in which words."""

    def __init__(
        self,
        pid: int,
        spin_s: float,
        sample: Callable[[int], list[Thread]] | None = None,
        every: float = SAMPLE_EVERY_S,
    ):
        self.pid, self.spin_s, self.every = pid, spin_s, every
        self._sample = sample or (lambda p: sample_threads(p, SAMPLE_TIMEOUT_S))
        self._lock = threading.Lock()
        self._state: State = ()
        self._since: float | None = None  # monotonic time the current state was first seen
        self._count = 0  # samples in a row that saw it
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="diagbench-spin", daemon=True)
        self._thread.start()

    def stop(self, wait: bool = False) -> None:
        """No more samples; with `wait`, until the one in progress is done (py-spy holds the
        process by ptrace while it reads it: the stacks taken next could not attach)."""
        self._stop.set()
        if wait and self._thread is not threading.current_thread():
            self._thread.join(SAMPLE_TIMEOUT_S + 1)

    def spinning(self, now: float) -> tuple[float, str] | None:
        """(seconds, words) once every process looked at held its wait for spin_s."""
        with self._lock:
            state, since, count = self._state, self._since, self._count
        if not state or since is None or now - since < self.spin_s or count < SAMPLES_MIN:
            return None
        said = "; ".join(f"{who} at {wait}" + (f" ({at})" if at else "") for who, wait, at, _ in state)
        return now - since, said

    def _run(self) -> None:
        while not self._stop.is_set():
            state = self._look()
            now = time.monotonic()
            with self._lock:
                if not state or state != self._state:
                    self._state, self._since, self._count = state or (), (now if state else None), 0
                self._count += 1
            if state is None or self._stop.wait(self.every):
                return

    def _look(self) -> State | None:
        """The waits now; () when some rank computes; None when the tree is gone."""
        try:
            root = psutil.Process(self.pid)
            procs = [root, *root.children(recursive=True)]
        except psutil.Error:
            return None
        infos: list[ProcessInfo] = []
        for proc in procs:
            with contextlib.suppress(psutil.Error):
                infos.append(
                    ProcessInfo(proc.pid, proc.ppid(), proc.create_time(), tuple(proc.cmdline()), read_env_rank(proc))
                )
        ranks = assign_ranks(infos)
        looked = sorted(ranks, key=lambda pid: ranks[pid].rank) if ranks else [i.pid for i in infos if _python(i.argv)]
        out = []
        for pid in looked:
            threads = [t for t in self._sample(pid) if t.frames and not t.name.startswith("diagbench-")]
            found = min(((where(t.frames), t) for t in threads), key=lambda wt: wt[0].rank, default=None)
            who = f"rank {ranks[pid].rank}" if ranks else f"pid {pid}"
            if found is None or not _waits(*found):
                if ranks:
                    return ()  # a rank that computes, imports or could not be read: not spinning
                continue
            best, thread = found
            out.append((who, best.wait or best.site, best.at, hash(thread.frames)))
        return tuple(out)


def _waits(found: Where, thread: Thread) -> bool:
    """A known wait at a line of the program, not inside an import."""
    importing = any("importlib" in frame for frame in thread.frames)
    return found.rank != UNKNOWN and found.at is not None and not importing


def _python(argv: tuple[str, ...]) -> bool:
    return bool(argv) and "python" in argv[0].rsplit("/", 1)[-1]
