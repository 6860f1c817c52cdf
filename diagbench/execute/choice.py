"""Which executor runs the attempts: the command line over a resumed run's choice over the
spec's `executor:`, over the default (this host). Slurm is checked before anything is written."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from diagbench.errors import RecordError, UserError
from diagbench.execute.local import LocalExecutor
from diagbench.execute.scheduler import Executor, Gate
from diagbench.execute.slots import SlotPlan, queue_notes, queue_slots, resolve_slots
from diagbench.records.record import AttemptRecord
from diagbench.records.redact import Redactor
from diagbench.records.store import RunDir, read_manifest
from diagbench.sensitive import REDACTED
from diagbench.spec.executor import ExecutorKind, ExecutorSpec
from diagbench.spec.gpus import GpuRequest
from diagbench.spec.load import Spec
from diagbench.spec.plan import PlannedAttempt
from diagbench.yamlsrc import write_duration


@dataclass(frozen=True)
class Placement:
    """Where this run's attempts go, settled and checked."""

    spec: ExecutorSpec
    slurm: Any = None  # SlurmSettings, for kind slurm (imported only then)
    node_seen: str | None = None  # the node whose probe job saw the run directory

    @property
    def kind(self) -> ExecutorKind:
        return self.spec.resolved_kind

    def to_json(self) -> dict[str, Any]:
        """The executor and its options, for the manifest."""
        data = self.spec.to_json()
        secrets = Redactor.of(argvs=[self.spec.args])  # `--export=HF_TOKEN=...` is an sbatch option too
        data["args"], data["setup"] = secrets.argv(self.spec.args), [secrets.log(line) for line in self.spec.setup]
        if self.slurm is not None:
            data["sbatch"] = secrets.argv(self.slurm.sbatch_options())
            data["probe_node"] = self.node_seen
        return data

    def slots(
        self, spec: Spec, given: SlotPlan | None, gpus: GpuRequest | None, parallel: int | None, attempts: int
    ) -> SlotPlan:
        """This host's GPU slots; on Slurm, plain ones (the cluster hands out GPUs), one per
        attempt unless --parallel caps the jobs in the queue (or a fixed port, one)."""
        if self.kind is ExecutorKind.LOCAL:
            return given or resolve_slots(spec, gpus, parallel)
        return queue_slots(spec.server, parallel, attempts)

    def executor(
        self,
        spec: Spec,
        run_dir: RunDir,
        slots: SlotPlan,
        gate: Gate | None,
        done: Sequence[AttemptRecord],
        todo: Sequence[PlannedAttempt],
    ) -> Executor:
        if self.kind is ExecutorKind.SLURM:
            from diagbench.execute.slurm.executor import SlurmExecutor

            return SlurmExecutor(spec, self.slurm, run_dir, gate, done, todo)
        return LocalExecutor(spec.server, run_dir, slots)


def requested(spec: Spec, given: ExecutorSpec, resume: Path | None) -> ExecutorSpec:
    """The executor settings asked for: the command line's over a resumed run's (or the
    spec's). Slurm options for a run on this host are a mistake, said here."""
    layers = given.over(_resumed(spec, resume, given) if resume is not None else spec.executor)
    if layers.resolved_kind is ExecutorKind.LOCAL and layers.given_slurm_options():
        option = _OPTION_NAMES.get(layers.given_slurm_options()[0], "executor options")
        raise UserError(f"{option} applies to --executor slurm (add it, or set executor: slurm in the spec)")
    return layers


def place(spec: Spec, given: ExecutorSpec, runs_dir: Path, resume: Path | None) -> Placement:
    """Settle the executor; for Slurm, check the options and that a node sees `runs_dir`."""
    layers = requested(spec, given, resume)
    if layers.resolved_kind is ExecutorKind.LOCAL:
        return Placement(layers)
    from diagbench.execute.slurm.jobs import SlurmSettings
    from diagbench.execute.slurm.probe import check_cluster

    settings = SlurmSettings.of(layers, spec.server)
    node = check_cluster(settings, resume.parent if resume is not None else runs_dir)
    return Placement(layers, settings, node)


_OPTION_NAMES = {"partition": "--slurm-partition", "args": "--slurm-arg", "time": "--slurm-time"}


def slurm_notes(spec: Spec, layers: ExecutorSpec, given: ExecutorSpec, parallel: int | None, gpus: bool) -> list[str]:
    """Before anything is submitted: a local-only option is a mistake (UserError); what the
    user should know about the jobs, one line each."""
    if gpus:
        raise UserError(
            "--gpus applies to local runs; on Slurm the cluster hands out GPUs: set server.gpus (GPUs per attempt)"
        )
    notes = queue_notes(spec.server, parallel)
    needs = spec.server.timeout + spec.server.grace
    if layers.time is not None and layers.time < needs:
        spec_said = not given.time and layers.time == spec.executor.time  # a resumed run's: its first --slurm-time
        where = ("executor.time: " if spec_said else "--slurm-time ") + write_duration(layers.time)
        notes.append(
            f"{where} is shorter than server.timeout + grace ({write_duration(needs)}): an attempt still starting when "
            "Slurm's time limit ends its job is recorded as a timeout"
        )
    return notes


def _resumed(spec: Spec, run: Path, given: ExecutorSpec) -> ExecutorSpec:
    """The executor a run was started with, its secrets back: the spec's own settings come from
    the spec (its sha256 is the run's: they are exact), what the first command line added
    from the manifest, which blanked its secrets: those must be given again."""
    recorded = _recorded(run)
    if (given.kind or recorded.resolved_kind) is ExecutorKind.LOCAL:
        return ExecutorSpec(ExecutorKind.LOCAL)  # it runs here: the spec's Slurm settings are not for it
    own = spec.executor
    added = recorded.args[len(own.args) :]  # recorded: the spec's args, then the command line's
    if any(REDACTED in arg for arg in added):
        if not given.args:
            shown = " ".join(f"--slurm-arg={arg}" for arg in added)
            raise UserError(
                f"{run}: the recorded executor settings hold redacted secrets ({shown}): give the spec again, "
                "with those --slurm-arg options in full"
            )
        added = ()  # given again: this command line's take their place
    args = (*own.args, *added)
    return ExecutorSpec(recorded.kind, recorded.partition, args, recorded.time, own.setup, recorded.python)


def _recorded(run: Path) -> ExecutorSpec:
    """The executor a run was started with (an older run without one ran here)."""
    try:
        return read_manifest(run).settings.executor_spec
    except (RecordError, ValueError, TypeError):
        return ExecutorSpec()
