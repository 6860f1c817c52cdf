"""How a launch ended, read from the error that reports it (issue 35): a child killed or
crashed, as the error wording it names it whatever its type; a kill an earlier error did not
cause; a failure inside a CUDA graph's capture; a launcher that gave up. Each line as the
source cited in logs/causes.py and logs/native.py prints it."""

from __future__ import annotations

from pathlib import Path

import pytest

from diagbench.logs.classify import Classification, classify_file
from diagbench.logs.signatures import builtin_packs, load_packs

SIGS = load_packs(builtin_packs(), Path("."))
NO_SERVER = [s for s in SIGS if s.server is None]


def classify(tmp_path: Path, text: str, sigs: list | None = None) -> Classification:
    log = tmp_path / "server.log"
    log.write_text(text)
    return classify_file(log, SIGS if sigs is None else sigs)


def traceback(*frames: str) -> str:
    """A traceback through `frames`, each "path:line:function"."""
    lines = (f.split(":") for f in frames)
    return "Traceback (most recent call last):\n" + "".join(
        f'  File "{p}", line {n}, in {fn}\n    pass\n' for p, n, fn in lines
    )


@pytest.mark.parametrize(
    ("last_line", "want"),
    [
        # cpython Lib/subprocess.py CalledProcessError.__str__
        ("subprocess.CalledProcessError: Command '['python', 'w.py']' died with <Signals.SIGKILL: 9>.", "killed"),
        ("subprocess.CalledProcessError: Command '['python', 'w.py']' died with <Signals.SIGSEGV: 11>.", "segfault"),
        # torch/multiprocessing/spawn.py ProcessExitedException
        ("torch.multiprocessing.spawn.ProcessExitedException: process 1 terminated with signal SIGKILL", "killed"),
        ("torch.multiprocessing.spawn.ProcessExitedException: process 0 terminated with signal SIGSEGV", "segfault"),
    ],
)
def test_a_child_killed_or_crashed_is_named_by_the_error_that_reports_it(
    tmp_path: Path, last_line: str, want: str
) -> None:
    got = classify(tmp_path, "Loading weights\n" + traceback("/srv/launch.py:3:<module>") + last_line + "\n")
    assert (got.outcome, got.failure_class) == ("failed", want)


@pytest.mark.parametrize(
    "line",
    [
        "command terminated with exit code 137",  # kubectl exec
        "Error: exit status 137",  # Go os.ProcessState, a shell's child killed (128 + SIGKILL)
    ],
)
def test_a_launchers_report_of_a_kill_is_killed(tmp_path: Path, line: str) -> None:
    for sigs in (SIGS, NO_SERVER):
        got = classify(tmp_path, "Loading weights\n" + line + "\n", sigs)
        assert (got.outcome, got.failure_class) == ("failed", "killed")


def test_an_import_that_only_warned_long_before_a_kill_did_not_cause_it(tmp_path: Path) -> None:
    """vLLM warns and goes on when its compiled ops do not import (vllm/_custom_ops.py); the
    OOM killer ends the load hundreds of lines later."""
    warned = (
        "WARNING 01-01 10:00:00 [_custom_ops.py:21] Failed to import from vllm._C with "
        "ImportError('libcudart.so.12: cannot open shared object file: No such file or directory')\n"
    )
    loading = "".join(f"Loading safetensors checkpoint shards: {i}% Completed\n" for i in range(200))
    got = classify(tmp_path, warned + loading + "Killed\n")
    assert (got.outcome, got.failure_class) == ("failed", "killed")
    near = classify(tmp_path, loading + warned + "Killed\n")  # just before it: the server killed its tree for it
    assert (near.failure_class, near.secondary_classes) == ("import_error", ("killed",))


def test_an_error_raised_inside_a_capture_is_a_capture_failure(tmp_path: Path) -> None:
    """vLLM's capture_model and torch.cuda.graph's __exit__ in the frames: the error has no
    finer class of its own (vllm 0.34.0 v1/worker/gpu/model_runner.py:1141, torch/cuda/graphs.py)."""
    frames = traceback(
        "/v/vllm/v1/worker/gpu/model_runner.py:1141:capture_model",
        "/t/torch/cuda/graphs.py:186:__exit__",
    )
    got = classify(tmp_path, frames + "RuntimeError: Cannot call CUDAGeneratorImpl::current_seed\n", NO_SERVER)
    assert (got.outcome, got.failure_class) == ("failed", "cuda_graph_capture")
    oom = classify(tmp_path, frames + "torch.OutOfMemoryError: CUDA out of memory.\n", NO_SERVER)
    assert oom.failure_class == "oom"  # a finer class keeps its own
    elsewhere = traceback("/srv/app.py:9:capture")  # a function of that name, not a graph's
    assert classify(tmp_path, elsewhere + "RuntimeError: x\n", NO_SERVER).failure_class == "other"


@pytest.mark.parametrize(
    "line",
    [
        "dependency failed to start: container app-vllm-1 is unhealthy",  # docker compose v2
        "Error: timed out waiting for llama runner to start - progress 0.00 - ",  # ollama llm/server.go
        "Server failed to start within the timeout period. Check server logs for errors.",  # sglang test_utils.py
    ],
)
def test_a_launcher_that_gave_up_is_a_failure(tmp_path: Path, line: str) -> None:
    start = "vllm-1  | INFO 01-01 10:00:05 [default_loader.py:280] Loading weights took 3.21 seconds\n"
    for sigs in (SIGS, NO_SERVER):
        got = classify(tmp_path, start + line + "\n", sigs)
        assert (got.outcome, got.failure_class, got.line_no) == ("failed", "other", 2)


def test_a_give_up_after_the_ready_line_leaves_it_ready(tmp_path: Path) -> None:
    up = "INFO:     Started server process [1]\nINFO:     Application startup complete.\n"
    got = classify(tmp_path, up + "dependency failed to start: container app-proxy-1 is unhealthy\n")
    assert got.outcome == "ready"
