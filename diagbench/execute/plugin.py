"""What an executor plugin provides (the registry is execute/executors.py; docs/executors.md
says how to write one)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:  # every command line reads the plugins' options: it must not load the scheduler
    from diagbench.execute.scheduler import Executor, Gate
    from diagbench.execute.slots import SlotPlan
    from diagbench.records.record import AttemptRecord
    from diagbench.records.store import RunDir
    from diagbench.spec.executor import ExecutorSpec
    from diagbench.spec.gpus import GpuRequest
    from diagbench.spec.load import Spec
    from diagbench.spec.plan import PlannedAttempt


@dataclass(frozen=True)
class ExecutorOption:
    """One command-line option of a kind, and the `executor:` key of the spec it layers over."""

    flag: str  # `--slurm-partition`
    key: str  # the ExecutorSpec field (and spec key) it sets: `partition`
    metavar: str
    help: str
    many: bool = False  # repeatable: each one adds (`--slurm-arg`)


@dataclass(frozen=True)
class Build:
    """What a plugin builds its Executor for: the run, its slots, the gate that may stop an
    attempt that can no longer matter, and the attempts already recorded and to run, in order."""

    spec: Spec
    run_dir: RunDir
    slots: SlotPlan
    gate: Gate | None = None
    done: Sequence[AttemptRecord] = ()
    todo: Sequence[PlannedAttempt] = ()
    settled: Settled = field(default_factory=lambda: Settled())  # the plugin's own, from its check


@dataclass(frozen=True)
class Settled:
    """A kind's checked settings for one run: its own (opaque to everyone else) and what the
    manifest records of it beyond the spec's settings (secrets blanked by the plugin)."""

    settings: Any = None
    recorded: Mapping[str, Any] = field(default_factory=dict)


class ExecutorPlugin(Protocol):
    """What a kind of executor provides. Every method but `build` runs before anything is
    written; a mistake there is a UserError naming the option or key and a fix."""

    kind: str
    on_this_host: bool  # its attempts are this host's process trees (they die with their diagbench)
    keys: tuple[str, ...]  # its keys under the spec's `executor:` (besides `kind`)
    options: tuple[ExecutorOption, ...]  # its command-line options, each over one of those keys

    def check(self, spec: Spec, layers: ExecutorSpec, folder: Path) -> Settled:
        """Settle and check the settings (`folder`: where the run directory goes)."""
        ...

    def notes(
        self, spec: Spec, layers: ExecutorSpec, given: ExecutorSpec, parallel: int | None, gpus: bool
    ) -> list[str]:
        """What the user should know before the run, one line each (`gpus`: --gpus was given)."""
        ...

    def slots(
        self, spec: Spec, given: SlotPlan | None, gpus: GpuRequest | None, parallel: int | None, attempts: int
    ) -> SlotPlan:
        """How many attempts run at once, and with which of this host's GPUs."""
        ...

    def build(self, run: Build) -> Executor:
        """The Executor that runs this run's attempts."""
        ...
