"""`run --resume RUN`: the spec and the options the run was started with, from its manifest."""

from __future__ import annotations

import shlex
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from diagbench.errors import RunDirError, UserError
from diagbench.records.store import load_run
from diagbench.spec.gpus import GpuMode, GpuRequest, parse_gpu_request
from diagbench.spec.load import Spec, load_spec
from diagbench.vocab import Outcome


def recorded_spec(run: Path) -> Spec:
    """The spec a run was started with, from the text its manifest keeps (and where that file was,
    so relative paths in it resolve as they did)."""
    manifest = load_run(run).manifest
    text = manifest.get("spec_text")
    where = manifest.get("spec_file") or manifest.get("spec", {}).get("path")
    again = f"diagbench run SPEC --resume {shlex.quote(str(run))}"
    if not isinstance(text, str) or not isinstance(where, str):
        raise RunDirError(f"{run}: its manifest keeps no spec text; give the spec again: {again}")
    spec = load_spec(Path(where), text)
    if spec.sha256 != manifest.get("spec_sha256"):
        raise RunDirError(
            f"{run}: the manifest's copy of the spec has secret-looking values redacted, so it is not the "
            f"spec that ran; give the spec again: {again}"
        )
    return spec


def check_same_spec(run: Path, manifest: dict[str, Any], spec: Spec) -> None:
    """A run is resumed with the spec it was started with: name that file when another is given."""
    if manifest.get("spec_sha256") == spec.sha256:
        return
    own = manifest.get("spec_file") or manifest.get("spec", {}).get("path") or "its own spec"
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
    planned = {str(a.get("attempt")) for a in loaded.manifest.get("attempts", []) if isinstance(a, dict)}
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
    recorded = load_run(run).manifest.get("options")
    options = recorded if isinstance(recorded, dict) else {}
    where = f"{run}/manifest.json: options"
    only, repeat = _only(options, where), _number(options, "repeat", where)
    _check_plan(run, given, only, repeat)
    flags = RunFlags(
        only=given.only if only is None else only,
        repeat=given.repeat if repeat is None else repeat,
        parallel=given.parallel if given.parallel is not None else _number(options, "parallel", where),
        gpus=given.gpus if given.gpus is not None else _gpus(options, where),
        stop_when_decided=given.stop_when_decided or options.get("stop_when_decided") is True,
        fail_fast=given.fail_fast or options.get("fail_fast") is True,
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


def _number(options: dict[str, Any], key: str, where: str) -> int | None:
    value = options.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise RunDirError(f"{where}.{key}: expected a whole number above 0, got {value!r}; give --{key} again")
    return value


def _only(options: dict[str, Any], where: str) -> tuple[str, ...] | None:
    value = options.get("only")
    if value is None:
        return None
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise RunDirError(f"{where}.only: expected a list of AXIS=LABEL, got {value!r}")
    return tuple(value)


def _gpus(options: dict[str, Any], where: str) -> GpuRequest | None:
    """The GPUs the run handed out, as a list (none: `--gpus none`), or None where not recorded."""
    value = options.get("gpus")
    executor = options.get("executor")
    if value is None or (isinstance(executor, dict) and executor.get("kind", "local") != "local"):
        return None  # a Slurm run's GPUs were the cluster's to hand out, not this host's
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise RunDirError(f"{where}.gpus: expected a list of GPU ids, got {value!r}; give --gpus again")
    try:
        return parse_gpu_request(",".join(value)) if value else GpuRequest(GpuMode.NONE)
    except ValueError as exc:
        raise RunDirError(f"{where}.gpus: {exc}; give --gpus again") from None
