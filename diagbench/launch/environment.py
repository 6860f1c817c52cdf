"""The server's own environment: the interpreter it runs under, that interpreter's installed
distributions (and where each came from), what torch reports of the GPU stack, and the
variables that steer servers.

diagbench's provenance is diagbench's interpreter; a server often runs under another (a
venv's `bin/python`, a console script's shebang: launch/interpreter.py finds it). That
interpreter is asked through the program door (launch/helpers.py), never a shell, with a
deadline: the distributions first, then, only where torch is installed there, torch's view
of the GPU (a second line, so a slow or broken torch import costs the torch facts, never
the distributions). The interpreters of a run's cells are asked at once, in parallel, each
once per diagbench process (by its real file and the venv it starts in), and whoever waits
is told about once a second what is still being asked.
"""

from __future__ import annotations

import contextlib
import json
import os
import shlex
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor, wait
from pathlib import Path
from typing import Any

from diagbench.launch import gpu
from diagbench.launch.command import build_command
from diagbench.launch.helpers import run_helper
from diagbench.launch.interpreter import find_interpreter
from diagbench.records.redact import redact
from diagbench.spec.load import ServerSpec
from diagbench.spec.matrix import Cell
from diagbench.spec.plan import PlannedAttempt

__all__ = [
    "ASK_TIMEOUT_S",
    "STEERING_PREFIXES",
    "Waiting",
    "ask_all",
    "ask_interpreter",
    "attempt_environments",
    "find_interpreter",
    "launch_view",
    "steering_variables",
]

ASK_TIMEOUT_S = 60.0  # importing torch and initialising CUDA can take tens of seconds on a busy host
TELL_EVERY_S = 1.0  # how often whoever waits hears what is still being asked
PARALLEL_ASKS = 8
STEERING_PREFIXES = ("CUDA_", "NCCL_", "TORCH", "VLLM_", "SGLANG_", "HF_")
# (what is asked, the interpreters still asked, seconds so far, the deadline): () when all answered
Waiting = Callable[[str, Sequence[str], float, float], None]
ASKING = "asking the server's interpreter what it has installed"

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


def steering_variables(env: Mapping[str, str]) -> dict[str, str]:
    """The variables that steer servers' launches, secret-looking values blanked."""
    chosen = {k: v for k, v in sorted(env.items()) if k.startswith(STEERING_PREFIXES)}
    return {k: v for k, v in redact(chosen).items() if v is not None}


def ask_interpreter(
    python: Path, timeout: float = ASK_TIMEOUT_S, stop: threading.Event | None = None
) -> dict[str, Any]:
    """What `python` has installed (and torch's GPU facts where torch is there); `error` when it cannot say."""
    ran = run_helper([str(python), "-I", "-c", _ASK], timeout, stop=stop)  # -I: its own packages, not our PYTHONPATH
    if ran.error:
        return {"interpreter": str(python), "error": f"cannot run it: {ran.error}"}
    if ran.timed_out and stop is not None and stop.is_set():
        return {"interpreter": str(python), "error": "interrupted before it answered"}
    return _parse(python, ran.out(), ran.err(), ran.timed_out, timeout)


def _parse(python: Path, stdout: str, stderr: str, timed_out: bool, timeout: float) -> dict[str, Any]:
    lines = [line for line in stdout.splitlines() if line.startswith("{")]
    facts: dict[str, Any] = {"interpreter": str(python)}
    try:
        facts |= json.loads(lines[0])
    except (IndexError, ValueError):
        why = f"no answer within {timeout:.0f} s" if timed_out else (stderr.strip().splitlines() or ["no output"])[-1]
        return {**facts, "error": why[:300]}
    if not isinstance(facts.get("distributions"), list):
        return {"interpreter": str(python), "error": "its answer was not a list of distributions"}
    has_torch = any(isinstance(d, dict) and d.get("name") == "torch" for d in facts["distributions"])
    if len(lines) > 1 and has_torch:
        with contextlib.suppress(ValueError):
            facts["torch"] = json.loads(lines[1])
    elif has_torch and timed_out:
        facts["torch"] = {"error": f"importing torch took over {timeout:.0f} s"}
    return facts


_asked: dict[tuple[object, ...], dict[str, Any]] = {}  # this process's answers, by interpreter identity
_asked_lock = threading.Lock()


def identity(python: Path) -> tuple[object, ...] | None:
    """What makes two paths one interpreter: the real file it runs (path and stat identity)
    and the venv it starts in (a venv's bin/python is a link to the base interpreter, yet it
    has its own packages: Python looks for pyvenv.cfg beside the path it was started by)."""
    try:
        real = os.path.realpath(python)
        info = os.stat(real)
        where = Path(os.path.abspath(python)).parent
        venv = next((c for c in (where / "pyvenv.cfg", where.parent / "pyvenv.cfg") if c.is_file()), None)
        marks = (os.path.realpath(venv), os.stat(venv).st_ino, os.stat(venv).st_mtime_ns) if venv else None
    except OSError:
        return None
    return (real, info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns, marks)


def ask_all(
    pythons: Sequence[Path],
    timeout: float = ASK_TIMEOUT_S,
    waiting: Waiting | None = None,
    stop: threading.Event | None = None,
) -> dict[Path, dict[str, Any]]:
    """Each interpreter's facts: the ones not asked before in this process asked at once, in
    parallel; `waiting` hears about once a second which are still asked (and once, with
    none, at the end, if it heard before). `stop` (Ctrl-C) ends the asking at once; so does
    an exception in this thread (what was not answered is not remembered)."""
    keys = {p: identity(p) or ("unreadable", str(p)) for p in dict.fromkeys(pythons)}
    with _asked_lock:
        todo = {key: p for p, key in keys.items() if key not in _asked}
    stop = stop or threading.Event()
    found = _ask_at_once(todo, timeout, waiting, stop) if todo else {}
    with _asked_lock:
        if not stop.is_set():  # an answer cut short by Ctrl-C is no answer to remember
            _asked.update(found)
        known = {**_asked, **found}
    return {p: {**known[key], "interpreter": str(p)} for p, key in keys.items()}


def _ask_at_once(
    todo: Mapping[tuple[object, ...], Path], timeout: float, waiting: Waiting | None, stop: threading.Event
) -> dict[tuple[object, ...], dict[str, Any]]:
    started, told = time.monotonic(), False
    pool = ThreadPoolExecutor(max_workers=min(PARALLEL_ASKS, len(todo)), thread_name_prefix="ask")
    try:
        futures = {pool.submit(ask_interpreter, python, timeout, stop): key for key, python in todo.items()}
        pending = set(futures)
        while pending:
            _done, pending = wait(pending, timeout=TELL_EVERY_S)
            if pending and waiting is not None:
                waiting(ASKING, [str(todo[futures[f]]) for f in pending], time.monotonic() - started, timeout)
                told = True
    except BaseException:
        stop.set()  # Ctrl-C in this thread: every probe ends now, not at its deadline
        raise
    finally:
        pool.shutdown(wait=True)
    if told and waiting is not None:
        waiting(ASKING, [], time.monotonic() - started, timeout)
    return {key: future.result() for future, key in futures.items()}


def attempt_environments(
    server: ServerSpec,
    planned: Sequence[PlannedAttempt],
    waiting: Waiting | None = None,
    stop: threading.Event | None = None,
) -> tuple[dict[str, Any] | None, dict[str, dict[str, Any]]]:
    """The run's environment (its first attempt's) and, per attempt name, each one that
    differs; `stop` (the run's cancel flag) cuts the asking short."""
    views = {item.name: launch_view(server, item.cell) for item in planned}
    pythons = {name: find_interpreter(*view) for name, view in views.items()}
    drivers: Future[list[dict[str, Any]] | None] | None = None
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="gpus") as pool:
        if planned:
            drivers = pool.submit(gpu.describe)  # nvidia-smi meanwhile, when NVML cannot answer
        facts = ask_all([p for p in pythons.values() if p is not None], waiting=waiting, stop=stop)
        gpus = drivers.result() if drivers is not None else None
    base: dict[str, Any] | None = None
    differing: dict[str, dict[str, Any]] = {}
    for name, (_argv, env, _cwd) in views.items():
        python = pythons[name]
        one = {"python": facts[python] if python else None, "gpus": gpus, "variables": steering_variables(env)}
        if base is None:
            base = one
        elif one != base:
            differing[name] = one
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
