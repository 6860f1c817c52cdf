"""`run --resume RUN`: the spec and the options the run was started with, from its manifest."""

from __future__ import annotations

import shlex
from dataclasses import dataclass
from pathlib import Path

from diagbench.errors import RunDirError, UserError
from diagbench.execute.executors import on_this_host
from diagbench.records.manifest import Manifest, RunSettings
from diagbench.records.store import load_run
from diagbench.spec.gpus import GpuMode, GpuRequest
from diagbench.spec.load import Spec, load_spec
from diagbench.vocab import Outcome

__all__ = ["RunFlags", "check_same_spec", "nothing_to_resume", "recorded_spec", "resumed_flags"]


def recorded_spec(run: Path, flag: str = "--resume") -> Spec:
    """The spec a run was started with, from the text its manifest keeps (and where that file was,
    so relative paths in it resolve as they did); `flag` the option that named the run (the fix
    said: `run SPEC --failed RUN` for --failed)."""
    manifest = load_run(run).manifest
    text, where = manifest.spec_text, manifest.spec_file or manifest.spec.get("path")
    again = f"diagbench run SPEC {flag} {shlex.quote(str(run))}"
    if text is None or not isinstance(where, str):
        raise RunDirError(f"{run}: its manifest keeps no spec text; give the spec again: {again}")
    spec = load_spec(Path(where), text)
    if spec.sha256 != manifest.spec_sha256:
        raise RunDirError(
            f"{run}: the manifest's copy of the spec has secret-looking values redacted, so it is not the "
            f"spec that ran; give the spec again: {again}"
        )
    return spec


def check_same_spec(run: Path, manifest: Manifest, spec: Spec) -> None:
    """A run is resumed with the spec it was started with: name that file when another is given."""
    if manifest.spec_sha256 == spec.sha256:
        return
    own = manifest.spec_file or manifest.spec.get("path") or "its own spec"
    alone = f"diagbench run --resume {shlex.quote(str(run))}"
    if str(own) == str(spec.path.resolve()):
        raise UserError(
            f"{run}: {own} changed since this run started (its sha256 differs); resume with {alone} "
            "(its manifest keeps the spec it ran), or start a new run"
        )
    raise UserError(
        f"{run}: this run was started with {own}, not {spec.path} (their sha256 differ); resume with {alone} "
        f"(its manifest keeps the spec it ran), or start a new run with {spec.path}"
    )


def nothing_to_resume(run: Path) -> str | None:
    """What to say when every planned attempt of `run` already has its final record."""
    loaded = load_run(run)
    planned = {a.attempt for a in loaded.manifest.attempts}
    final = {r.attempt for r in loaded.records if r.outcome not in (Outcome.CANCELLED, Outcome.INTERNAL_ERROR)}
    if not planned or loaded.unreadable or not planned <= final:
        return None
    return (
        f"nothing to resume: every one of the {len(planned)} attempt(s) of {run} has its record; "
        f"its tables: diagbench report {shlex.quote(str(run))}"
    )


@dataclass(frozen=True)
class RunFlags:
    """The options of `run` that shape the run, as the command line gave them (None, or False
    for a switch: not given)."""

    only: tuple[str, ...] | None = None
    repeat: int | None = None
    parallel: int | None = None
    gpus: GpuRequest | None = None
    stop_when_decided: bool = False
    fail_fast: bool = False


def resumed_flags(run: Path, given: RunFlags) -> tuple[RunFlags, str | None]:
    """The options to finish `run` with: each one not given again is the one the run was
    started with (its manifest's `options`); one given again wins. `--only` and `--repeat`
    made the run's plan, so they may only be given as they were. Also a note naming what was
    taken from the run."""
    manifest = load_run(run).manifest
    if broken := next((p for p in manifest.problems if p.part == "options"), None):
        raise RunDirError(f"{run}/manifest.json: {broken}")
    options = manifest.settings
    _check_plan(run, given, options.only, options.repeat)
    flags = RunFlags(
        only=given.only if options.only is None else options.only,
        repeat=given.repeat if options.repeat is None else options.repeat,
        parallel=given.parallel if given.parallel is not None else options.parallel,
        gpus=given.gpus if given.gpus is not None else _gpus(options),
        stop_when_decided=given.stop_when_decided or options.stop_when_decided is True,
        fail_fast=given.fail_fast or options.fail_fast is True,
    )
    taken = _taken(given, flags)
    return flags, (f"resuming with the run's own {' '.join(taken)}" if taken else None)


def _taken(given: RunFlags, flags: RunFlags) -> list[str]:
    """The options that came from the run, as the command line would give them."""
    taken = []
    if given.parallel is None and flags.parallel is not None:
        taken.append(f"--parallel {flags.parallel}")
    if given.gpus is None and flags.gpus is not None and flags.gpus.mode is GpuMode.LIST:
        taken.append(f"--gpus {flags.gpus}")
    if flags.stop_when_decided and not given.stop_when_decided:
        taken.append("--stop-when-decided")
    if flags.fail_fast and not given.fail_fast:
        taken.append("--fail-fast")
    return taken


def _check_plan(run: Path, given: RunFlags, only: tuple[str, ...] | None, repeat: int | None) -> None:
    """`--only` and `--repeat` made the run's plan, which a resumed run keeps: given again,
    they must be what they were (where the manifest says)."""
    if given.only is not None and only is not None and set(given.only) != set(only):
        _plan_fixed(run, "--only", " ".join(f"--only {o}" for o in only) or "no --only")
    if given.repeat is not None and repeat is not None and given.repeat != repeat:
        _plan_fixed(run, "--repeat", f"--repeat {repeat}")


def _plan_fixed(run: Path, option: str, was: str) -> None:
    raise UserError(
        f"{option}: {run} was planned with {was}, and a resumed run keeps its plan; "
        f"resume without {option}, or start a new run"
    )


def _gpus(options: RunSettings) -> GpuRequest | None:
    """The GPUs the run handed out, as a list (none: `--gpus none`), or None where not recorded."""
    if not on_this_host(options.executor_kind):
        return None  # a cluster run's GPUs were the cluster's to hand out, not this host's
    return options.gpu_request
