"""Executors as plugins: a registry from kind (`local`, `slurm`) to the plugin that provides
its command-line options, its checks, its slots and notes, and how to build its `Executor`.

`run`, `plan` and `isolate` place attempts only through this registry (execute/choice.py);
a new kind (Kubernetes Jobs, Ray) is one plugin registered here, see docs/executors.md.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from diagbench.errors import UserError
from diagbench.execute.plugin import Settled
from diagbench.execute.slurm.plugin import SlurmPlugin
from diagbench.spec.executor import ExecutorKind

if TYPE_CHECKING:  # the command line builds its options from this registry: it stays light to import
    from diagbench.execute.plugin import Build, ExecutorOption, ExecutorPlugin
    from diagbench.execute.scheduler import Executor
    from diagbench.execute.slots import SlotPlan
    from diagbench.spec.executor import ExecutorSpec
    from diagbench.spec.gpus import GpuRequest
    from diagbench.spec.load import Spec

_REGISTRY: dict[str, ExecutorPlugin] = {}


def register(plugin: ExecutorPlugin) -> None:
    """Make a kind available (a kind registered again is replaced)."""
    _REGISTRY[plugin.kind] = plugin


def unregister(kind: str) -> None:
    _REGISTRY.pop(kind, None)


def plugin_for(kind: str) -> ExecutorPlugin:
    try:
        return _REGISTRY[kind]
    except KeyError:
        raise UserError(f"unknown executor '{kind}' (choose one of: {', '.join(_REGISTRY)})") from None


def on_this_host(kind: str | None) -> bool:
    """Whether a run of this kind (None: from before kinds were recorded, local) ran on this
    host; a kind not registered here is taken to have run elsewhere."""
    plugin = _REGISTRY.get(kind or ExecutorKind.LOCAL.value)
    return plugin is not None and plugin.on_this_host


def kinds() -> tuple[str, ...]:
    return tuple(_REGISTRY)


def all_options() -> tuple[tuple[str, ExecutorOption], ...]:
    """Every kind's options, with the kind that owns each (the command line offers them all)."""
    return tuple((kind, option) for kind, plugin in _REGISTRY.items() for option in plugin.options)


def owner_of(key: str) -> tuple[str, str]:
    """The kind whose setting `key` is, and how the user gives it (its option, else the spec's key)."""
    kind = next((k for k, p in _REGISTRY.items() if key in p.keys), "?")
    flag = next((o.flag for k, o in all_options() if o.key == key), "executor options")
    return kind, flag


class LocalPlugin:
    """Attempts as process trees on this host (execute/local.py)."""

    kind: str = ExecutorKind.LOCAL.value
    on_this_host: bool = True
    keys: tuple[str, ...] = ()
    options: tuple[ExecutorOption, ...] = ()

    def check(self, spec: Spec, layers: ExecutorSpec, folder: Path) -> Settled:
        return Settled()

    def notes(
        self, spec: Spec, layers: ExecutorSpec, given: ExecutorSpec, parallel: int | None, gpus: bool
    ) -> list[str]:
        return []  # the slots say theirs

    def slots(
        self, spec: Spec, given: SlotPlan | None, gpus: GpuRequest | None, parallel: int | None, attempts: int
    ) -> SlotPlan:
        from diagbench.execute.slots import resolve_slots

        return given or resolve_slots(spec, gpus, parallel)

    def build(self, run: Build) -> Executor:
        from diagbench.execute.local import LocalExecutor

        return LocalExecutor(run.spec.server, run.run_dir, run.slots)


register(LocalPlugin())
register(SlurmPlugin())
