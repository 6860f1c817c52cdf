"""The Slurm plugin: `--executor slurm` (or `executor: slurm`) and its `--slurm-*` options;
one batch job per attempt (execute/slurm/executor.py)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from diagbench.errors import UserError
from diagbench.execute.plugin import ExecutorOption, Settled
from diagbench.spec.executor import ExecutorKind

if TYPE_CHECKING:  # registered for every command line (its options): the rest is loaded when a run uses it
    from diagbench.execute.plugin import Build
    from diagbench.execute.scheduler import Executor
    from diagbench.execute.slots import SlotPlan
    from diagbench.spec.executor import ExecutorSpec
    from diagbench.spec.gpus import GpuRequest
    from diagbench.spec.load import Spec


class SlurmPlugin:
    """Attempts as Slurm batch jobs, checked first by a probe job that must see the run directory."""

    kind: str = ExecutorKind.SLURM.value
    on_this_host: bool = False
    keys: tuple[str, ...] = ("partition", "args", "time", "setup", "python")
    options: tuple[ExecutorOption, ...] = (
        ExecutorOption("--slurm-partition", "partition", "P", "sbatch --partition for every attempt"),
        ExecutorOption("--slurm-arg", "args", "ARG", "one more sbatch option (--slurm-arg=--qos=high)", many=True),
        ExecutorOption("--slurm-time", "time", "D", "walltime per job (default: timeout + grace + 2m)"),
    )

    def check(self, spec: Spec, layers: ExecutorSpec, folder: Path) -> Settled:
        from diagbench.execute.slurm.jobs import SlurmSettings
        from diagbench.execute.slurm.probe import check_cluster
        from diagbench.records.redact import Redactor

        settings = SlurmSettings.of(layers, spec.server)
        node = check_cluster(settings, folder)
        secrets = Redactor.of(argvs=[layers.args])  # `--export=HF_TOKEN=...` is an sbatch option too
        return Settled(settings, {"sbatch": secrets.argv(settings.sbatch_options()), "probe_node": node})

    def notes(
        self, spec: Spec, layers: ExecutorSpec, given: ExecutorSpec, parallel: int | None, gpus: bool
    ) -> list[str]:
        """A local-only option is a mistake (UserError); what the user should know about the jobs."""
        from diagbench.yamlsrc import write_duration

        if gpus:
            raise UserError(
                "--gpus applies to local runs; on Slurm the cluster hands out GPUs: set server.gpus (GPUs per attempt)"
            )
        notes = []  # the queue's own (a fixed port: one at a time) come with its slots
        needs = spec.server.timeout + spec.server.grace
        if layers.time is not None and layers.time < needs:
            spec_said = not given.time and layers.time == spec.executor.time  # a resumed run's: its first --slurm-time
            where = ("executor.time: " if spec_said else "--slurm-time ") + write_duration(layers.time)
            notes.append(
                f"{where} is shorter than server.timeout + grace ({write_duration(needs)}): an attempt still starting "
                "when Slurm's time limit ends its job is recorded as a timeout"
            )
        return notes

    def slots(
        self, spec: Spec, given: SlotPlan | None, gpus: GpuRequest | None, parallel: int | None, attempts: int
    ) -> SlotPlan:
        """Plain slots (the cluster hands out GPUs), one per attempt unless --parallel caps the
        jobs in the queue (or a fixed port, one)."""
        from diagbench.execute.slots import queue_slots

        return queue_slots(spec.server, parallel, attempts)

    def build(self, run: Build) -> Executor:
        from diagbench.execute.slurm.executor import SlurmExecutor

        return SlurmExecutor(run.spec, run.settled.settings, run.run_dir, run.gate, run.done, run.todo)
