"""The Ray executor: each attempt is one Ray job, submitted to the cluster's job server; the
worker on its node runs it with the same code as a local run and writes its record into the
shared run directory, which the controller follows (execute/remote/follow.py)."""

from __future__ import annotations

import contextlib
import dataclasses
import os
import shlex
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from diagbench.execute.cancel import Cancel
from diagbench.execute.events import RunEvents
from diagbench.execute.ray.client import RayClient, RayJob, RayRejected
from diagbench.execute.ray.worker import STOP_FILE
from diagbench.execute.remote.files import PROGRESS_FILE, JobFile
from diagbench.execute.remote.follow import Follow, Gatekeeper
from diagbench.execute.remote.follow import JobState as State
from diagbench.execute.scheduler import Gate
from diagbench.execute.slots import Slot
from diagbench.launch.tags import SCOPE_VAR, new_nonce
from diagbench.records.parts import Placement
from diagbench.records.record import AttemptRecord, not_launched
from diagbench.records.redact import Redactor
from diagbench.records.store import RunDir
from diagbench.spec.load import Spec
from diagbench.spec.plan import PlannedAttempt
from diagbench.vocab import Outcome

__all__ = ["RayExecutor", "RayQueue", "RaySettings"]

BOARD_EVERY_S = 1.0  # one list of the cluster's jobs for all attempts, at most this often
LIMIT_MARGIN_S = 120.0  # Ray has no job time limit: the words of a record say timeout + grace + this
RUN_KEY, ATTEMPT_KEY = "diagbench_run", "diagbench_attempt"  # the job's metadata: found again on resume


@dataclass(frozen=True)
class RaySettings:
    """What every job of a run asks Ray for, and how the node starts the worker."""

    address: str
    python: str
    gpus: int = 0  # per attempt (server.gpus); per node when the attempt spans nodes
    nodes: int = 1
    env: tuple[str, ...] = ()  # names of this environment's variables the jobs get

    def runtime_env(self) -> dict[str, Any]:
        """The job's runtime_env: the named variables' values (never recorded nor printed), and
        this diagbench's sweep scope (so a node's sweep takes only this session's leftovers)."""
        names = [*self.env, SCOPE_VAR]
        return {"env_vars": {n: os.environ[n] for n in names if n in os.environ}}

    def secrets(self) -> Redactor:
        """Blanks the values the jobs were given, wherever Ray's words quote them back."""
        return Redactor.of([self.runtime_env()["env_vars"]])


class RayBoard:
    """The latest known state of the run's jobs: one list of the cluster's jobs every second."""

    def __init__(self, client: RayClient, every_s: float = BOARD_EVERY_S):
        self.client, self.every_s = client, every_s
        self._lock = threading.Lock()
        self._jobs: dict[str, RayJob] = {}
        self._asked = 0.0

    def state(self, job_id: str) -> RayJob | None:
        with self._lock:
            if time.monotonic() - self._asked >= self.every_s:
                jobs = self.client.jobs()
                if jobs is not None:
                    self._asked = time.monotonic()
                    self._jobs = {j.job_id: j for j in jobs}
            return self._jobs.get(job_id)


class RayQueue:
    """Ray's job server as the queue that following a job needs."""

    kind = "ray"
    name = "Ray"

    def __init__(self, board: RayBoard, folder: Path, secrets: Redactor):
        self.board, self.folder, self.secrets = board, folder, secrets

    def state(self, job_id: str) -> RayJob | None:
        return self.board.state(job_id)

    def limit_s(self, state: State) -> float | None:
        return None

    def stop_worker(self, job_id: str) -> None:
        """The stop file: the worker tears its server down on its own grace, and records."""
        path = self.folder / STOP_FILE
        with path.open("a", encoding="utf-8") as handle:  # each request one byte more: a second one hurries
            handle.write("x")

    def kill(self, job_id: str) -> None:
        self.board.client.stop(job_id)

    def ended_as(self, state: State) -> Outcome:
        return Outcome.CANCELLED if state.state == "STOPPED" else Outcome.LAUNCH_ERROR

    def completed(self, state: State) -> bool:
        return state.state == "SUCCEEDED"

    def output_tail(self, folder: Path) -> str:
        job = JobFile.read(folder).job_id if (folder / "job.json").is_file() else None
        text = self.board.client.logs(job) if job else ""
        tail = " | ".join(line.strip() for line in text.strip().splitlines()[-3:] if line.strip())[-300:]
        return f"the job's output: {self.secrets.cut(tail)}" if tail else ""


class RayExecutor:
    """Submits each attempt as a Ray job and follows it to its record."""

    def __init__(
        self, spec: Spec, settings: RaySettings, run_dir: RunDir, gate: Gate | None, done: Sequence[AttemptRecord]
    ):
        self.spec, self.settings, self.run_dir = spec, settings, run_dir
        self.client = RayClient(settings.address)
        self.board = RayBoard(self.client)
        self.secrets = settings.secrets()
        self.nonce = new_nonce()
        self.keeper = Gatekeeper(gate, done)
        self.still_matters = self.keeper.still_matters  # the gate, asked while a job waits or runs
        self.adoptable = self._running_jobs()

    def run(self, item: PlannedAttempt, slot: Slot, cancel: Cancel, events: RunEvents) -> AttemptRecord:
        folder = self.run_dir.attempt_dir(item.name)
        job_id = self.adoptable.pop(item.name, None)
        if job_id is None:
            try:
                job_id = self._submit(item, folder)
            except RayRejected as exc:
                events.on_start(item, slot)
                return not_launched(item, Outcome.LAUNCH_ERROR, f"Ray refused the job: {self.secrets.log(str(exc))}")
        events.on_start(item, slot)
        limit = self.spec.server.timeout + self.spec.server.grace + LIMIT_MARGIN_S
        queue = RayQueue(self.board, folder, self.secrets)
        follow = Follow(item, job_id, folder, queue, self.spec.server.grace, cancel, events, self.still_matters, limit)
        return self.keeper.finished(self._placed(follow.until_record(), job_id))

    def _placed(self, record: AttemptRecord, job_id: str) -> AttemptRecord:
        """The record names Ray's node (its id: two raylets on one host are two nodes) and the host."""
        job = self.board.state(job_id) or self.client.job(job_id)
        where = record.executor or Placement("ray", job_id)
        if job is not None and job.node:
            host = where.node if where.node and where.node != job.node else where.host
            where = dataclasses.replace(where, node=job.node, host=host)
        return dataclasses.replace(record, executor=where)

    def _submit(self, item: PlannedAttempt, folder: Path) -> str:
        """Write the job's file, then submit the job under an id of this run's own."""
        for stale in ("result.json", "server.log", PROGRESS_FILE, STOP_FILE, "nodes.json"):  # an earlier try's
            with contextlib.suppress(FileNotFoundError):
                (folder / stale).unlink()
        job_id = f"diagbench-{self.nonce}-{item.name}"
        job = JobFile.of(item, self.spec, job_id)
        job.write(folder)
        return self.client.submit(self._body(item, job_id))

    def _body(self, item: PlannedAttempt, job_id: str) -> dict[str, Any]:
        run_dir = str(self.run_dir.path.resolve())
        worker = [self.settings.python, "-m", "diagbench", "worker", "--kind", "ray", run_dir, item.name]
        body: dict[str, Any] = {
            "entrypoint": shlex.join(worker),
            "submission_id": job_id,
            "runtime_env": self.settings.runtime_env(),
            "metadata": {RUN_KEY: run_dir, ATTEMPT_KEY: item.name},
            "entrypoint_num_cpus": 0,  # the worker only waits; the server's CPUs are the node's
        }
        if self.settings.gpus and self.settings.nodes == 1:  # spanning: the nodes' bundles hold them
            body["entrypoint_num_gpus"] = self.settings.gpus
        return body

    def _running_jobs(self) -> dict[str, str]:
        """Jobs a previous controller of this run left pending or running: attempt -> job id."""
        where = str(self.run_dir.path.resolve())
        found = {}
        for job in self.client.jobs() or []:
            meta = job.metadata or {}
            attempt = meta.get(ATTEMPT_KEY, "")
            if job.active and meta.get(RUN_KEY) == where and (self.run_dir.cells / attempt / "job.json").is_file():
                found[attempt] = job.job_id
        return found
