"""The server's own environment: the interpreter it runs under, that interpreter's installed
distributions (and where each came from), what torch reports of the GPU stack, and the
variables that steer servers.

diagbench's provenance is diagbench's interpreter; a server often runs under another (a
venv's `bin/python`, a console script's shebang). That interpreter is asked once per run,
in a child process with a time bound (never a shell): the distributions first, then, only
where torch is installed there, torch's view of the GPU (a second line, so a slow or broken
torch import costs the torch facts, never the distributions).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shlex
import shutil
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from diagbench.launch import gpu
from diagbench.launch.command import build_command
from diagbench.records.redact import redact
from diagbench.spec.load import ServerSpec
from diagbench.spec.matrix import Cell
from diagbench.spec.plan import PlannedAttempt

ASK_TIMEOUT_S = 60.0  # importing torch and initialising CUDA can take tens of seconds on a busy host
STEERING_PREFIXES = ("CUDA_", "NCCL_", "TORCH", "VLLM_", "SGLANG_", "HF_")
_PYTHON_NAME = re.compile(r"^(python|pypy)[0-9.]*$")

# Run by the server's interpreter with -I (isolated: no user site, no PYTHON* variables).
# Only the standard library; works on 3.8+. Line 1: distributions; line 2: torch's facts.
_ASK = r"""
import json, sys
from importlib import metadata

def origin(dist):
    try:
        text = dist.read_text("direct_url.json")
    except Exception:
        text = None
    if not text:
        return {"kind": "index"}
    try:
        data = json.loads(text)
    except ValueError:
        return {"kind": "index"}
    url = data.get("url")
    if "vcs_info" in data:
        vcs = data["vcs_info"]
        return {"kind": "vcs", "url": url, "vcs": vcs.get("vcs"), "commit": vcs.get("commit_id")}
    if "dir_info" in data:
        return {"kind": "local", "url": url, "editable": bool(data["dir_info"].get("editable"))}
    return {"kind": "url", "url": url}

seen = {}
for dist in metadata.distributions():
    name = dist.metadata["Name"]
    if name and name.lower() not in seen:
        seen[name.lower()] = {"name": name, "version": dist.version, "origin": origin(dist)}
head = {"python": sys.version.split()[0], "executable": sys.executable, "prefix": sys.prefix}
print(json.dumps({**head, "distributions": sorted(seen.values(), key=lambda d: d["name"].lower())}), flush=True)
if "torch" in seen:
    facts = {}
    try:
        import torch
        facts["torch"] = torch.__version__
        facts["cuda_runtime"] = torch.version.cuda
        if torch.cuda.is_available():
            facts["gpus"] = [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())]
            try:
                facts["nccl"] = ".".join(str(p) for p in torch.cuda.nccl.version())
            except Exception as exc:
                facts["nccl_error"] = type(exc).__name__
    except Exception as exc:
        facts["error"] = f"{type(exc).__name__}: {exc}"[:300]
    print(json.dumps(facts), flush=True)
"""


def find_interpreter(argv: Sequence[str], env: Mapping[str, str], cwd: Path) -> Path | None:
    """The Python a command runs under: argv[0] itself, its shebang's, or its venv's; None if not Python."""
    if not argv:
        return None
    program = _resolve(argv[0], env, cwd)
    if program is None:
        return None
    if _PYTHON_NAME.match(program.name):
        return program
    shebang = _shebang(program)
    if shebang:
        words = shebang.split()
        if Path(words[0]).name == "env":
            words = [w for w in words[1:] if not w.startswith("-") and "=" not in w]
        if words and _PYTHON_NAME.match(Path(words[0]).name):
            return _resolve(words[0], env, cwd)
    sibling = program.parent / "python"  # a venv's bin/ console script without a readable shebang
    if (program.parent.parent / "pyvenv.cfg").is_file() and sibling.exists():
        return sibling
    return None


def _resolve(word: str, env: Mapping[str, str], cwd: Path) -> Path | None:
    if "/" in word:
        path = Path(word) if Path(word).is_absolute() else cwd / word
        return path if path.is_file() else None
    found = shutil.which(word, path=env.get("PATH", os.defpath))
    return Path(found) if found else None


def _shebang(program: Path) -> str | None:
    try:
        with program.open("rb") as handle:
            first = handle.readline(512)
    except OSError:
        return None
    if not first.startswith(b"#!"):
        return None
    return first[2:].decode("utf-8", "replace").strip() or None


def steering_variables(env: Mapping[str, str]) -> dict[str, str]:
    """The variables that steer servers' launches, secret-looking values blanked."""
    chosen = {k: v for k, v in sorted(env.items()) if k.startswith(STEERING_PREFIXES)}
    return {k: v for k, v in redact(chosen).items() if v is not None}


def ask_interpreter(python: Path, timeout: float = ASK_TIMEOUT_S) -> dict[str, Any]:
    """What `python` has installed (and torch's GPU facts where torch is there); `error` when it cannot say."""
    try:
        child = subprocess.Popen(
            [str(python), "-I", "-c", _ASK],  # -I: the interpreter's own packages, not the caller's PYTHONPATH
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,  # own group: a stuck import is killed whole at the time bound
        )
    except OSError as exc:
        return {"interpreter": str(python), "error": f"cannot run it: {exc.strerror}"}
    timed_out = False
    try:
        stdout, stderr = child.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        timed_out = True
        with contextlib.suppress(ProcessLookupError):
            os.killpg(child.pid, 9)
        stdout, stderr = child.communicate()
    return _parse(python, stdout, stderr, timed_out, timeout)


def _parse(python: Path, stdout: str, stderr: str, timed_out: bool, timeout: float) -> dict[str, Any]:
    lines = [line for line in stdout.splitlines() if line.startswith("{")]
    facts: dict[str, Any] = {"interpreter": str(python)}
    try:
        facts |= json.loads(lines[0])
    except (IndexError, ValueError):
        why = f"no answer within {timeout:.0f} s" if timed_out else (stderr.strip().splitlines() or ["no output"])[-1]
        return {**facts, "error": why[:300]}
    if len(lines) > 1:
        with contextlib.suppress(ValueError):
            facts["torch"] = json.loads(lines[1])
    elif timed_out:
        facts["torch"] = {"error": f"importing torch took over {timeout:.0f} s"}
    return facts


class EnvironmentCache:
    """Each interpreter asked once per run, however many attempts run under it."""

    def __init__(self, timeout: float = ASK_TIMEOUT_S):
        self.timeout = timeout
        self.asked: dict[Path, dict[str, Any]] = {}
        self._driver: list[dict[str, Any]] | bool | None = False  # False: not asked yet

    def of(self, argv: Sequence[str], env: Mapping[str, str], cwd: Path) -> dict[str, Any]:
        """The environment of one launch: its interpreter's facts, the GPUs' driver, the steering variables."""
        python = find_interpreter(argv, env, cwd)
        server: dict[str, Any] | None = None
        if python is not None:
            if python not in self.asked:
                self.asked[python] = ask_interpreter(python, self.timeout)
            server = self.asked[python]
        return {"python": server, "gpus": self.gpus(), "variables": steering_variables(env)}

    def gpus(self) -> list[dict[str, Any]] | None:
        if self._driver is False:
            self._driver = gpu.describe()
        return self._driver if isinstance(self._driver, list) else None


def attempt_environments(
    server: ServerSpec, planned: Sequence[PlannedAttempt], cache: EnvironmentCache | None = None
) -> tuple[dict[str, Any] | None, dict[str, dict[str, Any]]]:
    """The run's environment (its first attempt's) and, per attempt name, each one that differs."""
    cache = cache or EnvironmentCache()
    base: dict[str, Any] | None = None
    differing: dict[str, dict[str, Any]] = {}
    for item in planned:
        facts = cache.of(*launch_view(server, item.cell))
        if base is None:
            base = facts
        elif facts != base:
            differing[item.name] = facts
    return base, differing


def launch_view(server: ServerSpec, cell: Cell) -> tuple[tuple[str, ...], dict[str, str], Path]:
    """The argv, environment and folder a cell's launch will have (port left as written)."""
    argv = build_command(server, cell, "{port}")
    if server.shell:
        with contextlib.suppress(ValueError):
            argv = tuple(shlex.split(argv[0]))
    env = dict(os.environ)
    for key, value in {**server.env, **cell.env}.items():
        if value is None:
            env.pop(key, None)
        else:
            env[key] = value
    return argv, env, server.cwd
