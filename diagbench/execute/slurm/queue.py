"""Slurm as the queue that following a job needs (execute/remote/follow.py): its states
through the run's JobBoard, its stops through scancel, its words for how a job ended."""

from __future__ import annotations

from pathlib import Path

from diagbench.execute.remote.follow import JobState as State
from diagbench.execute.slurm import commands
from diagbench.execute.slurm.board import JobBoard
from diagbench.execute.slurm.commands import JobState, limit_seconds
from diagbench.execute.slurm.jobs import OUTPUT_FILE, output_tail
from diagbench.vocab import Outcome

__all__ = ["SlurmQueue"]

# how Slurm's end states without a record are recorded; anything else is a launch error
_CANCEL_STATES = ("CANCELLED", "PREEMPTED")


class SlurmQueue:
    kind = "slurm"
    name = "Slurm"

    def __init__(self, board: JobBoard):
        self.board = board

    def state(self, job_id: str) -> JobState | None:
        return self.board.state(job_id)

    def limit_s(self, state: State) -> float | None:
        return limit_seconds(state.limit) if state.limit else None  # a --slurm-arg=--time wins

    def stop_worker(self, job_id: str) -> None:
        commands.signal_worker([job_id])

    def kill(self, job_id: str) -> None:
        commands.cancel([job_id])

    def ended_as(self, state: State) -> Outcome:
        if state.state == "TIMEOUT":
            return Outcome.TIMEOUT
        return Outcome.CANCELLED if state.state in _CANCEL_STATES else Outcome.LAUNCH_ERROR

    def completed(self, state: State) -> bool:
        return state.state == "COMPLETED"

    def output_tail(self, folder: Path) -> str:
        tail = output_tail(folder)
        return f"{OUTPUT_FILE}: {tail}" if tail else ""
