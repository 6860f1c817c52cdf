"""What an executor plugin provides (the registry is execute/executors.py; docs/executors.md
says how to write one)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from diagbench.errors import UserError
from diagbench.spec.executor import ExecutorKey, ExecutorSpec, Setting

if TYPE_CHECKING:  # every command line reads the plugins' options: it must not load the scheduler
    from diagbench.execute.scheduler import Executor, Gate
    from diagbench.execute.slots import SlotPlan
    from diagbench.records.record import AttemptRecord
    from diagbench.records.store import RunDir
    from diagbench.spec.gpus import GpuRequest
    from diagbench.spec.load import Spec
    from diagbench.spec.plan import PlannedAttempt

__all__ = ["Build", "ExecutorOption", "ExecutorPlugin", "PluginBase", "Settled"]


@dataclass(frozen=True)
class ExecutorOption:
    """One command-line option of a kind, and the `executor:` key of the spec it layers over."""

    flag: str  # `--KIND-...`
    key: str  # the spec key (its plugin's ExecutorKey) it sets
    metavar: str
    help: str
    many: bool = False  # repeatable: each one adds


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
    spans_nodes: bool  # it can run one attempt over several nodes (server.nodes)
    keys: tuple[ExecutorKey, ...]  # its keys under the spec's `executor:` (besides `kind`)
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

    def recorded(self, layers: ExecutorSpec) -> dict[str, Any]:
        """Its settings as the manifest's `options.executor` keeps them (beside `kind`), secrets blanked."""
        ...

    def resumed(self, spec: Spec, recorded: Mapping[str, Any], given: ExecutorSpec, run: Path) -> ExecutorSpec:
        """The settings to finish `run` with, from what `recorded` kept (the spec's own, exact,
        from `spec`); a blanked secret must be given again (`given`), else a UserError says so."""
        ...

    def worker(self, run_dir: Path, attempt: str) -> AttemptRecord:
        """`diagbench worker RUN_DIR ATTEMPT` where its job runs: the attempt, recorded."""
        ...


class PluginBase:
    """What most plugins share: their settings recorded as given (secrets blanked), resumed
    from the spec and the record, and no worker (an executor that runs one overrides it)."""

    kind: str
    keys: tuple[ExecutorKey, ...] = ()
    spans_nodes: bool = False

    def recorded(self, layers: ExecutorSpec) -> dict[str, Any]:
        from diagbench.records.redact import Redactor

        secrets = Redactor.of(argvs=[_words(s.value) for s in layers.settings.values()])
        return {key: _blanked(secrets, s.value) for key, s in layers.settings.items()}

    def resumed(self, spec: Spec, recorded: Mapping[str, Any], given: ExecutorSpec, run: Path) -> ExecutorSpec:
        from diagbench.sensitive import REDACTED

        own = spec.executor.settings
        settings: dict[str, Setting] = {}
        for key in (k.name for k in self.keys):
            if key in own:
                settings[key] = own[key]  # the spec's own: exact (the manifest's copy is blanked)
            elif key in recorded and recorded[key] not in (None, [], ""):
                value = recorded[key]
                if REDACTED in str(value) and key not in given.settings:
                    flag = next((o.flag for o in getattr(self, "options", ()) if o.key == key), f"executor.{key}")
                    raise UserError(f"{run}: the recorded {flag} holds a redacted secret: give {flag} again in full")
                settings[key] = Setting(value, f"{run}/manifest.json: options.executor.{key}")
        return ExecutorSpec(self.kind, settings)

    def worker(self, run_dir: Path, attempt: str) -> AttemptRecord:
        raise UserError(f"executor '{self.kind}' runs no worker: its attempts run where diagbench runs")


def _words(value: Any) -> list[str]:
    return [str(v) for v in value] if isinstance(value, (list, tuple)) else [str(value)]


def _blanked(secrets: Any, value: Any) -> Any:
    if isinstance(value, (list, tuple)):
        return secrets.argv([str(v) for v in value])
    return secrets.log(str(value)) if isinstance(value, str) else value
