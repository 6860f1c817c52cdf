"""What Slurm says of a run's jobs, asked politely: one squeue for all of them, at most
every few seconds, whichever attempt thread asks."""

from __future__ import annotations

import threading
import time

from diagbench.execute.slurm import commands
from diagbench.execute.slurm.commands import JobState

__all__ = ["QUEUE_EVERY_S", "JobBoard"]

QUEUE_EVERY_S = 2.0  # squeue is an RPC to slurmctld: many users polling fast is what admins forbid


class JobBoard:
    """The latest known state of each tracked job, refreshed on demand when stale."""

    def __init__(self, every_s: float = QUEUE_EVERY_S):
        self.every_s = every_s
        self._lock = threading.Lock()
        self._states: dict[str, JobState | None] = {}
        self._asked = 0.0

    def track(self, job_id: str) -> None:
        with self._lock:
            self._states.setdefault(job_id, None)
            self._asked = 0.0  # a new job: ask about it at the next look

    def forget(self, job_id: str) -> None:
        with self._lock:
            self._states.pop(job_id, None)

    def state(self, job_id: str) -> JobState | None:
        """The job's state as of at most `every_s` ago; None until Slurm has been asked."""
        with self._lock:
            if time.monotonic() - self._asked >= self.every_s:
                self._refresh()
            return self._states.get(job_id)

    def _refresh(self) -> None:
        answer = commands.queue(self._states)
        if answer is None:  # the controller did not answer this time: keep what we knew
            return
        self._asked = time.monotonic()
        for job_id, known in self._states.items():
            if job_id in answer:
                self._states[job_id] = answer[job_id]
            elif known is None or known.active:
                self._states[job_id] = _left_queue(job_id, known)


def _left_queue(job_id: str, known: JobState | None) -> JobState:
    """A job Slurm no longer lists (ended longer ago than its MinJobAge): accounting may
    still say how it ended; without accounting, that it is gone is all there is."""
    ended = commands.final_state(job_id)
    if ended is not None:
        return ended
    node = known.node if known is not None else ""
    return JobState(job_id, "UNKNOWN", "left the queue; no accounting (sacct) to say how it ended", node)
