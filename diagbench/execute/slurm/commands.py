"""The one module that talks to Slurm: plain sbatch, squeue, scontrol, sacct and scancel.

Like launch/process.py for local processes, it is where subprocess is allowed for Slurm
(a documented exception to "subprocess only in launch/"). Everything above it sees typed
`JobState`s and `SlurmRejected` errors carrying Slurm's own words, never raw output.
Asking the controller can fail for a moment (a busy slurmctld): queries then return None
and the caller asks again later.
"""

from __future__ import annotations

import functools
import shutil
import subprocess
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from diagbench.errors import UserError

__all__ = [
    "ACTIVE_STATES",
    "COMMAND_TIMEOUT_S",
    "JobState",
    "SlurmRejected",
    "SlurmUnavailable",
    "cancel",
    "check_available",
    "dry_submit",
    "final_state",
    "has_accounting",
    "limit_seconds",
    "my_jobs",
    "parse_queue",
    "parse_sacct",
    "queue",
    "signal_worker",
    "submit",
]

COMMAND_TIMEOUT_S = 60.0  # a slurmctld under load can take tens of seconds to answer
# states a job can still leave on its own; anything else is where it ended
ACTIVE_STATES = frozenset(
    {
        "PENDING",
        "CONFIGURING",
        "RUNNING",
        "COMPLETING",
        "SUSPENDED",
        "REQUEUED",
        "REQUEUE_FED",
        "REQUEUE_HOLD",
        "RESIZING",
        "SIGNALING",
        "STAGE_OUT",
        "STOPPED",
    }
)
_FIELDS = "%i|%T|%r|%N|%j|%l|%Z"  # job id, state, reason, nodes, name, time limit, working directory
_NOT_FOUND = "Invalid job id specified"
_MISSING = "not found: run diagbench on a Slurm login node (or --executor local)"


class SlurmRejected(UserError):
    """sbatch refused a job (bad partition, bad gres, bad option): Slurm's own words."""


class SlurmUnavailable(UserError):
    """No Slurm here: the commands are missing or the controller does not answer."""


@dataclass(frozen=True)
class JobState:
    """What Slurm says of one job."""

    job_id: str
    state: str  # Slurm's word: PENDING, RUNNING, COMPLETED, CANCELLED, TIMEOUT, NODE_FAIL, ...
    reason: str = ""  # why it waits or ended (Priority, Resources, TimeLimit, ...); "" for none
    node: str = ""  # the node list; "" while pending
    name: str = ""
    workdir: str = ""
    limit: str = ""  # its time limit in Slurm's words (`1:00`, `1-00:00:00`, UNLIMITED); "" if not said

    @property
    def active(self) -> bool:
        return self.state in ACTIVE_STATES

    @property
    def running(self) -> bool:
        return self.state not in ("PENDING", "CONFIGURING") and self.active

    def describe(self) -> str:
        """`CANCELLED`, or `TIMEOUT (TimeLimit)`."""
        return f"{self.state} ({self.reason})" if self.reason else self.state


def _run(argv: Sequence[str], stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    try:
        return subprocess.run(
            list(argv),
            input=stdin,
            capture_output=True,
            text=True,
            timeout=COMMAND_TIMEOUT_S,
            stdin=None if stdin is not None else subprocess.DEVNULL,
        )
    except FileNotFoundError:
        raise SlurmUnavailable(f"'{argv[0]}' {_MISSING}") from None
    except subprocess.TimeoutExpired:
        return subprocess.CompletedProcess(list(argv), 124, "", f"{argv[0]}: no answer in {COMMAND_TIMEOUT_S:.0f}s")


def _words(text: str) -> str:
    """Slurm's message, one line: `sbatch: error: Batch job submission failed: X` -> its lines joined."""
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    return "; ".join(line.removeprefix("sbatch: error: ").removeprefix("sbatch: ") for line in lines)


def check_available() -> None:
    """sbatch and squeue exist here and the controller answers."""
    for command in ("sbatch", "squeue", "scancel"):
        if shutil.which(command) is None:
            raise SlurmUnavailable(f"'{command}' {_MISSING}")
    answer = _run(["squeue", "-h", "--me", "-o", "%i"])
    if answer.returncode != 0:
        raise SlurmUnavailable(f"the Slurm controller does not answer: {_words(answer.stderr) or 'squeue failed'}")


def submit(options: Sequence[str], script: str) -> str:
    """sbatch the script (its text, on stdin: nothing with a secret in it is left on disk)
    with these options; the job id, or SlurmRejected with Slurm's words."""
    answer = _run(["sbatch", "--parsable", *options], stdin=script)
    job_id = answer.stdout.strip().split(";")[0]  # --parsable prints "id" or "id;cluster"
    if answer.returncode != 0 or not job_id.isdigit():
        raise SlurmRejected(_words(answer.stderr) or f"sbatch failed with exit code {answer.returncode}")
    return job_id


def dry_submit(options: Sequence[str], script: str) -> None:
    """sbatch --test-only: would Slurm accept this job? SlurmRejected with its words if not."""
    answer = _run(["sbatch", "--test-only", *options], stdin=script)
    if answer.returncode != 0:
        raise SlurmRejected(_words(answer.stderr) or f"sbatch --test-only failed with exit code {answer.returncode}")


def queue(job_ids: Iterable[str]) -> dict[str, JobState] | None:
    """The jobs Slurm still knows (active, or ended within its MinJobAge), by id; None if it
    could not be asked just now."""
    ids = sorted(set(job_ids), key=int)
    if not ids:
        return {}
    answer = _run(["squeue", "-h", "-t", "all", "-j", ",".join(ids), "-o", _FIELDS])
    if answer.returncode != 0:
        return {} if _NOT_FOUND in answer.stderr else None
    return {s.job_id: s for s in parse_queue(answer.stdout)}


def my_jobs() -> list[JobState] | None:
    """This user's active jobs (to adopt the ones a killed diagbench left running)."""
    answer = _run(["squeue", "-h", "--me", "-o", _FIELDS])
    if answer.returncode != 0:
        return None
    return [s for s in parse_queue(answer.stdout) if s.active]


def parse_queue(text: str) -> list[JobState]:
    """squeue -o '%i|%T|%r|%N|%j|%l|%Z' lines as job states."""
    states = []
    for line in text.splitlines():
        parts = line.strip().split("|", 6)
        if len(parts) == 7 and parts[0]:
            job_id, state, reason, node, name, limit, workdir = parts
            states.append(JobState(job_id, state, _reason(reason), node, name, workdir, limit))
    return states


def limit_seconds(limit: str) -> float | None:
    """Slurm's time limit words (`1:00`, `5:00:00`, `2-00:00:00`) in seconds; None for
    UNLIMITED, NOT_SET or anything else."""
    days, _, clock = limit.strip().rpartition("-")
    parts = clock.split(":")
    if not (days or "0").isdigit() or not 2 <= len(parts) <= 3 or not all(p.isdigit() for p in parts):
        return None
    seconds = 0
    for part in parts:  # [H:]M:S
        seconds = seconds * 60 + int(part)
    return float(int(days or 0) * 86400 + seconds)


def _reason(word: str) -> str:
    return "" if word in ("None", "(null)") else word


def final_state(job_id: str) -> JobState | None:
    """How a job that left the queue ended, from accounting (sacct) if the cluster has it."""
    if not has_accounting():
        return None
    answer = _run(["sacct", "-X", "-n", "-P", "-j", job_id, "-o", "JobID,State,Reason,NodeList"])
    return parse_sacct(answer.stdout, job_id)


def parse_sacct(text: str, job_id: str) -> JobState | None:
    """sacct -X -n -P -o JobID,State,Reason,NodeList: the job's line as its end state."""
    for line in text.splitlines():
        parts = line.strip().split("|")
        if len(parts) == 4 and parts[0] == job_id:
            state = parts[1].split()[0] if parts[1].strip() else "UNKNOWN"  # "CANCELLED by 1000" -> CANCELLED
            return JobState(job_id, state, _reason(parts[2]), "" if parts[3] == "None assigned" else parts[3])
    return None


@functools.lru_cache(maxsize=1)
def has_accounting() -> bool:
    """Whether sacct can answer (the cluster stores accounting); everything works without it."""
    answer = _run(["scontrol", "show", "config"])
    for line in answer.stdout.splitlines():
        key, _, value = line.partition("=")
        if key.strip() == "AccountingStorageType":
            return value.strip() not in ("", "accounting_storage/none")
    return False


def cancel(job_ids: Iterable[str]) -> None:
    """scancel: end the jobs (Slurm sends SIGTERM to every process, SIGKILL after KillWait)."""
    ids = sorted(set(job_ids), key=int)
    if ids:
        _run(["scancel", *ids])


def signal_worker(job_ids: Iterable[str]) -> None:
    """SIGTERM to the batch step alone (the diagbench worker): it stops its server's tree on
    its own grace deadline and writes the record, as a local run would."""
    ids = sorted(set(job_ids), key=int)
    if ids:
        _run(["scancel", "--batch", "--signal=TERM", *ids])
