"""The watch state machine, fed by hand: no processes, no clock."""

from __future__ import annotations

from pathlib import Path

from diagbench.logs.scan import Scanner
from diagbench.logs.signatures import builtin_packs, load_packs
from diagbench.logs.watch import ReadyRule, Watch
from diagbench.vocab import Outcome

SCANNER = Scanner(load_packs(builtin_packs(), Path(".")))


def feed(watch: Watch, text: str, now: float = 0.0, first: int = 1):
    buf = text.encode()
    scanned = SCANNER.scan_block(buf, first)  # as the readers do: markers included
    return watch.feed(scanned.hits, first - 1 + scanned.lines, now)


def test_ready_line():
    w = Watch(ReadyRule(), deadline=10)
    d = feed(w, "Load weight begin.\nThe server is fired up and ready to roll!\n")
    assert d.outcome is Outcome.READY and d.evidence.line_no == 2
    assert w.phase == "load"


def test_failure_waits_for_a_wrapper_within_the_window():
    w = Watch(ReadyRule(), deadline=10, settle_s=0.2)
    assert feed(w, "RuntimeError: CUDA error: out of memory\n", now=1.0) is None
    assert w.tick(1.1) is None
    d = feed(w, "Exception: Capture cuda graph failed: CUDA error: out of memory\n", now=1.15, first=2)
    assert (d.failure_class, d.secondary_classes, d.evidence.line_no) == ("cuda_graph_capture", ("oom",), 2)


def test_failure_decided_when_the_window_closes():
    w = Watch(ReadyRule(), deadline=10, settle_s=0.2)
    feed(w, "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2 GiB\n", now=1.0)
    assert w.wakeup() == 1.2
    d = w.tick(1.2)
    assert (d.outcome, d.failure_class) == (Outcome.FAILED, "oom")


def test_window_closes_after_enough_lines():
    w = Watch(ReadyRule(), deadline=None, settle_lines=5)
    feed(w, "NCCL error: unhandled system error\n")
    d = feed(w, "x\n" * 5, first=2)
    assert d is not None and d.failure_class == "nccl"


def test_settling_line_decides_at_once():
    w = Watch(ReadyRule(), deadline=10)
    d = feed(
        w,
        "Scheduler hit an exception: Traceback\nReceived sigquit from a child process. It usually means the child failed.\n",
    )
    assert d is not None and d.at == 0.0  # no settle wait: SIGQUIT is the story's last line
    assert d.signature == "sglang.scheduler_exception"  # of two 'other' lines, the higher priority


def test_root_cause_outranks_sigquit_and_killed():
    w = Watch(ReadyRule(), deadline=10)
    d = feed(
        w,
        "Scheduler hit an exception: Traceback (most recent call last):\n"
        "RuntimeError: Not enough memory. Please try to increase --mem-fraction-static.\n"
        "Received sigquit from a child process. It usually means the child failed.\n"
        "Killed\n",
    )
    assert (d.failure_class, d.evidence.line_no) == ("oom", 2)


def test_bare_killed_is_killed():
    w = Watch(ReadyRule(), deadline=10)
    feed(w, "Load weight begin.\nKilled\n")
    d = w.exited(-9, 1.0)
    assert (d.outcome, d.failure_class) == (Outcome.FAILED, "killed")


def test_exit_before_ready_is_a_crash_with_code_or_signal():
    assert Watch(ReadyRule(), 10).exited(3, 1.0).exit_code == 3
    d = Watch(ReadyRule(), 10).exited(-11, 1.0)
    assert (d.outcome, d.signal, d.exit_code) == (Outcome.CRASHED, 11, None)
    assert "SIGSEGV" in d.reason


def test_deadline_gives_timeout_with_phase():
    w = Watch(ReadyRule(), deadline=5, timeout_s=5)
    feed(w, "Capture cuda graph begin. avail mem=1 GB\n\rCapturing batches (bs=16 avail_mem=1 GB): 10%|\n")
    assert w.tick(4.9) is None
    d = w.tick(5.0)
    assert d.outcome is Outcome.TIMEOUT
    assert d.reason == "not ready within 5s; last phase: capture bs=16"


def test_http_and_log_both_needed():
    w = Watch(ReadyRule(log=True, http=True, http_path="/health"), deadline=10)
    assert feed(w, "The server is fired up and ready to roll!\n") is None
    d = w.http_ready(1.0)
    assert d.outcome is Outcome.READY and d.reason == "ready line and GET /health -> 200"


def test_vllm_uvicorn_ready_needs_the_log_to_be_vllms():
    w = Watch(ReadyRule(), deadline=10)
    assert feed(w, "INFO:     Application startup complete.\n") is None
    w = Watch(ReadyRule(), deadline=10)
    d = feed(w, "INFO 05-01 [launcher.py:19] Available routes are:\nINFO:     Application startup complete.\n")
    assert d.signature == "vllm.uvicorn_ready" and w.detector.server == "vllm"


def test_the_server_given_makes_its_own_ready_lines_decide():
    w = Watch(ReadyRule(), deadline=10, server="vllm")
    d = feed(w, "INFO:     Started server process [1]\nINFO:     Application startup complete.\n")
    assert (d.outcome, d.evidence.line_no, d.signature) == (Outcome.READY, 2, "vllm.uvicorn_ready")
    other = Watch(ReadyRule(), deadline=10, server="vllm")  # another server's ready line is not vLLM's
    assert feed(other, "The server is fired up and ready to roll!\n") is None


def test_triton_ready_lines_count_for_its_tensorrt_llm_backend():
    w = Watch(ReadyRule(), deadline=10, server="trtllm")
    d = feed(w, 'I0327 13:12:22.342523 146 http_server.cc:4725] "Started HTTPService at 0.0.0.0:8000"\n')
    assert d.signature == "tritonserver.ready"


def test_detection_follows_the_weightiest_markers():
    w = Watch(ReadyRule(), deadline=None)
    feed(w, "llama_model_loader: loaded meta data with 25 key-value pairs\n")
    assert w.detector.server == "llamacpp"
    feed(
        w,
        'time=2024-04-25T18:30:30.049+02:00 level=ERROR source=routes.go:120 msg="error loading llama server"\n',
        first=2,
    )
    assert w.detector.server == "ollama"  # Ollama runs llama.cpp's loader: its own lines weigh more


def test_a_detected_server_never_turns_a_failure_into_ready():
    w = Watch(ReadyRule(), deadline=10)
    feed(
        w,
        "(APIServer pid=1) INFO 05-01 10:00:00 [api_server.py:1] vLLM API server version 0.9\n"
        "(EngineCore_0 pid=2) ERROR 05-01 10:00:01 [core.py:1] torch.OutOfMemoryError: CUDA out of memory.\n"
        "(APIServer pid=1) INFO:     Application startup complete.\n",
    )
    d = w.tick(1.0)
    assert (d.outcome, d.failure_class, w.detector.server) == (Outcome.FAILED, "oom", "vllm")


def test_uvicorn_alone_is_ready_only_for_a_log_that_ends_there():
    live = Watch(ReadyRule(), deadline=10)
    assert feed(live, "INFO:     Uvicorn running on http://0.0.0.0:30000 (Press CTRL+C to quit)\n") is None
    assert live.exited(1, 1.0).outcome is Outcome.CRASHED  # live it decides nothing
    done = Watch(ReadyRule(), deadline=None)
    feed(done, "INFO:     Application startup complete.\nINFO:     Uvicorn running on http://0.0.0.0:30000\n")
    d = done.end_of_log(0.0)
    assert (d.outcome, d.evidence.line_no, d.reason) == (Outcome.READY, 2, "the log ends after its ready line")
    warmup = Watch(ReadyRule(), deadline=None)  # SGLang's warm-up fails after uvicorn is up
    feed(warmup, "INFO:     Uvicorn running on http://0.0.0.0:30000\nAssertionError: res=<Response [403]>\n")
    assert warmup.end_of_log(0.0).outcome is Outcome.FAILED


def test_an_echoed_raise_names_a_traceback_cut_before_its_last_line():
    w = Watch(ReadyRule(), deadline=None)
    feed(
        w,
        '  File "/vllm/v1/core/kv_cache_utils.py", line 699, in check_enough_kv_cache_memory\n'
        '    raise ValueError("No available memory for the cache blocks. "\n',
    )
    assert w.decision is None  # never decides while the log goes on
    d = w.end_of_log(0.0)
    assert (d.outcome, d.failure_class, d.signature) == (Outcome.FAILED, "oom", "vllm.kv_cache_oom")


def test_ready_after_a_failure_does_not_count():
    w = Watch(ReadyRule(), deadline=10)
    feed(w, "torch.OutOfMemoryError: CUDA out of memory.\nThe server is fired up and ready to roll!\n", now=0)
    d = w.tick(1.0)
    assert d.outcome is Outcome.FAILED


def test_cancel_is_final():
    w = Watch(ReadyRule(), deadline=10)
    w.stop(Outcome.CANCELLED, "interrupted", 1.0)
    assert feed(w, "The server is fired up and ready to roll!\n").outcome is Outcome.CANCELLED


def test_traceback_source_lines_do_not_decide():
    w = Watch(ReadyRule(), deadline=10)
    d = feed(
        w,
        '  File "server.py", line 216, in capture_or_explain\n'
        '    raise Exception(f"Capture cuda graph failed: {exc}") from exc\n'
        '(EngineCore_0 pid=1) ERROR 06-03 11:02:33 [core.py:700]     raise RuntimeError("CUDA out of memory")\n'
        "Exception: Capture cuda graph failed: CUDA error: operation not permitted when stream is capturing\n",
    )
    assert d.evidence.line_no == 4
    assert d.secondary_classes == ()


def test_weak_lines_never_decide_live_but_name_an_undecided_end():
    w = Watch(ReadyRule(), deadline=10)
    assert feed(w, "Traceback (most recent call last):\nKeyError: 'rope_scaling'\n") is None
    assert w.tick(5.0) is None  # no settle window opened
    d = w.exited(1, 6.0)
    assert (d.outcome, d.exit_code, d.signature) == (Outcome.CRASHED, 1, "generic.uncaught_exception")
    assert d.evidence.text == "KeyError: 'rope_scaling'"
    offline = Watch(ReadyRule(), deadline=None)
    feed(offline, "ValueError: bad max_model_len\nstill running\n")
    d = offline.end_of_log(0.0)
    assert (d.outcome, d.failure_class, d.evidence.line_no) == (Outcome.FAILED, "other", 1)


def test_a_handled_traceback_does_not_stop_a_healthy_server():
    w = Watch(ReadyRule(), deadline=10)
    feed(w, "WARNING: retrying\nConnectionError: peer reset\nThe server is fired up and ready to roll!\n")
    assert w.decision.outcome is Outcome.READY


def test_a_generic_failure_shows_the_traceback_line_near_it():
    w = Watch(ReadyRule(), deadline=10)
    d = feed(
        w,
        "(EngineCore_0 pid=1) ERROR 05-02 09:00:05 [core.py:700] EngineCore failed to start.\n"
        "(EngineCore_0 pid=1) ERROR 05-02 09:00:05 [core.py:700] ValueError: max_model_len 65536 > 32768\n"
        "(APIServer pid=2) RuntimeError: Engine core initialization failed. See root cause above. Failed core proc(s): {}\n",
    )
    assert (d.failure_class, d.evidence.line_no, d.signature) == ("other", 2, "generic.uncaught_exception")
    assert d.reason == "failure line (vllm.engine_core_failed); its error at line 2"


def test_a_specific_failure_keeps_its_own_line():
    w = Watch(ReadyRule(), deadline=10)
    d = feed(w, "ValueError: unrelated\nException: Capture cuda graph failed: CUDA error: out of memory\n")
    assert (d.evidence.line_no, d.signature) == (2, "sglang.capture_failed")
