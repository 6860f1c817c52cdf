"""Executors as plugins: a registry from kind (`local`, `slurm`, `ray`) to the plugin that
owns its spec keys and command-line options, its checks, slots and notes, how to build its
`Executor`, how a run of it is resumed, and the worker its jobs run.

`run`, `plan` and `isolate` place attempts only through this registry (execute/choice.py), the
command line makes its options from it (cli/executor_options.py), and the hidden `worker`
command dispatches through it. This is the one module outside the plugins that names a kind
(besides local): a new kind is one plugin registered here, see docs/executors.md.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from diagbench.errors import UserError
from diagbench.execute.plugin import PluginBase, Settled
from diagbench.execute.ray.plugin import RayPlugin
from diagbench.execute.slurm.plugin import SlurmPlugin
from diagbench.spec.executor import LOCAL

if TYPE_CHECKING:  # the command line builds its options from this registry: it stays light to import
    from diagbench.execute.plugin import Build, ExecutorOption, ExecutorPlugin
    from diagbench.execute.scheduler import Executor
    from diagbench.execute.slots import SlotPlan
    from diagbench.records.record import AttemptRecord
    from diagbench.spec.executor import ExecutorKey, ExecutorSpec
    from diagbench.spec.gpus import GpuRequest
    from diagbench.spec.load import Spec

__all__ = [
    "LocalPlugin",
    "all_options",
    "kinds",
    "on_this_host",
    "owner_of",
    "plugin_for",
    "register",
    "run_worker",
    "unregister",
]

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
    plugin = _REGISTRY.get(kind or LOCAL)
    return plugin is not None and plugin.on_this_host


def kinds() -> tuple[str, ...]:
    return tuple(_REGISTRY)


def all_options() -> tuple[tuple[str, ExecutorOption], ...]:
    """Every kind's options, with the kind that owns each (the command line offers them all)."""
    return tuple((kind, option) for kind, plugin in _REGISTRY.items() for option in plugin.options)


def owner_of(key: str) -> tuple[str, str]:
    """The kind whose setting `key` is, and how the user gives it (its option, else the spec's key)."""
    kind = next((name for name, p in _REGISTRY.items() if key in (k.name for k in p.keys)), "?")
    flag = next((o.flag for k, o in all_options() if o.key == key), "executor options")
    return kind, flag


def run_worker(kind: str, run_dir: Path, attempt: str) -> AttemptRecord:
    """`diagbench worker`: the attempt run by the worker of the kind whose job this is."""
    return plugin_for(kind).worker(run_dir, attempt)


class LocalPlugin(PluginBase):
    """Attempts as process trees on this host (execute/local.py)."""

    kind: str = LOCAL
    on_this_host: bool = True
    keys: tuple[ExecutorKey, ...] = ()
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
register(RayPlugin())
