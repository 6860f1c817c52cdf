"""Before the first job: would Slurm take the attempts' jobs, and can a node see the run
directory? A mistake here is one message and exit 2, before anything is submitted."""

from __future__ import annotations

import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

from diagbench.errors import UserError
from diagbench.execute.slurm import commands
from diagbench.execute.slurm.commands import JobState, SlurmRejected
from diagbench.execute.slurm.jobs import SlurmSettings
from diagbench.safefiles import remove_folder

__all__ = ["HOLD_BACK", "PROBE_LAG_S", "PROBE_LOOK_S", "PROBE_WAIT_S", "check_cluster", "probe_options"]

PROBE_WAIT_S = 120.0  # a probe asks for one CPU for a minute: on a usable partition it starts soon
PROBE_LOOK_S = 0.5
PROBE_LAG_S = 10.0  # a file a node wrote may show up late on a network file system
_SEEN = "seen"
# sbatch options that hold a job back until something else happens: the probe must start now.
# name -> whether it takes a value (`--begin=now+1h`, `--begin now+1h`, `-b now+1h`, `-bnow+1h`)
HOLD_BACK = {"--dependency": True, "-d": True, "--begin": True, "-b": True, "--hold": False, "-H": False}


def check_cluster(settings: SlurmSettings, folder: Path) -> str:
    """sbatch --test-only with the attempts' options, then a tiny job that writes a file into
    `folder`; returns the node that saw it. UserError with Slurm's words otherwise."""
    commands.check_available()
    folder.mkdir(parents=True, exist_ok=True)
    probe = Path(tempfile.mkdtemp(prefix=".diagbench-probe-", dir=folder)).resolve()
    try:
        script = f"#!/bin/sh\nhostname > {probe}/{_SEEN}.tmp && mv {probe}/{_SEEN}.tmp {probe}/{_SEEN}\n"
        try:
            commands.dry_submit(settings.sbatch_options(), script)
        except SlurmRejected as exc:
            fix = "check --slurm-partition, --slurm-arg and server.gpus"
            raise UserError(f"Slurm would not take the attempts' jobs: {exc} ({fix})") from None
        # the probe asks no GPU and a minute, so it starts as soon as any node of the partition can
        options = [*probe_options(settings.sbatch_options(with_gpus=False)), "--time=1", "--job-name=diagbench-probe"]
        options += ["--output=/dev/null", f"--chdir={probe}"]
        job_id = commands.submit(options, script)
        try:
            return _wait_for_probe(job_id, probe, folder)
        finally:
            commands.cancel([job_id])
    finally:
        remove_folder(probe)  # never through a link: the probe folder is under the runs directory


def probe_options(options: Sequence[str]) -> list[str]:
    """The attempts' sbatch options for the probe job: all of them (partition, account, QOS,
    constraints, uid: what decides where it runs and as whom) but those that hold a job back
    (--dependency, --begin, --hold): the probe must run now, not after another job."""
    kept: list[str] = []
    words = iter(options)
    for option in words:
        held, value_next = _holds_back(option)
        if value_next:
            next(words, None)
        if not held:
            kept.append(option)
    return kept


def _holds_back(option: str) -> tuple[bool, bool]:
    """Whether an sbatch option holds a job back, and whether its value is the next word."""
    name, eq, _ = option.partition("=")
    if name in HOLD_BACK:
        return True, HOLD_BACK[name] and not eq
    if not option.startswith("--") and HOLD_BACK.get(option[:2], False):  # -dafterok:5, -bnow+1h
        return True, False
    return False, False


def _wait_for_probe(job_id: str, probe: Path, folder: Path) -> str:
    deadline = time.monotonic() + PROBE_WAIT_S
    ended_at: float | None = None
    state: JobState | None = None
    while True:
        if (probe / _SEEN).is_file():
            return (probe / _SEEN).read_text(encoding="utf-8").strip()
        state = (commands.queue([job_id]) or {}).get(job_id, state)
        if state is not None and not state.active:
            ended_at = ended_at or time.monotonic()
            if time.monotonic() - ended_at > PROBE_LAG_S:
                raise UserError(
                    f"Slurm node {state.node or '?'} ran probe job {job_id} but could not write into {folder} "
                    f"(job {state.describe()}): the run directory must be on a file system the nodes mount, "
                    "writable by the job's user; pass --runs-dir on shared storage (a shared home, /shared, /scratch)"
                )
        elif time.monotonic() > deadline:
            waiting = f"still {state.describe()}" if state is not None else "not seen in the queue"
            raise UserError(
                f"probe job {job_id} is {waiting} after {PROBE_WAIT_S:.0f}s, so diagbench cannot check that the "
                f"nodes see {folder}; try a partition with free nodes (--slurm-partition) or run again later"
            )
        time.sleep(PROBE_LOOK_S)
