"""Probe environments: venvs built by uv from an exact requirement set, cached by that set.

A package isolation launches the server under many environments, each the good one with
some of the bad one's versions. Each is built once (`uv venv`, then `uv pip install`, a
real resolver: a set that cannot be satisfied is refused, never half-installed) in its own
folder under the cache, named by a hash of the base interpreter and the sorted requirement
lines, and re-used by every later probe and run. Only these folders are ever written: the
user's own environments are read (asked what they hold), never touched.

A folder is usable once its `complete` marker exists; one without (an interrupted build) is
removed and built again. A set that did not resolve is remembered as such (`unresolved`).
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import shutil
import subprocess
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

CACHE_VAR = "DIAGBENCH_ENV_CACHE"
BUILD_TIMEOUT_S = 900.0
_COMPLETE = "diagbench-complete"
_UNRESOLVED = "diagbench-unresolved"
_REQUIREMENTS = "diagbench-requirements.txt"
_NOT_RESOLVABLE = ("No solution found", "unsatisfiable", "not found in the package registry", "no version of")


def cache_root() -> Path:
    """$DIAGBENCH_ENV_CACHE, else ~/.cache/diagbench/envs (XDG_CACHE_HOME respected)."""
    if given := os.environ.get(CACHE_VAR):
        return Path(given).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "diagbench" / "envs"


def uv_binary() -> str:
    """The uv that came with diagbench (a dependency), else one on PATH."""
    with contextlib.suppress(ImportError, FileNotFoundError):
        from uv import find_uv_bin

        return str(find_uv_bin())
    return shutil.which("uv") or "uv"


@dataclass(frozen=True)
class Built:
    """One environment: where it is, whether it resolved, and what building it cost."""

    path: Path
    ok: bool
    cached: bool  # found built (or known unresolvable) already
    seconds: float
    error: str = ""

    @property
    def python(self) -> Path:
        return self.path / "bin" / "python"

    @property
    def refusal(self) -> str:
        """The line of uv's answer that says why it does not install ('' when it did)."""
        if self.ok:
            return ""
        lines = self.error.splitlines() or ["it did not install"]
        return next((line for line in lines if "depends on" in line), lines[-1]).replace("cause: ", "").strip()


class EnvCache:
    """The folder of built environments, one per (base interpreter, requirement set)."""

    def __init__(self, root: Path | None = None, base_python: Path | None = None):
        self.root = root or cache_root()
        self.base_python = base_python
        self.builds = 0  # environments built by this object (not found cached)

    def key(self, requirements: Sequence[str]) -> str:
        text = "\n".join([str(self.base_python or ""), *sorted(requirements)])
        return hashlib.sha256(text.encode()).hexdigest()[:16]

    def path(self, requirements: Sequence[str]) -> Path:
        return self.root / self.key(requirements)

    def python(self, requirements: Sequence[str]) -> Path:
        return self.path(requirements) / "bin" / "python"

    def build(self, requirements: Sequence[str]) -> Built:
        """The environment for exactly these requirements, built now unless cached."""
        start = time.monotonic()
        folder = self.path(requirements)
        self.root.mkdir(parents=True, exist_ok=True)
        with _locked(self.root / f"{folder.name}.lock"):  # two diagbench processes never build one folder at once
            known = _known(folder, start)
            if known is not None:
                return known
            if folder.exists():
                shutil.rmtree(folder)  # an interrupted build: start again
            self.builds += 1
            error = self._install(folder, requirements)
            if error is None:
                (folder / _COMPLETE).write_text("")
                return Built(folder, True, False, time.monotonic() - start)
            if any(word in error for word in _NOT_RESOLVABLE):  # the set itself, not the network: remember it
                (folder / _UNRESOLVED).write_text(error)
                (folder / _COMPLETE).write_text("")
            return Built(folder, False, False, time.monotonic() - start, error)

    def _install(self, folder: Path, requirements: Sequence[str]) -> str | None:
        uv = uv_binary()
        venv = [uv, "venv", "--quiet", str(folder)]
        if self.base_python is not None:
            venv += ["--python", str(self.base_python)]
        error = _run(venv)
        if error is not None:
            return error
        listed = folder / _REQUIREMENTS
        listed.write_text("".join(f"{line}\n" for line in sorted(requirements)))
        return _run([uv, "pip", "install", "--quiet", "--python", str(folder / "bin" / "python"), "-r", str(listed)])

    def entries(self) -> list[Path]:
        """Every environment folder (built, unresolvable or half-built)."""
        if not self.root.is_dir():
            return []
        return sorted(p for p in self.root.iterdir() if p.is_dir())

    def remove_all(self) -> list[Path]:
        """Remove every environment (`diagbench cleanup --envs`); the ones removed."""
        removed = []
        for folder in self.entries():
            with _locked(self.root / f"{folder.name}.lock"):
                shutil.rmtree(folder, ignore_errors=True)
            (self.root / f"{folder.name}.lock").unlink(missing_ok=True)
            removed.append(folder)
        return removed


def _known(folder: Path, start: float) -> Built | None:
    if not (folder / _COMPLETE).exists():
        return None
    unresolved = folder / _UNRESOLVED
    if unresolved.exists():
        return Built(folder, False, True, time.monotonic() - start, unresolved.read_text())
    return Built(folder, True, True, time.monotonic() - start)


def _run(argv: list[str]) -> str | None:
    """None when it worked, else uv's own words (its last lines)."""
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "CONDA_PREFIX")}  # ours, not the user's
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=BUILD_TIMEOUT_S, env=env)
    except FileNotFoundError:
        return f"{argv[0]}: not found (pip install uv)"
    except subprocess.TimeoutExpired:
        return f"{' '.join(argv[:3])}: no answer within {BUILD_TIMEOUT_S:.0f} s"
    if done.returncode == 0:
        return None
    lines = [line.rstrip() for line in done.stderr.splitlines() if line.strip()]
    return "\n".join(lines[-6:]) or f"exit {done.returncode}"


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    with path.open("a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)
