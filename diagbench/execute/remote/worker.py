"""The remote side, whatever the scheduler: run one attempt with the very code a local run
uses, and record it in the shared run directory (`diagbench worker RUN_DIR ATTEMPT`, which
the scheduler's job runs; its plugin's `worker` says where it runs)."""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from diagbench.errors import UserError
from diagbench.execute.cancel import Cancel, stop_on_signals
from diagbench.execute.remote.files import JobFile, Progress
from diagbench.launch.attempt import PhaseCallback, run_attempt
from diagbench.launch.environment import attempt_environments
from diagbench.launch.tags import Tag, current_scope, me, new_nonce
from diagbench.logs.scan import Scanner
from diagbench.records.parts import Placement
from diagbench.records.record import AttemptRecord, not_launched
from diagbench.records.redact import redact_record, server_redactor
from diagbench.records.store import RunDir, write_json
from diagbench.spec.load import ServerSpec, load_spec
from diagbench.spec.plan import PlannedAttempt
from diagbench.vocab import Outcome

__all__ = ["ENVIRONMENT_FILE", "Site", "run_worker"]

ENVIRONMENT_FILE = "environment.json"  # the server's environment as the node has it (the manifest's shape)


@dataclass(frozen=True)
class Site:
    """Where the worker runs, as its scheduler says (its job's environment)."""

    kind: str  # the executor's kind, in the record
    job_id: str
    node: str
    stopped: str  # the record's reason when the scheduler's SIGTERM stopped the attempt
    gpus: list[str] = field(default_factory=list)  # the GPUs the job was given
    # how the kind launches the server here (several nodes behind one process, say), and what it
    # adds to the record (the nodes' exits); the attempt's folder is given to both
    adapt: Callable[[ServerSpec, Path], ServerSpec] | None = None
    finish: Callable[[AttemptRecord, Path], AttemptRecord] | None = None


def run_worker(run_dir: Path, attempt: str, site: Site) -> AttemptRecord:
    """Run the attempt the job file names, write its result.json, and return the record."""
    folder = run_dir / "cells" / attempt
    job = JobFile.read(folder)
    job_id, node, gpus = site.job_id or job.job_id or "", site.node, list(site.gpus)
    progress = Progress(job_id, node, gpus, "starting", time.time())
    progress.write(folder)
    stop = Cancel()

    def on_phase(_item: PlannedAttempt, phase: str) -> None:
        nonlocal progress
        progress = dataclasses.replace(progress, phase=phase)
        progress.write(folder)

    try:
        with stop_on_signals(stop):  # SIGTERM: tear down on the grace deadline; a second one hurries
            record = _run(job, folder, stop, on_phase, site.adapt)
    finally:
        stop.close()
    # the cluster's queue plus the worker's start, for the record
    queued = round(progress.started_at - job.submitted_at, 3) if job.submitted_at is not None else None
    record = dataclasses.replace(record, executor=Placement(site.kind, job_id, node, tuple(gpus), queued))
    if site.finish is not None:
        record = site.finish(record, folder)
    if stop.interrupted and record.outcome in (Outcome.CANCELLED, Outcome.CRASHED):
        # the server got the scheduler's SIGTERM too and may have died of it first: not a crash
        record = dataclasses.replace(record, outcome=Outcome.CANCELLED, reason=site.stopped, failure_class=None)
    RunDir(run_dir).write_result(record)
    return record


def _run(
    job: JobFile,
    folder: Path,
    stop: Cancel,
    on_phase: PhaseCallback,
    adapt: Callable[[ServerSpec, Path], ServerSpec] | None = None,
) -> AttemptRecord:
    """The attempt itself; a spec the node cannot use is a launch error, a bug is a bug."""
    try:
        spec = load_spec(Path(job.spec_path))
        if spec.sha256 != job.spec_sha256:
            raise UserError(f"{job.spec_path} changed since the run started (its sha256 differs)")
        cells = {c.id: c for c in spec.cells}
        if job.cell_id not in cells:
            raise UserError(f"{job.spec_path} has no cell {job.cell_id}")
        planned = PlannedAttempt(cells[job.cell_id], job.repeat)
        write_json(folder / ENVIRONMENT_FILE, attempt_environments(spec.server, [planned])[0])  # read here, on the node
        scanner = Scanner(spec.server.signatures)
        run_dir = folder.parent.parent.resolve()
        tag = Tag(new_nonce(), job.attempt, me(), run_dir, current_scope())  # this worker owns the tree
        server = adapt(spec.server, folder) if adapt is not None else spec.server
        record = run_attempt(planned, server, folder, scanner, tag, stop.read_fd, on_phase, hurry=stop.urgent)
        secrets = server_redactor(spec.server, [planned.cell.env], [planned.cell.args])
        return redact_record(record, secrets)  # as a local run writes it: no secret in result.json
    except UserError as exc:
        return not_launched(job, Outcome.LAUNCH_ERROR, f"the node could not start the attempt: {exc}")
    except Exception as exc:  # diagbench's own failure on the node: recorded as such, never as the server's  # noqa: BLE001
        return not_launched(job, Outcome.INTERNAL_ERROR, f"diagbench failed on the node: {type(exc).__name__}: {exc}")
