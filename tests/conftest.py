from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import pytest
import yaml

from diagbench.execute.pipeline import RunOptions, RunResult, execute
from diagbench.launch.process import sweep_tagged
from diagbench.records.record import AttemptRecord
from diagbench.spec.gpus import parse_gpu_request
from diagbench.spec.load import load_spec

T = TypeVar("T")
FAKE = Path(__file__).parent / "fakeserver.py"
FIXTURES = Path(__file__).parent / "fixtures"
COLUMNS = 200  # wide enough that rich never wraps a line a test checks


# marker -> (the variable that enables its tests, why they are skipped without it)
OPT_IN = {
    "gpu": ("DIAGBENCH_GPU_TESTS", "needs a GPU: set DIAGBENCH_GPU_TESTS=1 on a GPU host"),
    "vllm": (
        "DIAGBENCH_VLLM_TESTS",
        "launches a real vLLM: run scripts/vllm-cpu/prepare.sh, then set DIAGBENCH_VLLM_TESTS=1 (CI: .ci/vllm.sh)",
    ),
    "torch": (
        "DIAGBENCH_TORCH_TESTS",
        "launches PyTorch ranks: set DIAGBENCH_TORCH_PYTHON to a python with torch and DIAGBENCH_TORCH_TESTS=1 "
        "(CI: .ci/torch.sh)",
    ),
}


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    import os

    for marker, (variable, reason) in OPT_IN.items():
        if os.environ.get(variable) == "1":
            continue
        for item in items:
            if item.get_closest_marker(marker) is not None:  # not `in item.keywords`: a folder named gpu is one
                item.add_marker(pytest.mark.skip(reason=reason))
    # Slurm tests run wherever a Slurm answers; where it is required (.ci/slurm.sh sets
    # DIAGBENCH_SLURM_TESTS=1) they run and fail if it does not, never skip
    slurm_tests = [item for item in items if item.get_closest_marker("slurm") is not None]
    if slurm_tests and os.environ.get("DIAGBENCH_SLURM_TESTS") != "1" and not slurm_is_up():
        skip = pytest.mark.skip(reason="no Slurm here: .ci/slurm.sh up starts one (root, Debian)")
        for item in slurm_tests:
            item.add_marker(skip)
    # Ray tests likewise, wherever a Ray job server answers at $RAY_ADDRESS (.ci/ray.sh sets
    # DIAGBENCH_RAY_TESTS=1: there they run and fail if it does not)
    ray_tests = [item for item in items if item.get_closest_marker("ray") is not None]
    if ray_tests and os.environ.get("DIAGBENCH_RAY_TESTS") != "1" and not ray_is_up():
        skip = pytest.mark.skip(reason="no Ray cluster answers at $RAY_ADDRESS: bash .ci/ray.sh up starts one")
        for item in ray_tests:
            item.add_marker(skip)


@pytest.fixture(autouse=True, scope="session")
def private_gpu_locks(tmp_path_factory: pytest.TempPathFactory):
    """GPU leases of this test session's own (every diagbench it starts inherits the folder):
    the ids tests hand out are no GPUs, and a test session of another checkout on this host
    must not wait for them."""
    from diagbench.launch.gpulease import LOCKS_VAR

    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(LOCKS_VAR, str(tmp_path_factory.mktemp("gpu-locks")))
        yield


@pytest.fixture(autouse=True, scope="session")
def fixed_terminal_width():
    """Every diagbench a test starts (and rich in this process) draws COLUMNS wide, whether
    pytest runs on a terminal or in a pytest-xdist worker (which has none: 80 columns)."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("COLUMNS", str(COLUMNS))
        yield


@pytest.fixture(autouse=True, scope="session")
def private_sweep_scope():
    """A cleanup scope of this test session's own (each pytest-xdist worker has one): every
    diagbench it starts sweeps only the leftovers of this session, never those another worker
    or another checkout's session is still checking."""
    from diagbench.launch.tags import SCOPE_VAR

    worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(SCOPE_VAR, f"pytest-{worker}-{uuid.uuid4().hex[:8]}")
        yield


def unique_id() -> str:
    """A run id no concurrent test session shares (the default, the second + the spec's name,
    can collide), so a test can find its own processes by it."""
    return "t-" + uuid.uuid4().hex[:12]


def slurm_is_up() -> bool:
    import shutil
    import subprocess

    if shutil.which("squeue") is None:
        return False
    try:
        return subprocess.run(["squeue", "-h", "--me"], capture_output=True, timeout=10).returncode == 0
    except (OSError, subprocess.SubprocessError):
        return False


def ray_is_up() -> bool:
    """A Ray job server answers at $RAY_ADDRESS (the dashboard's address), within seconds."""
    import httpx

    address = os.environ.get("RAY_ADDRESS", "").strip()
    if not address or address.startswith("ray://") or address == "auto":
        return False
    url = address if "://" in address else f"http://{address}"
    try:
        return httpx.get(f"{url.rstrip('/')}/api/version", timeout=3, trust_env=False).status_code == 200
    except httpx.HTTPError:
        return False


def fake_command(*actions: str) -> list[str]:
    return [sys.executable, str(FAKE), *actions]


def write_spec(folder: Path, server: dict[str, Any], matrix: dict[str, Any] | None = None, **top: Any) -> Path:
    data = {
        "name": top.pop("name", "t"),
        "server": {"timeout": "20s", "grace": "2s", **server},
        "matrix": matrix or {"only": {"env": "DIAGBENCH_TEST_AXIS", "values": ["x"]}},
        **top,
    }
    path = folder / "spec.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


class Runs:
    """Runs a spec in-process and checks that nothing of it is left running."""

    def __init__(self, folder: Path):
        self.folder = folder
        self.events: list[tuple[str, str, Any]] = []
        self.helpers: list[tuple[str, tuple[str, ...]]] = []  # what diagbench waited on before the first launch
        self.hook: Any = None

    def _event(self, kind: str, item: Any, payload: Any) -> None:
        if self.hook is not None:
            self.hook(kind, item.name, payload)
        self.events.append((kind, item.name, payload))

    # the pipeline's RunEvents protocol, recorded as (kind, attempt, payload)
    def on_open(self, run_dir: Any, planned: Any, done: Any = ()) -> None:
        return None

    def on_wait(self, item: Any, slot: Any, why: str) -> None:
        self._event("wait", item, why)

    def on_helpers(self, what: str, pending: Any, elapsed_s: float, limit_s: float) -> None:
        self.helpers.append((what, tuple(pending)))

    def on_start(self, item: Any, slot: Any) -> None:
        self._event("start", item, None)

    def on_phase(self, item: Any, phase: str) -> None:
        self._event("phase", item, phase)

    def on_done(self, item: Any, record: Any) -> None:
        self._event("done", item, record)

    def run(self, spec_path: Path, **kw: Any) -> RunResult:
        spec = load_spec(spec_path)
        gpus = kw.pop("gpus", None)
        options = RunOptions(
            self.folder / "runs",
            kw.pop("run_id", None),
            tuple(kw.pop("only", ())),
            kw.pop("repeat", 1),
            kw.pop("parallel", None),
            kw.pop("resume", None),
            gpus=parse_gpu_request(gpus) if gpus is not None else None,
            **kw,
        )
        result = execute(spec, options, self)
        self.last = result
        return result

    def one(self, server: dict[str, Any], run_id: str | None = None, **top: Any) -> AttemptRecord:
        result = self.run(write_spec(self.folder, server, **top), run_id=run_id)
        assert len(result.records) == 1
        record = result.records[0]
        on_disk = json.loads((result.run_dir.cells / record.attempt / "result.json").read_text())
        assert on_disk["outcome"] == record.outcome
        return record


@pytest.fixture
def runs(tmp_path: Path):
    runner = Runs(tmp_path)
    yield runner
    result = getattr(runner, "last", None)
    if result is not None:
        wait_gone(result.run_dir.path)


def diagbench_argv(*args: str) -> list[str]:
    """The command line of a diagbench process (for tests that run it in the background)."""
    return [sys.executable, "-m", "diagbench", *args]


def run_cli(
    *args: str,
    cwd: Path | str | None = None,
    env: dict[str, str] | None = None,
    input: str | None = None,
    stdin: int | None = None,
    timeout: float = 120,
    columns: int = COLUMNS,
    **popen: Any,
) -> subprocess.CompletedProcess[str]:
    """Run `python -m diagbench ARGS` as a user would, at a fixed terminal width (`columns`),
    with `env` added to this process's environment; stdout and stderr captured as text.
    `popen`: more arguments for subprocess.run (say preexec_fn)."""
    full_env = {**os.environ, "COLUMNS": str(columns), **(env or {})}
    return subprocess.run(
        diagbench_argv(*args),
        capture_output=True,
        text=True,
        cwd=cwd,
        env=full_env,
        input=input,
        stdin=stdin,
        timeout=timeout,
        **popen,
    )


@pytest.fixture(name="run_cli")
def run_cli_fixture() -> Any:
    """`run_cli(*args, cwd=..., env=..., input=..., columns=...)`: diagbench in a subprocess."""
    return run_cli


def wait_until(condition: Callable[[], T], timeout: float = 30.0, what: str | Callable[[], str] = "condition") -> T:
    """Poll `condition()` until it is truthy and return that value (tests of concurrent
    processes wait on the file system); past `timeout` seconds, fail the test loudly, naming
    `what` was awaited (a callable is asked then, so the message can say what was seen)."""
    deadline = time.monotonic() + timeout
    while not (value := condition()):
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:g}s waiting for {what() if callable(what) else what}")
        time.sleep(0.05)
    return value


def wait_gone(target: str | Path, timeout: float = 3.0) -> None:
    """Wait until no process tagged with run `target` (a run id or directory) is left; fail naming them."""
    wait_until(
        lambda: not sweep_tagged(target), timeout, lambda: f"{target}'s processes to end; left: {sweep_tagged(target)}"
    )


@pytest.fixture
def torch_python() -> Path:
    """A python with torch (CPU is enough: gloo), for tests marked `torch` (.ci/torch.sh)."""
    found = os.environ.get("DIAGBENCH_TORCH_PYTHON", "")
    if not found or not Path(found).is_file():
        pytest.fail(f"DIAGBENCH_TORCH_PYTHON={found!r} is not a python: point it at one with torch (.ci/torch.sh)")
    return Path(found)


@pytest.fixture(scope="session", autouse=True)
def _own_cache(tmp_path_factory: pytest.TempPathFactory) -> None:
    """The test session's own XDG cache (the packs' parsed cache, the env cache): a test never
    reads what another session, another branch or the user's own diagbench left in ~/.cache."""
    if "DIAGBENCH_KEEP_CACHE" not in os.environ:
        os.environ["XDG_CACHE_HOME"] = str(tmp_path_factory.mktemp("xdg-cache"))
