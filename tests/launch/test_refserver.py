"""The reference server: CPU tests where torch is installed, GPU tests on a GPU host."""

from __future__ import annotations

import sys

import pytest

torch = pytest.importorskip("torch", reason="the reference server needs torch: pip install 'diagbench[refserver]'")

SMALL = ["--hidden", "64", "--layers", "2", "--heads", "4", "--vocab", "256", "--context", "32"]


def refserver(*extra: str) -> list[str]:
    return [sys.executable, "-m", "diagbench.refserver", "--port", "{port}", *SMALL, *extra]


def test_cpu_launch_is_ready_after_a_real_warmup_request(runs):
    r = runs.one({"command": refserver("--device", "cpu"), "timeout": "120s"})
    assert r.outcome == "ready", r.reason
    log = (runs.last.run_dir.cells / r.attempt / "server.log").read_text()
    assert "refserver: warm-up request POST /generate -> 200 (4 tokens)" in log
    assert "CUDA graphs disabled (no GPU)" in log


def test_cpu_health_and_generate_over_http(runs):
    r = runs.one({"command": refserver("--device", "cpu"), "timeout": "120s", "ready": {"http": "/health"}})
    assert (r.outcome, r.signature) == ("ready", "http")


def test_generate_endpoint_runs_the_model():
    from diagbench.refserver.model import TinyDecoder
    from diagbench.refserver.server import Engine

    model = TinyDecoder(256, 64, 2, 4, 32, 4, custom_kernel=False).eval()
    engine = Engine(model, torch.device("cpu"), model, 4)
    first = engine.generate([1, 2, 3], 5)
    assert len(first) == 5 and all(0 <= t < 256 for t in first)
    assert engine.generate([1, 2, 3], 5) == first  # greedy and deterministic


@pytest.mark.gpu
@pytest.mark.parametrize(
    ("extra", "env", "outcome"),
    [
        (["--warmup", "every"], {}, ("ready", None)),
        (
            ["--warmup", "every", "--enable-torch-compile"],
            {"TORCHINDUCTOR_CUDAGRAPHS": "1"},
            ("failed", "cuda_graph_capture"),
        ),
        (["--warmup", "first"], {"REFSERVER_TRITON_KERNEL": "1"}, ("failed", "cuda_graph_capture")),
    ],
)
def test_gpu_capture(runs, extra, env, outcome):
    r = runs.one(
        {"command": refserver("--cuda-graph-max-bs", "8", *extra), "env": env, "timeout": "240s", "grace": "10s"}
    )
    assert (r.outcome, r.failure_class) == outcome, r.evidence
    if outcome[0] == "ready":
        assert r.phase == "warm-up"
