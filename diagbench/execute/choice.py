"""Which executor runs the attempts: the command line over a resumed run's choice over the
spec's `executor:`, over the default (this host). The kind's plugin reads and checks its own
settings here, before anything is written; nothing here knows any kind but local."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path

from diagbench.errors import RecordError, UserError
from diagbench.execute.executors import kinds, owner_of, plugin_for
from diagbench.execute.plugin import Build, ExecutorPlugin, Settled
from diagbench.execute.scheduler import Executor
from diagbench.execute.slots import SlotPlan
from diagbench.jsonvalue import JSON, JSONObject
from diagbench.records.store import read_manifest
from diagbench.spec.executor import LOCAL, ExecutorSpec, Setting
from diagbench.spec.gpus import GpuRequest
from diagbench.spec.load import Spec

__all__ = ["Placement", "executor_notes", "place", "requested"]


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

    def to_json(self) -> dict[str, JSON]:
        """The executor and its options, for the manifest (its plugin blanks the secrets)."""
        return {"kind": self.kind, **self.plugin.recorded(self.spec), **self.settled.recorded}

    def slots(
        self, spec: Spec, given: SlotPlan | None, gpus: GpuRequest | None, parallel: int | None, attempts: int
    ) -> SlotPlan:
        return self.plugin.slots(spec, given, gpus, parallel, attempts)

    def executor(self, run: Build) -> Executor:
        return self.plugin.build(replace(run, settled=self.settled))


def requested(spec: Spec, given: ExecutorSpec, resume: Path | None) -> ExecutorSpec:
    """The executor settings asked for: the command line's over a resumed run's (or the
    spec's), each read by the kind's plugin. A key or option of another kind, or of none, and
    a value of the wrong shape are mistakes, said here naming their place."""
    base = _resumed(spec, resume, given) if resume is not None else _of_spec(spec.executor)
    kind = given.kind or base.kind or LOCAL
    if base.kind not in (None, kind):
        base = ExecutorSpec()  # the command line chose another kind: the settings for this one are not its
    plugin = _plugin(kind, given.kind_at if given.kind else base.kind_at)
    layers = given.over(base, frozenset(k.name for k in plugin.keys if k.adds))
    _check_nodes(spec, kind, plugin)
    own = {k.name: k for k in plugin.keys}
    for name, setting in layers.settings.items():
        if name not in own:
            raise _not_its_own(name, setting, kind, list(own))
        own[name].read(setting)  # its shape, checked now
    return layers


def _check_nodes(spec: Spec, kind: str, plugin: ExecutorPlugin) -> None:
    """An attempt spanning nodes needs a kind that places nodes; said before anything runs."""
    if spec.server.nodes > 1 and not plugin.spans_nodes:
        spanning = " or ".join(f"--executor {k}" for k in kinds() if plugin_for(k).spans_nodes) or "another executor"
        raise UserError(
            f"server.nodes: {spec.server.nodes}: --executor {kind} runs each attempt on one host; "
            f"an attempt that spans nodes needs {spanning}"
        )


def _plugin(kind: str, written: Setting | None) -> ExecutorPlugin:
    from diagbench.yamlsrc import suggest

    if kind not in kinds() and written is not None:
        raise written.error(f"unknown executor '{kind}'", suggest(kind, kinds()))
    return plugin_for(kind)


def _of_spec(executor: ExecutorSpec) -> ExecutorSpec:
    """The spec's settings; a mapping without `kind` is the one kind whose keys it gives."""
    if executor.kind is not None or not executor.settings:
        return executor
    owners = {owner_of(name)[0] for name in executor.settings}
    kind = owners.pop() if len(owners) == 1 and "?" not in owners else None
    return replace(executor, kind=kind) if kind is not None else executor


def _not_its_own(name: str, setting: Setting, kind: str, own: list[str]) -> UserError:
    from diagbench.yamlsrc import suggest

    owner, _ = owner_of(name)
    if setting.path.startswith("--"):
        return UserError(f"{setting.path} applies to --executor {owner} (add it, or set executor: {owner} in the spec)")
    if owner != "?":
        return setting.error(f"'{name}' applies to kind: {owner} only", f"set kind: {owner}, or remove it")
    return setting.error(f"unknown key '{name}'", suggest(name, own) if own else f"executor {kind} takes none")


def place(spec: Spec, given: ExecutorSpec, runs_dir: Path, resume: Path | None) -> Placement:
    """Settle the executor, checked by its plugin (a cluster's: its options, and that a node sees `runs_dir`)."""
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
    """The executor a run was started with, its secrets back (its plugin says how)."""
    recorded = _recorded(run)
    kind = given.kind or str(recorded.get("kind") or LOCAL)
    if kind == LOCAL:
        return ExecutorSpec(LOCAL)  # it runs here: the spec's settings for another kind are not for it
    return _plugin(kind, None).resumed(spec, recorded, given, run)


def _recorded(run: Path) -> JSONObject:
    """The executor settings a run was started with (an older run without them ran here)."""
    try:
        return read_manifest(run).settings.executor or {"kind": LOCAL}
    except (RecordError, ValueError, TypeError):
        return {"kind": LOCAL}
