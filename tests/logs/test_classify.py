"""`classify` on fixtures written from the reference's real strings (see fixtures/expected.yaml)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from conftest import run_cli
from diagbench.logs.classify import classify_file
from diagbench.logs.signatures import builtin_packs, load_packs

FIXTURES = Path(__file__).parents[1] / "fixtures"
EXPECTED = yaml.safe_load((FIXTURES / "expected.yaml").read_text())
SIGS = load_packs(builtin_packs(), Path("."))


@pytest.mark.parametrize("name", sorted(EXPECTED))
@pytest.mark.parametrize("engine", ["auto", "re"])
def test_fixture(name: str, engine: str) -> None:
    want = EXPECTED[name]
    got = classify_file(FIXTURES / name, SIGS, engine).to_json()
    assert {k: got[k] for k in ("outcome", "failure_class", "secondary_classes", "line_no", "phase")} == {
        k: want[k] for k in ("outcome", "failure_class", "secondary_classes", "line_no", "phase")
    }


def test_every_fixture_is_listed() -> None:
    assert sorted(p.name for p in FIXTURES.glob("*.log")) == sorted(EXPECTED)


def test_no_failed_launch_is_called_ready() -> None:
    for name, want in EXPECTED.items():
        if want["outcome"] != "ready":
            assert classify_file(FIXTURES / name, SIGS).outcome != "ready", name


def test_cli_json_has_exactly_the_contract_keys() -> None:
    proc = run_cli("classify", "--json", str(FIXTURES / "sglang_capture_oom.log"))
    assert proc.returncode == 1  # failed (0 ready, 3 unknown)
    data = json.loads(proc.stdout)
    assert set(data) == {
        "outcome",
        "failure_class",
        "secondary_classes",
        "signature",
        "line_no",
        "line",
        "phase",
        "server",
        "cause",
        "chain",
        "ready_line",
        "first_failed_rank",
    }
    assert data["line"].startswith("Exception: Capture cuda graph failed: CUDA error: out of memory")
    assert data["signature"] == "sglang.capture_failed"


def test_cli_human_output_shows_context() -> None:
    proc = run_cli("classify", str(FIXTURES / "vllm_capture_raw.log"))
    assert proc.returncode == 1  # failed (0 ready, 3 unknown)
    assert "outcome: failed:cuda_graph_capture" in proc.stdout
    assert ">      11 | (EngineCore_0 pid=2817) ERROR" in proc.stdout
    assert "phase reached: capture" in proc.stdout


def test_cli_missing_log_is_a_usage_error(tmp_path: Path) -> None:
    proc = run_cli("classify", str(tmp_path / "nope.log"))
    assert proc.returncode == 2
    assert proc.stderr.startswith("diagbench: ") and "cannot read the log" in proc.stderr


def test_user_pack_from_a_file(tmp_path: Path) -> None:
    pack = tmp_path / "mine.yaml"
    pack.write_text(
        "pack: mine\nsignatures:\n  - {id: mine.boom, kind: failure, class: other, priority: 99, "
        "pattern: 'Warming up model'}\n"
    )
    sigs = load_packs(["tgi", str(pack)], tmp_path)
    got = classify_file(FIXTURES / "tgi_port.log", sigs)
    assert (got.signature, got.line_no) == ("mine.boom", 1)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_run_decides_a_replayed_log_as_classify_does(runs, name: str) -> None:
    """One engine: a server that writes the fixture live gets the same decision."""
    from conftest import fake_command

    want = EXPECTED[name]
    decided_by = classify_file(FIXTURES / name, SIGS).signature
    weak = decided_by == "generic.uncaught_exception"
    # an uncaught exception ends the process: live, the weak line names the crash
    then = "exit=1" if weak else "hang"
    # a weak ready line decides nothing live (only a finished log confirms it): a hang there
    up_weakly = want["outcome"] == "ready" and any(s.id == decided_by and s.weak for s in SIGS)
    # a hang can only end in the timeout, so keep it short there; elsewhere the timeout only
    # bounds a loaded machine's start-up (the decision comes from the log, long before it)
    timeout = "2s" if want["outcome"] == "unknown" or up_weakly else "30s"
    r = runs.one({"command": fake_command(f"replay={FIXTURES / name}", then), "timeout": timeout})
    if want["outcome"] == "unknown" or up_weakly:
        assert r.outcome == "timeout"
        return
    if weak:
        assert (r.outcome, r.exit_code, r.evidence.line_no) == ("crashed", 1, want["line_no"])
        return
    came_up = classify_file(FIXTURES / name, SIGS).ready
    if want["phase"] == "serving" and came_up is not None:
        # offline the last state wins; live the ready line decides, and what fails after it is
        # a request's to catch (ready.request)
        assert (r.outcome, r.evidence.line_no) == ("ready", came_up.line_no)
        return
    assert (r.outcome, r.failure_class, r.evidence.line_no) == (
        want["outcome"],
        want["failure_class"],
        want["line_no"],
    )
    assert r.secondary_classes == want["secondary_classes"]


def test_cli_server_option_states_the_server(tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    log.write_text("INFO:     Started server process [1]\nINFO:     Application startup complete.\nsome request\n")
    argv = ["classify", "--json", str(log)]
    bare = json.loads(run_cli(*argv).stdout)
    assert (bare["outcome"], bare["server"]) == ("ready", None)  # weak: the log ends after uvicorn's line
    given = json.loads(run_cli(*argv, "--server", "vLLM").stdout)
    assert (given["outcome"], given["signature"], given["server"]) == ("ready", "vllm.uvicorn_ready", "vllm")
    wrong = run_cli(*argv, "--server", "vlm")
    assert wrong.returncode == 2
    assert wrong.stderr.startswith("diagbench: unknown server 'vlm': did you mean 'vllm'? (expected one of: vllm, ")


def test_spec_server_kind_names_a_known_server(tmp_path: Path) -> None:
    from diagbench.errors import SpecError
    from diagbench.spec.load import load_spec

    spec = tmp_path / "spec.yaml"
    spec.write_text("name: x\nserver:\n  command: foo\n  kind: vlm\nmatrix:\n  a: {env: A, values: [1]}\n")
    with pytest.raises(SpecError) as caught:
        load_spec(spec)
    assert str(caught.value) == f"{spec}:4: server.kind: unknown server \"vlm\" (did you mean 'vllm'?)"
    spec.write_text(
        "name: x\nserver:\n  command: foo\n  kind: tgi\n  signatures: [sglang]\nmatrix:\n  a: {env: A, values: [1]}\n"
    )
    with pytest.raises(SpecError, match="none of the chosen signature packs has a ready line of tgi"):
        load_spec(spec)
    spec.write_text("name: x\nserver:\n  command: foo\n  kind: Llama.cpp\nmatrix:\n  a: {env: A, values: [1]}\n")
    assert load_spec(spec).server.kind == "llamacpp"


def test_run_with_server_kind_takes_its_own_ready_line(runs) -> None:
    """A server that only prints uvicorn's line: ready when the spec says it is vLLM, else a timeout."""
    from conftest import fake_command

    command = fake_command(
        "out=INFO:     Started server process [7]", "out=INFO:     Application startup complete.", "hang"
    )
    known = runs.one({"command": command, "kind": "vllm", "timeout": "10s"})
    assert (known.outcome, known.signature, known.evidence.line_no) == ("ready", "vllm.uvicorn_ready", 2)
    unknown = runs.one({"command": command, "timeout": "1s"}, name="no-kind")
    assert unknown.outcome == "timeout"


def test_a_vllm_worker_error_keeps_its_cause_behind_the_worker_prefix() -> None:
    """Until it sets its title a worker prints as `(VllmWorker-0 pid=N)`: the ValueError behind
    that prefix is the evidence, even with no signature of its own (here: its own removed)."""
    without = [s for s in SIGS if s.id != "vllm.cpu_startup_host_oom"]
    got = classify_file(FIXTURES / "vllm_cpu_startup_memory.log", without)
    assert (got.outcome, got.failure_class, got.signature, got.line_no) == (
        "failed",
        "other",
        "generic.uncaught_exception",
        49,
    )
    assert got.line is not None and got.line.startswith("(VllmWorker-0 pid=23554) ERROR ")


# Each line is a server's own wording (the signature's `source` cites the line it comes from).
MEMORY_LINES = {
    # vllm v1/worker/cpu_worker.py:83 (0.32.0)
    "(Worker pid=300) ERROR 12-02 10:00:08 [multiproc_executor.py:953] ValueError: Available memory on node 0 "
    "(8.06/23.47 GiB) on startup is less than desired CPU memory utilization (0.9, 21.12 GiB). On the CPU backend, "
    "the `--gpu-memory-utilization` flag controls the fraction of CPU memory reserved (despite its name).": (
        "vllm.cpu_startup_host_oom"
    ),
    # vllm worker/cpu_worker.py:283 (0.6.3)
    "ValueError: The model's max seq len (4096) is larger than the maximum number of tokens that can be stored in "
    "KV cache (2048). Try increasing `VLLM_CPU_KVCACHE_SPACE` or decreasing `max_model_len` when initializing the "
    "engine.": "vllm.cpu_kv_space_host_oom",
    # llama.cpp ggml-backend.cpp:1940, llama-kv-cache.cpp:109, ggml-metal.m:4400 (c392e5094)
    "ggml_backend_cpu_buffer_type_alloc_buffer: failed to allocate buffer of size 34359738400": (
        "llamacpp.host_buffer_oom"
    ),
    "llama_kv_cache_init: failed to allocate buffer for kv cache": "llamacpp.buffer_oom",
    "ggml_backend_metal_buffer_type_alloc_buffer: error: failed to allocate buffer, size =  1024.00 MiB": (
        "llamacpp.buffer_oom"
    ),
}


# a check that one request of max_model_len fits the KV cache: a length too long, not memory that ran out
CAPACITY_LINES = {
    # vllm worker/worker.py:492 raise_if_cache_size_invalid (0.6.3)
    "[rank0]: ValueError: The model's max seq len (32768) is larger than the maximum number of tokens that can be "
    "stored in KV cache (1600). Try increasing `gpu_memory_utilization` or decreasing `max_model_len` when "
    "initializing the engine.": "vllm.kv_cache_too_short",
    # vllm v1/core/kv_cache_utils.py _check_enough_kv_cache_memory
    "(EngineCore_DP0 pid=1) ValueError: To serve at least one request with the models's max seq len (131072), "
    "(16.00 GiB KV cache is needed, which is larger than the available KV cache memory (9.47 GiB). Based on the "
    "available memory, the estimated maximum model length is 77584. Try increasing `gpu_memory_utilization` or "
    "decreasing `max_model_len` when initializing the engine.": "vllm.kv_cache_too_small",
}


@pytest.mark.parametrize("line", sorted(CAPACITY_LINES))
def test_a_context_longer_than_the_kv_cache_holds_is_other_not_oom(tmp_path: Path, line: str) -> None:
    log = tmp_path / "server.log"
    log.write_text(f"INFO loading\n{line}\n")
    got = classify_file(log, SIGS)
    assert (got.outcome, got.failure_class, got.signature, got.line_no) == ("failed", "other", CAPACITY_LINES[line], 2)


@pytest.mark.parametrize("line", sorted(MEMORY_LINES))
def test_memory_errors_are_oom_and_the_id_says_host_or_device(tmp_path: Path, line: str) -> None:
    log = tmp_path / "server.log"
    log.write_text(f"{line}\nsome shutdown line\n")
    got = classify_file(log, SIGS)
    assert (got.outcome, got.failure_class, got.signature, got.line_no) == ("failed", "oom", MEMORY_LINES[line], 1)


VLLM_UP = (
    "(APIServer pid=1) INFO 12-02 10:00:00 [api_server.py:1000] vLLM API server version 0.11.0\n"
    "(APIServer pid=1) INFO:     Started server process [1]\n"
    "(APIServer pid=1) INFO:     Waiting for application startup.\n"
    "(APIServer pid=1) INFO:     Application startup complete.\n"
)
REQUEST = '(APIServer pid=1) INFO:     127.0.0.1:5000 - "POST /v1/completions HTTP/1.1" 200 OK\n'
LATER = {
    # the engine died on a later request (vLLM's own "fatal error" line): the last state wins,
    # it came up and then died, failed with the root's class (a request's handled error: ready)
    "runtime-oom": (
        VLLM_UP,
        "(EngineCore_DP0 pid=2) ERROR 12-02 10:05:00 [core.py:800] EngineCore encountered a fatal error.\n"
        "(EngineCore_DP0 pid=2) ERROR 12-02 10:05:00 [core.py:800] torch.OutOfMemoryError: CUDA out of memory.\n",
        ("failed", "oom", "pytorch.cuda_oom"),
    ),
    "request-error": (
        VLLM_UP,
        "(APIServer pid=1) ERROR:    Exception in ASGI application\n"
        "(APIServer pid=1) Traceback (most recent call last):\n"
        '(APIServer pid=1)   File "/vllm/entrypoints/openai/api_server.py", line 1, in create_completion\n'
        "(APIServer pid=1) ValueError: This model's maximum context length is 4096 tokens.\n",
        ("ready", None, "vllm.uvicorn_ready"),
    ),
    # uvicorn binds after `Application startup complete.` when it is not handed a bound socket
    # (uvicorn server.py startup; vLLM before 0.6; corpus 024)
    "bind-error": (
        VLLM_UP,
        "ERROR:    [Errno 98] error while attempting to bind on address ('0.0.0.0', 8000): address already in use\n",
        ("failed", "port_in_use", "generic.port_in_use"),
    ),
    # SGLang warms up after uvicorn's lines, which for a server not known are weak (sglang#2468)
    "warm-up": (
        "INFO:     Application startup complete.\nINFO:     Uvicorn running on http://0.0.0.0:30000\n",
        "[2025-01-01 10:00:00] Initialization failed. warmup error: Traceback (most recent call last):\n",
        ("failed", "other", "sglang.warmup_failed"),
    ),
}


@pytest.mark.parametrize("case", sorted(LATER))
@pytest.mark.parametrize("pad_mb", [0, 10])
def test_a_failure_after_the_ready_line_counts_the_same_however_far_after(
    tmp_path: Path, case: str, pad_mb: int
) -> None:
    """Classified in one read or with 10 MB of request lines between them (past the 8 MB
    block): only a bind error or an unconfirmed ready line's failure overrules it."""
    head, tail, want = LATER[case]
    log = tmp_path / "server.log"
    with log.open("w") as out:
        out.write(head + REQUEST * (pad_mb * (1 << 20) // len(REQUEST)) + tail)
    got = classify_file(log, SIGS, server="vllm" if case == "bind-error" else None)
    assert (got.outcome, got.failure_class, got.signature) == want


def test_a_vllm_log_that_ends_at_its_route_listing_is_ready_offline(tmp_path: Path) -> None:
    """vLLM lists its routes once its engine is built (launcher.py serve_http): a finished
    log that ends there, nothing fatal after, reached its serving phase, so offline it is
    ready with `phase: serving` (a live run still waits for uvicorn's own line)."""
    log = tmp_path / "server.log"
    log.write_text(
        "INFO 05-10 10:00:00 api_server.py:212] vLLM API server version 0.4.2\n"
        "INFO 05-10 10:00:41 launcher.py:28] Available routes are:\n"
        "INFO 05-10 10:00:41 launcher.py:33] Route: /v1/completions, Methods: POST\n"
    )
    for server in (None, "vllm"):
        got = classify_file(log, SIGS, server=server)
        assert (got.outcome, got.server, got.phase, got.line_no) == ("ready", "vllm", "serving", 2)


def test_choosing_the_vllm_pack_is_not_naming_the_server(tmp_path: Path) -> None:
    """A bare uvicorn line counts once the server is vLLM (`--server vllm`, `kind: vllm`), not
    because only vLLM's pack was chosen (the README says so)."""
    log = tmp_path / "server.log"
    log.write_text("INFO:     Started server process [1]\nINFO:     Application startup complete.\n")
    vllm_only = load_packs(["vllm"], tmp_path)
    assert classify_file(log, vllm_only).outcome == "unknown"
    assert classify_file(log, vllm_only, server="vllm").signature == "vllm.uvicorn_ready"


@pytest.mark.parametrize(
    ("text", "code"),
    [
        ("INFO:     Application startup complete.\nThe server is fired up and ready to roll!\n", 0),
        ("loading\ntorch.OutOfMemoryError: CUDA out of memory.\n", 1),
        ("hello\nworld\n", 3),
    ],
)
def test_classify_exits_0_ready_1_failed_3_unknown(tmp_path: Path, text: str, code: int) -> None:
    log = tmp_path / "x.log"
    log.write_text(text)
    for extra in ([], ["--json"]):
        proc = run_cli("classify", str(log), *extra)
        assert proc.returncode == code, (extra, proc.stdout, proc.stderr)


def test_llama_cpps_own_line_prefix_still_names_the_server() -> None:
    """`--log-timestamps --log-prefix` put `0.00.184.752 I ` before every line: the markers
    anchored at a line's start see through it."""
    got = classify_file(FIXTURES / "llamacpp_ready_log_prefix.log", SIGS)
    assert (got.outcome, got.server, got.signature) == ("ready", "llamacpp", "llamacpp.ready")
