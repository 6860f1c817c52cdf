"""Which executor runs the attempts: the command line over a resumed run's choice over the
spec's `executor:`, over the default (this host). Slurm is checked before anything is written."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from diagbench.errors import RecordError, UserError
from diagbench.execute.executors import owner_of, plugin_for
from diagbench.execute.plugin import Build, ExecutorPlugin, Settled
from diagbench.execute.scheduler import Executor
from diagbench.execute.slots import SlotPlan
from diagbench.records.redact import Redactor
from diagbench.records.store import read_manifest
from diagbench.sensitive import REDACTED
from diagbench.spec.executor import ExecutorKind, ExecutorSpec
from diagbench.spec.gpus import GpuRequest
from diagbench.spec.load import Spec


@dataclass(frozen=True)
class Placement:
    """Where this run's attempts go, settled and checked by the kind's plugin."""

    spec: ExecutorSpec
    settled: Settled = field(default_factory=Settled)

    @property
    def kind(self) -> str:
        return self.spec.resolved_kind

    @property
    def plugin(self) -> ExecutorPlugin:
        return plugin_for(self.kind)

    def to_json(self) -> dict[str, Any]:
        """The executor and its options, for the manifest."""
        data = self.spec.to_json()
        secrets = Redactor.of(argvs=[self.spec.args])  # `--export=HF_TOKEN=...` is an sbatch option too
        data["args"], data["setup"] = secrets.argv(self.spec.args), [secrets.log(line) for line in self.spec.setup]
        return {**data, **self.settled.recorded}

    def slots(
        self, spec: Spec, given: SlotPlan | None, gpus: GpuRequest | None, parallel: int | None, attempts: int
    ) -> SlotPlan:
        return self.plugin.slots(spec, given, gpus, parallel, attempts)

    def executor(self, run: Build) -> Executor:
        return self.plugin.build(replace(run, settled=self.settled))


def requested(spec: Spec, given: ExecutorSpec, resume: Path | None) -> ExecutorSpec:
    """The executor settings asked for: the command line's over a resumed run's (or the
    spec's). Another kind's options are a mistake, said here."""
    layers = given.over(_resumed(spec, resume, given) if resume is not None else spec.executor)
    own = plugin_for(layers.resolved_kind).keys
    for key in layers.given_slurm_options():
        if key not in own:
            kind, option = owner_of(key)
            raise UserError(f"{option} applies to --executor {kind} (add it, or set executor: {kind} in the spec)")
    return layers


def place(spec: Spec, given: ExecutorSpec, runs_dir: Path, resume: Path | None) -> Placement:
    """Settle the executor, checked by its plugin (Slurm: the options, and that a node sees `runs_dir`)."""
    layers = requested(spec, given, resume)
    return Placement(
        layers, plugin_for(layers.resolved_kind).check(spec, layers, resume.parent if resume else runs_dir)
    )


def executor_notes(
    spec: Spec, layers: ExecutorSpec, given: ExecutorSpec, parallel: int | None, gpus: bool
) -> list[str]:
    """Before anything is submitted: an option the kind does not take is a mistake (UserError);
    what the user should know about where the attempts run, one line each."""
    return plugin_for(layers.resolved_kind).notes(spec, layers, given, parallel, gpus)


def _resumed(spec: Spec, run: Path, given: ExecutorSpec) -> ExecutorSpec:
    """The executor a run was started with, its secrets back: the spec's own settings come from
    the spec (its sha256 is the run's: they are exact), what the first command line added
    from the manifest, which blanked its secrets: those must be given again."""
    recorded = _recorded(run)
    if (given.kind or recorded.resolved_kind) == ExecutorKind.LOCAL:
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
