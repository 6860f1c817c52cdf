"""The Slurm plugin: `--executor slurm` (or `executor: slurm`) and its `--slurm-*` options;
one batch job per attempt (execute/slurm/executor.py)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from diagbench.errors import UserError
from diagbench.execute.plugin import ExecutorOption, PluginBase, Settled
from diagbench.execute.slurm.keys import ARGS, KIND, PARTITION, PYTHON, SETUP, TIME
from diagbench.spec.executor import ExecutorKey, ExecutorSpec, Setting

if TYPE_CHECKING:  # registered for every command line (its options): the rest is loaded when a run uses it
    from diagbench.execute.plugin import Build
    from diagbench.execute.scheduler import Executor
    from diagbench.execute.slots import SlotPlan
    from diagbench.records.record import AttemptRecord
    from diagbench.spec.gpus import GpuRequest
    from diagbench.spec.load import Spec

__all__ = ["SlurmPlugin"]


class SlurmPlugin(PluginBase):
    """Attempts as Slurm batch jobs, checked first by a probe job that must see the run directory."""

    kind: str = KIND
    on_this_host: bool = False
    spans_nodes: bool = True  # sbatch --nodes=N, one srun step with a task per node (execute/slurm/span.py)
    keys: tuple[ExecutorKey, ...] = (PARTITION, ARGS, TIME, SETUP, PYTHON)
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
        secrets = Redactor.of(argvs=[settings.args])  # `--export=HF_TOKEN=...` is an sbatch option too
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
        time = layers.read(TIME)
        if time is not None and time < needs:
            said = layers.settings[TIME.name]
            flag = said.path.startswith("--") or said.path.endswith("options.executor.time")  # a resumed run's first
            where = ("--slurm-time " if flag else "executor.time: ") + write_duration(time)
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

        per = spec.server.gpus or 0
        offer = f"Slurm: --gres=gpu:{per} per job" if per else "Slurm: no GPU asked"
        return queue_slots(spec.server, parallel, attempts, offer, "Slurm")

    def build(self, run: Build) -> Executor:
        from diagbench.execute.slurm.executor import SlurmExecutor

        return SlurmExecutor(run.spec, run.settled.settings, run.run_dir, run.gate, run.done, run.todo)

    def recorded(self, layers: ExecutorSpec) -> dict[str, Any]:
        """partition, args, time_s, setup, python: as runs have recorded them since the first Slurm release."""
        from diagbench.records.redact import Redactor

        args, setup = layers.read(ARGS), layers.read(SETUP)
        secrets = Redactor.of(argvs=[args])  # `--export=HF_TOKEN=...` is an sbatch option too
        return {
            "partition": layers.read(PARTITION),
            "args": secrets.argv(args),
            "time_s": layers.read(TIME),
            "setup": [secrets.log(line) for line in setup],
            "python": layers.read(PYTHON),
        }

    def resumed(self, spec: Spec, recorded: Mapping[str, Any], given: ExecutorSpec, run: Path) -> ExecutorSpec:
        """The spec's own settings from the spec (its sha256 is the run's: they are exact), what the
        first command line added from the manifest, which blanked its secrets: those must be given again."""
        from diagbench.sensitive import REDACTED

        own = spec.executor.read(ARGS) if spec.executor.kind in (None, KIND) else ()
        added = [str(a) for a in recorded.get("args") or []][len(own) :]  # the spec's args, then the command line's
        if any(REDACTED in arg for arg in added):
            if not given.settings.get(ARGS.name):
                shown = " ".join(f"--slurm-arg={arg}" for arg in added)
                raise UserError(
                    f"{run}: the recorded executor settings hold redacted secrets ({shown}): give the spec again, "
                    "with those --slurm-arg options in full"
                )
            added = []  # given again: this command line's take their place
        where = f"{run}/manifest.json: options.executor"
        values = {
            PARTITION.name: recorded.get("partition"),
            ARGS.name: [*own, *added],
            TIME.name: recorded.get("time_s"),
            SETUP.name: list(spec.executor.read(SETUP)) if spec.executor.kind in (None, KIND) else [],
            PYTHON.name: recorded.get("python"),
        }
        settings = {k: Setting(v, f"{where}.{k}") for k, v in values.items() if v not in (None, [], "")}
        if spec.executor.kind in (None, KIND):  # the spec's own, as written (its place in messages)
            settings |= {k: s for k, s in spec.executor.settings.items() if k in (PARTITION.name, TIME.name)}
        return ExecutorSpec(KIND, settings)

    def worker(self, run_dir: Path, attempt: str) -> AttemptRecord:
        from diagbench.execute.slurm.worker import run_worker

        return run_worker(run_dir, attempt)
