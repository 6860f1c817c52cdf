"""The order of a log's states: a listening line before the model load is not readiness,
and a worker's death after the ready line ends the server (issue 35), each from the
servers' own source (tests/fixtures/expected.yaml cites it), and the attacks on both."""

from __future__ import annotations

from pathlib import Path

from diagbench.logs.classify import Classification, classify_file
from diagbench.logs.signatures import builtin_packs, load_packs

FIXTURES = Path(__file__).parents[1] / "fixtures"
SIGS = load_packs(builtin_packs(), Path("."))
NO_SERVER = [s for s in SIGS if s.server is None]  # what a server no pack knows gets
LOADING = (FIXTURES / "llamacpp_2024_listening_then_loading.log").read_text()
SGLANG_UP = (FIXTURES / "sglang_0523_ready.log").read_text()


def classify(tmp_path: Path, text: str) -> Classification:
    log = tmp_path / "server.log"
    log.write_text(text)
    return classify_file(log, SIGS)


def test_a_listening_line_before_the_load_is_not_ready_with_or_without_the_servers_pack() -> None:
    for sigs in (SIGS, NO_SERVER):
        got = classify_file(FIXTURES / "llamacpp_2024_listening_then_loading.log", sigs)
        assert (got.outcome, got.phase) == ("unknown", "load")
        assert got.bound_early is not None and "llama server listening at" in got.bound_early.text


def test_the_load_finished_makes_it_ready() -> None:
    got = classify_file(FIXTURES / "llamacpp_2024_listening_then_loaded.log", SIGS)
    assert (got.outcome, got.signature, got.line_no) == ("ready", "llamacpp.model_loaded", 28)
    assert got.bound_early is not None  # the listening line still counted as one before the load


def test_a_model_loaded_line_before_a_load_is_no_readiness_either(tmp_path: Path) -> None:
    """A hostile server: a listening line, a "model loaded" line, and then the load itself."""
    head, _, rest = LOADING.partition("llama_model_loader: loaded meta data")
    fake = head + '{"level":"INFO","function":"main","line":1,"message":"model loaded"}\n'
    got = classify(tmp_path, fake + "llama_model_loader: loaded meta data" + rest)
    assert (got.outcome, got.phase) == ("unknown", "load")


def test_a_server_that_loads_first_is_ready_at_its_listening_line(tmp_path: Path) -> None:
    """Order matters both ways: the llama.cpp server of late 2023 and spring 2024 loaded,
    then listened (server.cpp as vendored by llama-cpp-python 0.2.27 and 0.2.55)."""
    loader = LOADING.split("\n", 6)[6]  # the loader's lines, without the listening ones
    listening = '{"timestamp":1,"level":"INFO","function":"main","line":3476,"message":"HTTP server listening"}\n'
    got = classify(tmp_path, loader + "llama server listening at http://127.0.0.1:8080\n" + listening)
    assert (got.outcome, got.bound_early) == ("ready", None)


def test_a_workers_death_after_the_ready_line_fails_in_any_server() -> None:
    """SGLang's TP worker thread logs its exception and SIGQUITs the server; the traceback is
    cut. With SGLang's pack (its ready line) and without (uvicorn's, weak) alike."""
    for sigs in (SIGS, NO_SERVER):
        got = classify_file(FIXTURES / "sglang_worker_exception_after_ready.log", sigs)
        assert (got.outcome, got.failure_class, got.phase) == ("failed", "other", "serving")
        assert got.ready is not None and got.cause is not None


def test_vllms_worker_death_after_the_ready_line_fails(tmp_path: Path) -> None:
    """vLLM's logger.exception("WorkerProc hit an exception."): the traceback on the next lines
    (v1/executor/multiproc_executor.py:1223, vllm 0.34.0)."""
    text = (FIXTURES / "vllm_ready.log").read_text() + (
        "(VllmWorker TP0 pid=42) ERROR 01-01 10:00:00 [multiproc_executor.py:1223] WorkerProc hit an exception.\n"
        "(VllmWorker TP0 pid=42) ERROR 01-01 10:00:00 [multiproc_executor.py:1223] Traceback (most recent call last):\n"
        '(VllmWorker TP0 pid=42) ERROR 01-01 10:00:00 [multiproc_executor.py:1223]   File "/v/worker.py", line 9, in f\n'
        "(VllmWorker TP0 pid=42) ERROR 01-01 10:00:00 [multiproc_executor.py:1223] AssertionError: bad shape\n"
    )
    got = classify(tmp_path, text)
    assert (got.outcome, got.phase) == ("failed", "serving")
    assert got.cause is not None and got.cause.type == "AssertionError"


def test_a_workers_exception_the_server_lived_on_from_leaves_it_ready(tmp_path: Path) -> None:
    """A hostile log (a test that provokes a worker's exception): the server answers a request
    after it, so it did not end the server."""
    text = SGLANG_UP + (
        "[2026-01-01 10:01:02 TP0] Scheduler hit an exception: Traceback (most recent call last):\n"
        '  File "/s/scheduler.py", line 6368, in run_scheduler_process\n'
        "RuntimeError: injected by the test\n"
        '[2026-01-01 10:01:02] INFO:     127.0.0.1:51310 - "POST /generate HTTP/1.1" 200 OK\n'
    )
    got = classify(tmp_path, text)
    assert (got.outcome, got.line_no) == ("ready", 17)
    without_answer = classify(tmp_path, text.rsplit("[2026", 1)[0])
    assert (without_answer.outcome, without_answer.phase) == ("failed", "serving")
    health = classify(tmp_path, text.replace('"POST /generate', '"GET /health'))  # the HTTP layer alone
    assert (health.outcome, health.phase) == ("failed", "serving")


def test_a_traceback_quoted_in_a_json_record_after_the_ready_line_leaves_it_ready(tmp_path: Path) -> None:
    """A JSON log record carries a request's traceback in one string (its line ends escaped):
    no traceback starts there, and a record at INFO is no error."""
    record = (
        '{"level":"INFO","msg":"request failed","exc":"Scheduler hit an exception: '
        'Traceback (most recent call last):\\n  File \\"a.py\\", line 1\\nValueError: bad"}\n'
    )
    got = classify(tmp_path, SGLANG_UP + record)
    assert (got.outcome, got.line_no) == ("ready", 17)
    error = classify(tmp_path, SGLANG_UP + record.replace('"INFO"', '"ERROR"'))
    assert error.outcome == "ready"  # an error record after the ready line is the server's life
