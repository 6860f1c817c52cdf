"""The watch state machine, fed by hand: no processes, no clock."""

from __future__ import annotations

from pathlib import Path

from diagbench.logs.decision import ReadyRule
from diagbench.logs.firstrank import FALLOUT_SETTLE_S
from diagbench.logs.scan import Scanner
from diagbench.logs.signatures import builtin_packs, load_packs
from diagbench.logs.watch import REQUEST_SETTLE_S, Watch
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


CAPTURE = (
    "Load weight begin.\nCapture cuda graph begin.\n"
    "\rCapturing batches (bs=8 avail_mem=1 GB): 0%|\rCapturing batches (bs=8 avail_mem=1 GB): 50%|"
    "\rCapturing batches (bs=4 avail_mem=1 GB): 100%|\nCapture cuda graph end.\n"
)


def feed_every_phase(watch: Watch, text: str, now: float, first: int = 1):
    scanned = SCANNER.scan_block(text.encode(), first, every_phase=True)  # as a live run reads
    return watch.feed(scanned.hits, first - 1 + scanned.lines, now)


def test_every_phase_change_in_one_read_is_kept_in_order_with_its_time():
    w = Watch(ReadyRule(), deadline=10)
    feed_every_phase(w, "Load weight begin.\n", now=1.0)
    feed_every_phase(w, CAPTURE, now=2.5, first=2)  # load again, then four more phases: one read
    feed_every_phase(w, "Capture cuda graph end.\n", now=3.0, first=8)  # the same phase: no change
    assert [(p.name, p.at_s) for p in w.phases] == [
        ("load", 1.0),
        ("capture", 2.5),
        ("capture bs=8", 2.5),
        ("capture bs=4", 2.5),
        ("warm-up", 2.5),
    ]
    assert w.phase == "warm-up"


def test_phases_after_a_failure_line_are_not_changes():
    w = Watch(ReadyRule(), deadline=10)
    text = "Load weight begin.\nNCCL error: unhandled system error\nCapture cuda graph begin.\n"
    assert feed_every_phase(w, text, now=1.0) is None
    assert [p.name for p in w.phases] == ["load"]  # what follows the failure is its fallout
    assert w.tick(2.0).failure_class == "nccl"


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


# -- the ready request -------------------------------------------------------------------

VLLM_UP = (
    "(APIServer pid=1) INFO 12-02 16:02:10 [launcher.py:186] Available routes are:\n"
    "INFO:     Application startup complete.\n"
)
REQUEST = ReadyRule(request="POST /v1/completions")


def test_the_ready_request_is_wanted_once_the_ready_line_holds_and_decides_ready():
    w = Watch(REQUEST, deadline=100)
    assert not w.wants_request
    assert feed(w, VLLM_UP, now=1.0) is None  # the line alone is not ready
    assert w.wants_request
    d = w.request_answered(True, "POST /v1/completions -> 200", 2.0)
    assert (d.outcome, d.at, d.evidence.line_no) == (Outcome.READY, 2.0, 2)
    assert d.reason == "ready line and POST /v1/completions -> 200"
    assert not w.wants_request


def test_the_request_waits_for_the_health_probe_too():
    w = Watch(ReadyRule(log=False, http=True, http_path="/health", request="POST /v1/completions"), deadline=100)
    assert not w.wants_request
    w.http_ready(1.0)
    assert w.wants_request and w.decision is None
    d = w.request_answered(True, "POST /v1/completions -> 200", 2.0)
    assert (d.outcome, d.signature, d.reason) == (
        Outcome.READY,
        "http",
        "GET /health -> 200 and POST /v1/completions -> 200",
    )


def test_a_failed_request_waits_for_the_servers_error_line_which_decides():
    w = Watch(REQUEST, deadline=100)
    feed(w, VLLM_UP, now=1.0)
    assert w.request_answered(False, "POST /v1/completions -> 500: EngineCore encountered an issue.", 2.0) is None
    assert w.wakeup() == 2.0 + REQUEST_SETTLE_S
    d = feed(
        w,
        "(Worker pid=3) ERROR 12-02 16:02:11 [multiproc_executor.py:1063] WorkerProc hit an exception.\n"
        "(Worker pid=3) ERROR 12-02 16:02:11 [multiproc_executor.py:1063] Traceback (most recent call last):\n"
        "(Worker pid=3) ERROR 12-02 16:02:11 [multiproc_executor.py:1063] RuntimeError: Unsupported CPU attention configuration: head_dim=16 isa=2 kv_cache_idx=0\n",
        now=2.5,
        first=3,
    )
    assert d is None  # the settle window is still open
    d = w.exited(0, 3.0)  # vLLM's API server shuts down and exits 0 after its engine died
    assert (d.outcome, d.failure_class, d.signature, d.evidence.line_no) == (
        Outcome.FAILED,
        "other",
        "generic.uncaught_exception",
        5,
    )
    assert d.reason == (
        "failure line (vllm.worker_exception); its error at line 5; "
        "ready request: POST /v1/completions -> 500: EngineCore encountered an issue."
    )


def test_a_failed_request_with_no_error_line_is_failed_with_the_answer_as_evidence():
    w = Watch(REQUEST, deadline=100)
    feed(w, VLLM_UP, now=1.0)
    w.request_answered(False, "POST /v1/completions -> 404: The model `x` does not exist.", 2.0)
    d = w.tick(2.0 + REQUEST_SETTLE_S)
    assert (d.outcome, d.failure_class, d.signature) == (Outcome.FAILED, "other", "ready.request")
    assert (d.evidence.line_no, d.evidence.text) == (0, "POST /v1/completions -> 404: The model `x` does not exist.")


def test_a_request_with_no_answer_by_the_deadline_is_a_timeout_that_says_so():
    w = Watch(REQUEST, deadline=100, timeout_s=100)
    feed(w, VLLM_UP, now=1.0)
    d = w.tick(100.0)
    assert d.outcome is Outcome.TIMEOUT
    assert d.reason == "not ready within 100s; last phase: serving; no answer yet to POST /v1/completions"


def test_a_cause_below_line_takes_the_first_error_after_it_not_the_last():
    w = Watch(ReadyRule(), deadline=10)
    d = feed(
        w,
        "(EngineCore pid=2) ERROR 12-02 16:05:12 [core.py:1510] EngineCore failed to start.\n"
        "(EngineCore pid=2) ERROR 12-02 16:05:12 [core.py:1510] Traceback (most recent call last):\n"
        "(EngineCore pid=2) ERROR 12-02 16:05:12 [core.py:1510] KeyError: 'rope_theta'\n"
        "(EngineCore pid=2) ERROR 12-02 16:05:12 [core.py:1510] The above exception was the direct cause of the following exception:\n"
        "(EngineCore pid=2) ERROR 12-02 16:05:12 [core.py:1510] RuntimeError: could not build the model\n"
        "RuntimeError: Engine core initialization failed. See root cause above. Failed core proc(s): {}\n",
    )
    assert (d.signature, d.evidence.text) == (
        "generic.uncaught_exception",
        "(EngineCore pid=2) ERROR 12-02 16:05:12 [core.py:1510] KeyError: 'rope_theta'",
    )


def test_what_a_sigterm_makes_vllm_print_is_no_failure_even_offline():
    # diagbench's SIGTERM reaches every process at once: vLLM's worker monitor may report the
    # worker's -15 before it notices the shutdown; with its EngineDeadError (weak) that is all
    w = Watch(ReadyRule(), deadline=None)
    feed(
        w,
        VLLM_UP + "(EngineCore pid=2) ERROR 12-02 16:08:57 [multiproc_executor.py:315] Worker proc VllmWorker-0 "
        "died unexpectedly (exit code: -15), shutting down executor.\n"
        "(APIServer pid=1) ERROR 12-02 16:08:57 [async_llm.py:906] vllm.v1.engine.exceptions.EngineDeadError: "
        "EngineCore encountered an issue. See stack trace (above) for the root cause.\n",
    )
    d = w.end_of_log(0.0)
    assert (d.outcome, d.evidence.line_no) == (Outcome.READY, 2)


# -- deaths inside the tree ----------------------------------------------------------------


def test_a_worker_killed_opens_a_window_that_a_generic_report_of_it_does_not_take_over():
    w = Watch(ReadyRule(), deadline=100, settle_s=0.5)
    feed(w, "(EngineCore pid=2) INFO 12-02 16:28:56 [core.py:133] Initializing a V1 LLM engine\n", now=1.0)
    assert w.member_died("VLLM::EngineCor (pid 2) was killed by SIGKILL", 9, 2.0) is None
    d = feed(
        w,
        "RuntimeError: Engine core initialization failed. See root cause above. Failed core proc(s): {}\n",
        now=2.1,
        first=2,
    )
    assert (d.outcome, d.failure_class, d.signature) == (Outcome.FAILED, "killed", "tree.killed")
    assert (d.evidence.line_no, d.evidence.text) == (0, "VLLM::EngineCor (pid 2) was killed by SIGKILL")
    assert d.reason == "a process of its tree died (tree.killed)"


def test_a_root_cause_line_in_the_window_outranks_the_death_which_stays_secondary():
    w = Watch(ReadyRule(), deadline=100, settle_s=0.5)
    w.member_died("VLLM::Worker (pid 3) was killed by SIGKILL", 9, 1.0)
    feed(w, "ValueError: No available memory for the cache blocks. Try increasing `gpu_memory_utilization`\n", now=1.1)
    d = w.tick(1.0 + FALLOUT_SETTLE_S)
    assert (d.failure_class, d.secondary_classes, d.signature) == ("oom", ("killed",), "vllm.kv_cache_oom")


def test_a_death_waits_for_its_parents_report_as_fallout_does_and_the_exit_ends_the_wait():
    """torchrun polls its workers, stops the rest, then prints the summary naming the rank: a
    window of the spec's 0.1 s would tear the launch down before it (found flaky on a loaded CI)."""
    w = Watch(ReadyRule(), deadline=100, settle_s=0.1)
    w.member_died("python (pid 7) was killed by SIGSEGV", 11, 1.0)
    assert w.tick(1.5) is None and w.wakeup() == 1.0 + FALLOUT_SETTLE_S
    d = w.exited(1, 1.6)
    assert (d.outcome, d.failure_class, d.at) == (Outcome.FAILED, "segfault", 1.6)
    late = Watch(ReadyRule(), deadline=100, settle_s=0.1)
    late.member_died("python (pid 7) was killed by SIGSEGV", 11, 1.0)
    assert late.tick(1.0 + FALLOUT_SETTLE_S).failure_class == "segfault"  # no report: the death alone decides


def test_deaths_by_an_orderly_signal_after_a_failure_or_after_the_decision_change_nothing():
    w = Watch(ReadyRule(), deadline=100)
    assert w.member_died("VLLM::Worker (pid 3) was killed by SIGTERM", 15, 1.0) is None
    assert w.wakeup() == 100  # no window opened
    feed(w, "Fatal Python error: Aborted\n", now=2.0)
    w.member_died("VLLM::Worker (pid 4) was killed by SIGKILL", 9, 2.01)  # the server's own cleanup
    d = w.tick(2.2)
    assert (d.failure_class, d.signature, d.secondary_classes) == ("other", "generic.aborted", ())
    assert w.member_died("x (pid 5) was killed by SIGSEGV", 11, 3.0) is d


# -- what a read's size must not change ---------------------------------------------------


def decide(text: str, cuts: list[int]) -> tuple[Outcome, str | None, int]:
    """The decision on `text` fed live, cut into reads after the given lines."""
    w = Watch(ReadyRule(), deadline=None)
    lines = text.splitlines(keepends=True)
    for start, stop in zip([0, *cuts], [*cuts, len(lines)], strict=True):
        feed(w, "".join(lines[start:stop]), first=start + 1)
        if w.decision:
            break
    d = w.decision or w.end_of_log(0.0)
    assert d is not None and d.evidence is not None
    return d.outcome, d.signature, d.evidence.line_no


def test_a_ready_line_holds_against_a_later_failure_in_the_same_read():
    runtime = (
        VLLM_UP
        + "(EngineCore_DP0 pid=2) ERROR 12-02 10:05:00 [core.py:800] torch.OutOfMemoryError: CUDA out of memory.\n"
    )
    assert decide(runtime, []) == decide(runtime, [2]) == (Outcome.READY, "vllm.uvicorn_ready", 2)
    # but uvicorn binds after `Application startup complete.` (when not handed a socket)
    bind = (
        VLLM_UP
        + "ERROR:    [Errno 98] error while attempting to bind on address ('0.0.0.0', 8000): address already in use\n"
    )
    assert decide(bind, [])[:2] == (Outcome.FAILED, "generic.port_in_use")


def test_a_settle_window_closes_after_its_lines_however_the_log_was_read():
    # a generic failure line, then 300 lines on a better one: outside the 200-line window
    text = "Fatal Python error: Aborted\n" + "x\n" * 300 + "torch.OutOfMemoryError: CUDA out of memory.\n"
    assert decide(text, []) == decide(text, [1]) == decide(text, [250]) == (Outcome.FAILED, "generic.aborted", 1)


WONT_CONVERT = "W1202 19:37:11.217000 32570 torch/_dynamo/convert_frame.py:2415] [0/0] "


def test_errors_inside_a_wont_convert_record_are_handled_and_do_not_decide():
    """TORCHDYNAMO_SUPPRESS_ERRORS=1: Dynamo logs the compile error as one warning record
    (each line under the same header) and runs the frame eagerly."""
    record = "".join(
        WONT_CONVERT + line + "\n"
        for line in (
            "WON'T CONVERT f /srv/app.py line 4 ",
            "due to: ",
            "Traceback (most recent call last):",
            "torch._dynamo.exc.BackendCompilerFailed: backend='bad_backend' raised:",
            "RuntimeError: my backend broke",
        )
    )
    w = Watch(ReadyRule(), deadline=10)
    assert feed(w, record) is None and w.tick(1.0) is None
    d = feed(w, "The server is fired up and ready to roll!\n", first=6)
    assert (d.outcome, d.evidence.line_no) == (Outcome.READY, 6)
    cut = Watch(ReadyRule(), deadline=None)  # a log that stops inside the record: its last error names it
    feed(cut, record)
    assert (cut.end_of_log(0.0).outcome, cut.decision.evidence.line_no) == (Outcome.FAILED, 5)
    after = Watch(ReadyRule(), deadline=10)  # the same error outside the record decides
    feed(after, record + "torch._dynamo.exc.BackendCompilerFailed: backend='bad_backend' raised:\n")
    assert after.tick(1.0).failure_class == "torch_compile"


def test_a_retry_line_sets_the_open_failure_aside_live():
    """Ollama's retry of a load that ran out of memory, before any ready line: the failure
    waits in its window, the retry closes it, and the line after says how the retry went."""
    retry = (
        'time=2026-08-21T10:01:15.902-07:00 level=WARN source=sched.go:652 msg="llama-server load failed; '
        'reducing automatic context and retrying once" error="llama-server process has terminated: exit status 1"\n'
    )
    failed = (
        'time=2026-08-21T10:01:15.901-07:00 level=INFO source=sched.go:641 msg="Load failed" error="exit status 1"\n'
    )
    w = Watch(ReadyRule(), deadline=10, settle_s=5.0)
    assert feed(w, failed, now=1.0) is None  # in its window
    assert feed(w, retry, now=1.1, first=2) is None and w.wakeup() == 10  # set aside: only the deadline is left
    assert w.phase == "load"
    d = feed(
        w,
        'time=2026-08-21T10:01:20.000-07:00 level=INFO msg="Listening on 127.0.0.1:11434 (version 0.30.1)"\n',
        now=2.0,
        first=3,
    )
    assert d is not None and (d.outcome, d.evidence.line_no) == (Outcome.READY, 3)
    asked = Watch(REQUEST, deadline=100)  # a failed ready request is no failure line: a retry keeps it
    feed(asked, VLLM_UP, now=1.0)
    asked.request_answered(False, "POST /v1/completions -> 500", 2.0)
    feed(asked, retry, now=2.5, first=100)
    d = asked.tick(2.0 + REQUEST_SETTLE_S)
    assert d is not None and (d.outcome, d.signature) == (Outcome.FAILED, "ready.request")
    again = Watch(ReadyRule(), deadline=10, settle_s=5.0)
    feed(again, failed + retry, now=1.0)
    feed(again, failed, now=3.0, first=3)  # the retry failed too: a window opens again
    d = again.tick(8.0)
    assert d is not None and (d.outcome, d.evidence.line_no) == (Outcome.FAILED, 3)
