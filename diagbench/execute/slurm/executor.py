"""The Slurm executor: each attempt is one batch job; a worker on the node runs it with the
same code as a local run and writes its record into the shared run directory."""

from __future__ import annotations

import contextlib
import dataclasses
import threading
from collections.abc import Sequence
from pathlib import Path

from diagbench.execute.cancel import Cancel
from diagbench.execute.events import RunEvents
from diagbench.execute.remote.files import JOB_FILE, PROGRESS_FILE, JobFile
from diagbench.execute.remote.follow import Follow, Gatekeeper
from diagbench.execute.scheduler import Gate
from diagbench.execute.slots import Slot
from diagbench.execute.slurm import commands
from diagbench.execute.slurm.board import JobBoard
from diagbench.execute.slurm.commands import SlurmRejected
from diagbench.execute.slurm.jobs import OUTPUT_FILE, SCRIPT_FILE, SlurmSettings, job_name, job_script
from diagbench.execute.slurm.queue import SlurmQueue
from diagbench.records import sink
from diagbench.records.record import AttemptRecord, not_launched
from diagbench.records.redact import Redactor
from diagbench.records.store import RunDir
from diagbench.spec.load import Spec
from diagbench.spec.plan import PlannedAttempt
from diagbench.vocab import Outcome

__all__ = ["TURN_WAIT_S", "SlurmExecutor", "Turnstile"]

TURN_WAIT_S = 1.0


class SlurmExecutor:
    """Submits each attempt as a Slurm job and follows it to its record."""

    def __init__(
        self,
        spec: Spec,
        settings: SlurmSettings,
        run_dir: RunDir,
        gate: Gate | None = None,
        done: Sequence[AttemptRecord] = (),
        order: Sequence[PlannedAttempt] = (),
    ):
        self.spec, self.settings, self.run_dir = spec, settings, run_dir
        self.board = JobBoard()
        self.keeper = Gatekeeper(gate, done)
        self.still_matters = self.keeper.still_matters  # the gate, asked while a job waits or runs
        self.adoptable = _running_jobs_of(run_dir.path)
        self.turns = Turnstile([p.name for p in order])
        for name in self.adoptable:  # already in the queue: nobody waits for them
            self.turns.passed(name)

    def run(self, item: PlannedAttempt, slot: Slot, cancel: Cancel, events: RunEvents) -> AttemptRecord:
        folder = self.run_dir.attempt_dir(item.name)
        job_id = self.adoptable.pop(item.name, None)
        if job_id is None:
            self.turns.wait(item.name)  # jobs enter the queue in plan order: Slurm starts the oldest first
            try:
                job_id = self._submit(item, folder)
            except SlurmRejected as exc:
                events.on_start(item, slot)
                return not_launched(item, Outcome.LAUNCH_ERROR, f"sbatch refused the job: {exc}")
            finally:
                self.turns.passed(item.name)
        events.on_start(item, slot)
        self.board.track(job_id)
        try:
            grace, limit = self.spec.server.grace, self.settings.walltime_s
            queue = SlurmQueue(self.board)
            follow = Follow(item, job_id, folder, queue, grace, cancel, events, self.still_matters, limit)
            record = follow.until_record()
        finally:
            self.board.forget(job_id)
        return self.keeper.finished(record)

    def _submit(self, item: PlannedAttempt, folder: Path) -> str:
        """Write the job's files, sbatch it, and note the job id beside them."""
        for stale in ("result.json", "server.log", PROGRESS_FILE, OUTPUT_FILE):  # of an earlier, interrupted try
            with contextlib.suppress(FileNotFoundError):
                (folder / stale).unlink()
        job = JobFile.of(item, self.spec)
        job.write(folder)
        script = job_script(self.settings, self.run_dir.path.resolve(), item.name)
        # beside the record, what the job ran; the setup lines' secrets blanked (Slurm got the real ones)
        sink.write_document(folder / SCRIPT_FILE, Redactor.of().log(script))
        options = [
            f"--job-name={job_name(item.name)}",
            f"--output={folder.resolve() / OUTPUT_FILE}",
            f"--chdir={self.run_dir.path.resolve()}",
            *self.settings.sbatch_options(),
        ]
        job_id = commands.submit(options, script)
        dataclasses.replace(job, job_id=job_id).write(folder)
        return job_id


class Turnstile:
    """Lets attempt threads through in plan order; one whose predecessor never comes (the
    gate skipped it, it was adopted) waits at most `wait_s`, then goes past it."""

    def __init__(self, order: Sequence[str], wait_s: float = TURN_WAIT_S):
        self.rank = {name: i for i, name in enumerate(order)}
        self.wait_s = wait_s
        self.next = 0  # every rank below it has passed (or was given up on)
        self.passed_ranks: set[int] = set()
        self.cond = threading.Condition()

    def wait(self, name: str) -> bool:
        """Until every earlier attempt has passed; True if it gave up waiting on some."""
        rank = self.rank.get(name)
        if rank is None:
            return False
        with self.cond:
            if self.cond.wait_for(lambda: self.next >= rank, timeout=self.wait_s):
                return False
            self.next = max(self.next, rank)  # the ones before it are not coming
            return True

    def passed(self, name: str) -> None:
        rank = self.rank.get(name)
        with self.cond:
            if rank is not None:
                self.passed_ranks.add(rank)
            while self.next in self.passed_ranks:
                self.next += 1
            self.cond.notify_all()


def _running_jobs_of(run_dir: Path) -> dict[str, str]:
    """Jobs a previous controller of this run left queued or running (kill -9, a lost
    login session): attempt name -> job id, to be adopted instead of submitted again."""
    jobs = commands.my_jobs() or []
    found = {}
    where = str(run_dir.resolve())
    for state in jobs:
        attempt = state.name.removeprefix(job_name(""))
        if state.workdir == where and state.name != attempt and (run_dir / "cells" / attempt / JOB_FILE).is_file():
            found[attempt] = state.job_id
    return found
