"""Probe environments: venvs built by uv from an exact requirement set, cached by that set.

A package isolation launches the server under many environments, each the good one with
some of the bad one's versions. Each is built once (`uv venv`, then `uv pip install`, a
real resolver: a set that cannot be satisfied is refused, never half-installed) in its own
folder under the cache, named by a hash of the base interpreter, the package indexes and
the sorted requirement lines, and re-used by every later probe and run. Only these folders
are ever written: the user's own environments are read (asked what they hold), never touched.

diagbench runs the Python it finds there, so the cache is a private folder (safefiles.py):
this user's, writable by nobody else, and so is every folder above it; anything else is a
`UserError` naming $DIAGBENCH_ENV_CACHE. uv runs through the program door (helpers.py).

A folder is usable once its `complete` marker exists; one without (an interrupted build) is
removed and built again. A set that did not resolve is remembered as such (`unresolved`),
but never a failure that could be the network's or the index's (a fetch that failed, a
package the index did not know): those are tried again next time. Each environment in use
is leased (a shared lock on `<key>.use`, held until this process ends or `release()`), so
`cleanup --envs` removes only those no diagbench is using.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import shutil
import stat
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from diagbench.errors import UserError
from diagbench.launch.helpers import run_helper
from diagbench.records.redact import Redactor
from diagbench.safefiles import Folder, Unsafe, private_folder

__all__ = ["BUILD_TIMEOUT_S", "CACHE_VAR", "Built", "EnvCache", "Indexes", "cache_root", "uv_binary"]

CACHE_VAR = "DIAGBENCH_ENV_CACHE"
BUILD_TIMEOUT_S = 900.0
MAX_MARKER_BYTES = 64 << 10
_COMPLETE = "diagbench-complete"
_UNRESOLVED = "diagbench-unresolved"
_REQUIREMENTS = "diagbench-requirements.txt"
_NOT_RESOLVABLE = ("No solution found", "unsatisfiable", "no version of")
# words of a failure that may pass: the network, the index, a timeout (never remembered)
_TRANSIENT = (
    "not found in the package registry",
    "Failed to fetch",
    "error sending request",
    "timed out",
    "Could not connect",
    "dns error",
    "Connection",
    "HTTP status",
    "retries",
    "no answer within",
)
# uv's index settings: replaced by the run's own, so what is listed, built and keyed is one index
_INDEX_VARS = (
    "UV_DEFAULT_INDEX",
    "UV_INDEX",
    "UV_INDEX_URL",
    "UV_EXTRA_INDEX_URL",
    "PIP_INDEX_URL",
    "PIP_EXTRA_INDEX_URL",
)


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
class Indexes:
    """The package indexes environments are built from: the default one and any extra ones."""

    default: str
    extra: tuple[str, ...] = ()

    def env(self) -> dict[str, str]:
        """uv's variables for them (in its environment: never on a command line others can read)."""
        return {"UV_INDEX_URL": self.default, **({"UV_EXTRA_INDEX_URL": " ".join(self.extra)} if self.extra else {})}


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


@dataclass
class EnvCache:
    """The folder of built environments, one per (base interpreter, indexes, requirement set)."""

    root: Path = field(default_factory=cache_root)
    base_python: Path | None = None
    indexes: Indexes | None = None
    builds: int = 0  # environments built by this object (not found cached)
    _folder: Folder | None = field(default=None, repr=False)
    _leases: dict[str, int] = field(default_factory=dict, repr=False)  # environment -> its held `.use` lock

    def key(self, requirements: Sequence[str]) -> str:
        indexes = [self.indexes.default, *self.indexes.extra] if self.indexes else []
        text = "\n".join([str(self.base_python or ""), *(f"index {url}" for url in indexes), *sorted(requirements)])
        return hashlib.sha256(text.encode()).hexdigest()[:16]

    def path(self, requirements: Sequence[str]) -> Path:
        return self.root / self.key(requirements)

    def python(self, requirements: Sequence[str]) -> Path:
        return self.path(requirements) / "bin" / "python"

    def check(self) -> Folder:
        """The cache folder, made if missing and judged fit to run programs from (UserError else)."""
        if self._folder is None:
            try:
                self._folder = private_folder(self.root)
            except OSError as exc:
                why = exc.strerror if isinstance(exc, Unsafe) else exc.strerror or str(exc)
                raise UserError(
                    f"probe-environment cache {self.root} ({CACHE_VAR} or ~/.cache): {why} "
                    f"(set {CACHE_VAR} to a folder of yours that nobody else can write)"
                ) from None
        return self._folder

    def build(self, requirements: Sequence[str]) -> Built:
        """The environment for exactly these requirements, built now unless cached; leased
        from now on (cleanup --envs leaves it alone). A cache that cannot be written (a full
        disk) is a build that did not work, in the OS's words, never remembered."""
        start = time.monotonic()
        if broken := [line for line in requirements if any(c in line for c in "\r\n\0")]:
            return Built(self.path(requirements), False, False, 0.0, f"a requirement holds a line break: {broken[0]!r}")
        try:
            return self._build(requirements, start)
        except Unsafe as exc:
            return Built(self.path(requirements), False, False, time.monotonic() - start, str(exc))
        except OSError as exc:
            why = f"{exc.filename or self.root}: {exc.strerror or exc}"
            return Built(self.path(requirements), False, False, time.monotonic() - start, why)

    def _build(self, requirements: Sequence[str], start: float) -> Built:
        folder, name = self.check(), self.key(requirements)
        self._lease(folder, name)
        with _locked(folder, f"{name}.lock", fcntl.LOCK_EX):  # two diagbench processes never build one at once
            known = _known(folder, name, self.path(requirements), start)
            if known is not None:
                return known
            folder.remove_tree(name)  # an interrupted build: start again
            self.builds += 1
            error = self._install(folder, name, requirements)
            if error is None:
                with folder.folder(name, owned=True) as made:
                    made.write(_COMPLETE, b"")
                return Built(self.path(requirements), True, False, time.monotonic() - start)
            if _resolution_failure(error):  # the set itself, not the network nor the index: remember it
                with folder.folder(name, owned=True) as made:
                    made.write(_UNRESOLVED, error.encode())
                    made.write(_COMPLETE, b"")
            return Built(self.path(requirements), False, False, time.monotonic() - start, error)

    def _install(self, folder: Folder, name: str, requirements: Sequence[str]) -> str | None:
        uv, target = uv_binary(), folder.path / name
        venv = [uv, "venv", "--quiet", str(target)]
        if self.base_python is not None:
            venv += ["--python", str(self.base_python)]
        error = self._uv(venv)
        if error is not None:
            return error
        with folder.folder(name, owned=True) as made:
            made.write(_REQUIREMENTS, "".join(f"{line}\n" for line in sorted(requirements)).encode())
        return self._uv(
            [
                uv,
                "pip",
                "install",
                "--quiet",
                "--python",
                str(target / "bin" / "python"),
                "-r",
                str(target / _REQUIREMENTS),
            ]
        )

    def _uv(self, argv: list[str]) -> str | None:
        """None when it worked, else uv's own words (its last lines)."""
        drop = ("VIRTUAL_ENV", "CONDA_PREFIX", *(_INDEX_VARS if self.indexes else ()))  # ours, not the user's
        env = {k: v for k, v in os.environ.items() if k not in drop} | (self.indexes.env() if self.indexes else {})
        ran = run_helper(argv, BUILD_TIMEOUT_S, env)
        if ran.ok:
            return None
        if ran.error or ran.timed_out:
            return f"{' '.join(argv[:3])}: {ran.failure(BUILD_TIMEOUT_S)}" + (" (pip install uv)" if ran.error else "")
        lines = [line.rstrip() for line in ran.err().splitlines() if line.strip()]
        return Redactor.of().log("\n".join(lines[-6:])) or f"exit {ran.code}"  # an index URL may carry a token

    def _lease(self, folder: Folder, name: str) -> None:
        if name not in self._leases:
            self._leases[name] = _hold(folder, f"{name}.use", fcntl.LOCK_SH)

    def release(self) -> None:
        """Let go of every environment this object leased (a process's end does it too)."""
        for fd in self._leases.values():
            os.close(fd)
        self._leases.clear()

    def entries(self) -> list[Path]:
        """Every environment folder (built, unresolvable or half-built)."""
        if not self.root.exists():
            return []
        folder = self.check()
        return [folder.path / n for n in folder.names() if (i := folder.lstat(n)) and stat.S_ISDIR(i.st_mode)]

    def remove_all(self) -> tuple[list[Path], list[Path]]:
        """Remove every environment no diagbench is using (`diagbench cleanup --envs`):
        (removed, left because in use)."""
        removed, busy = [], []
        for path in self.entries():
            folder = self.check()
            try:
                use = _hold(folder, f"{path.name}.use", fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                busy.append(path)
                continue
            try:
                folder.remove_tree(path.name)
                for lock in (f"{path.name}.lock", f"{path.name}.use"):
                    folder.unlink(lock)  # under its lock: whoever opens it next makes a new one (see _hold)
            finally:
                os.close(use)
            removed.append(path)
        return removed, busy


def _resolution_failure(error: str) -> bool:
    return any(w in error for w in _NOT_RESOLVABLE) and not any(w in error for w in _TRANSIENT)


def _known(folder: Folder, name: str, path: Path, start: float) -> Built | None:
    try:
        with folder.folder(name, owned=True) as env:
            if env.lstat(_COMPLETE) is None:
                return None
            if env.lstat(_UNRESOLVED) is None:
                return Built(path, True, True, time.monotonic() - start)
            error = env.read(_UNRESOLVED, MAX_MARKER_BYTES).decode("utf-8", errors="replace")
    except OSError:
        return None  # missing, or not a real folder of ours: built again (remove_tree takes a link itself)
    return Built(path, False, True, time.monotonic() - start, error)


def _hold(folder: Folder, name: str, how: int) -> int:
    """A lock on `name` in the folder, taken on the file that still bears that name (one
    removed by `cleanup --envs` between our open and our lock is opened again)."""
    for _ in range(5):
        fd = folder.lock_file(name)
        try:
            fcntl.flock(fd, how)
        except BaseException:
            os.close(fd)
            raise
        info = folder.lstat(name)
        if info is not None and info.st_ino == os.fstat(fd).st_ino:
            return fd
        os.close(fd)
    raise UserError(f"{folder.path / name}: removed again and again while diagbench waited for it")


@contextlib.contextmanager
def _locked(folder: Folder, name: str, how: int) -> Iterator[None]:
    fd = _hold(folder, name, how)
    try:
        yield
    finally:
        os.close(fd)
