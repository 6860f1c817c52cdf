"""The root-cause reader (logs/rootcause.py, causes.py, reading.py) on real logs.

Every class is read from a real corpus log with the packs off (no signature at all): the
reader alone finds the error and its table names the class. Then chains, each prefix kind,
a server that came up and died, and a ready log whose tracebacks were handled.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from diagbench.logs.causes import TABLE, class_of
from diagbench.logs.classify import classify_file
from diagbench.logs.rootcause import read, root_of, strip
from diagbench.logs.signatures import builtin_packs, load_packs

CORPUS = Path(__file__).parents[1] / "corpus"
FIXTURES = Path(__file__).parents[1] / "fixtures"
SIGS = load_packs(builtin_packs(), Path("."))


@pytest.mark.parametrize(
    ("log", "want", "cause_type"),
    [
        ("logs/032.log", "cuda_graph_capture", "RuntimeError"),  # operation not permitted when stream is capturing
        ("logs/067.log", "illegal_memory_access", "CUDA"),
        ("logs/030.log", "import_error", "ModuleNotFoundError"),
        ("batch2/logs/028.log", "import_error", "loader"),  # undefined symbol in a .so
        ("logs/088.log", "killed", "signal"),  # torchrun: exitcode -9
        ("logs/009.log", "nccl", "RuntimeError"),  # NCCL error under a RuntimeError
        ("logs/003.log", "oom", "torch.OutOfMemoryError"),
        ("logs/021.log", "oom", "ValueError"),  # a traceback cut before its line: its echoed raise
        ("logs/007.log", "other", "ValueError"),
        ("logs/024.log", "port_in_use", "bind"),
        ("logs/068.log", "segfault", "shell"),  # Segmentation fault (core dumped)
        ("batch2/logs/072.log", "segfault", "OSError"),  # Windows access violation, quoted and flattened
        ("logs/027.log", "torch_compile", "traceback"),  # cut inside torch/_inductor
        ("logs/005.log", "triton", "subprocess.CalledProcessError"),  # ptxas, Ray lines run together
    ],
)
def test_every_class_from_the_root_cause_reader_alone(log: str, want: str, cause_type: str) -> None:
    got = classify_file(CORPUS / log, [], "re")
    assert (got.outcome, got.failure_class) == ("failed", want)
    assert got.cause is not None and got.cause.type == cause_type
    assert got.signature == "rootcause"


def test_a_chain_is_followed_to_its_root() -> None:
    """vLLM's worker: torch.OutOfMemoryError, "The above exception was the direct cause",
    then the wrapper's traceback (the excerpt ends inside it): the root is the OOM, and the
    chain holds both."""
    lines = (CORPUS / "batch2/logs/010.log").read_text(errors="replace").splitlines()
    chained = [c for c in read(lines) if len(c.chain) > 1]
    assert chained and chained[0].type == "torch.OutOfMemoryError"
    assert chained[0].chain == ("torch.OutOfMemoryError", "traceback")
    assert chained[0].failure_class == "oom"


def test_during_handling_keeps_the_first_error() -> None:
    log = [
        "Traceback (most recent call last):",
        '  File "a.py", line 1, in <module>',
        "ModuleNotFoundError: No module named 'flash_attn'",
        "",
        "During handling of the above exception, another exception occurred:",
        "",
        "Traceback (most recent call last):",
        '  File "a.py", line 3, in <module>',
        "RuntimeError: could not start",
    ]
    (cause,) = read(log)
    assert (cause.type, cause.failure_class, cause.line_no) == ("ModuleNotFoundError", "import_error", 3)
    assert cause.chain == ("ModuleNotFoundError", "RuntimeError")


TRACEBACK = [
    "Traceback (most recent call last):",
    '  File "/x/model_runner.py", line 212, in capture',
    "    graph.replay()",
    "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB",
]


@pytest.mark.parametrize(
    "prefix",
    [
        "",
        "[rank0]: ",  # torch elastic
        "(VllmWorker rank=0 pid=4242) ",  # vLLM's worker
        "(RayWorkerWrapper pid=77, ip=10.0.0.2) ",  # Ray
        "(EngineCore_DP0 pid=223840) ERROR 10-25 13:08:43 [core.py:708] ",  # vLLM's logger
        "[2025-05-12 08:03:12 TP0] ",  # SGLang
        "vllm-1  | ",  # docker compose
        "2023-05-30 17:19:25 | ERROR | stderr | ",  # FastChat
        "2024-06-01T10:00:00.123456Z ",  # kubectl --timestamps
        "0.00.184.752 E ",  # llama.cpp --log-timestamps --log-prefix
        "> ",  # a Markdown quote
        ">     ",  # a quote, indented
        "\x1b[36m(pid=9)\x1b[0m ",  # colours
    ],
)
def test_each_prefix_kind(prefix: str) -> None:
    (cause,) = read([prefix + line for line in TRACEBACK])
    assert (cause.type, cause.failure_class, cause.line_no) == ("torch.OutOfMemoryError", "oom", 4)


def test_strip_keeps_a_tracebacks_indentation() -> None:
    assert strip('2023-05-30 17:19:25 | ERROR | stderr |   File "x.py", line 3') == '  File "x.py", line 3'
    assert strip("[2024-05-17 14:45:46.998] [Error] (Server) failed") == "[Error] (Server) failed"


def test_a_server_that_came_up_and_died_is_failed_with_its_ready_line() -> None:
    """Triton listed its endpoints, then `Signal (11) received.` on its first request."""
    got = classify_file(CORPUS / "batch2/logs/042.log", SIGS)
    assert (got.outcome, got.failure_class, got.phase, got.line_no) == ("failed", "segfault", "serving", 4)
    assert got.ready is not None and "Started" in got.ready.text and got.ready.line_no < 4
    assert got.chain == "failed:segfault <- segfault: signal: Signal (11) received. (L4)"


def test_a_banner_then_a_killed_container_is_failed() -> None:
    """LocalAI printed its HTTP framework's banner, then compose said `exited with code 137`."""
    got = classify_file(CORPUS / "batch2/logs/098.log", SIGS)
    assert (got.outcome, got.failure_class, got.phase) == ("failed", "killed", "serving")


def test_a_ready_log_with_handled_tracebacks_stays_ready(tmp_path: Path) -> None:
    """Request errors after the ready line (a real one from text-generation-webui, three
    times, between access lines) are the server's life, not its launch."""
    request_error = (CORPUS / "batch2/logs/096.log").read_text().splitlines()
    start = next(i for i, line in enumerate(request_error) if line.startswith("Traceback"))
    log = tmp_path / "server.log"
    body = (FIXTURES / "vllm_ready.log").read_text()
    for n in range(3):
        body += f'INFO:     127.0.0.1:5{n} - "POST /v1/completions HTTP/1.1" 500 Internal Server Error\n'
        body += "\n".join(request_error[start:]) + "\n"
    log.write_text(body)
    got = classify_file(log, SIGS)
    assert got.outcome == "ready"
    assert classify_file(CORPUS / "batch2/logs/096.log", SIGS).outcome == "ready"
    assert classify_file(FIXTURES / "dynamo_suppressed_then_ready.log", SIGS).outcome == "ready"


def test_a_wrapper_keeps_its_class_and_gains_the_root_as_secondary() -> None:
    got = classify_file(FIXTURES / "sglang_capture_oom.log", SIGS)
    assert (got.failure_class, got.secondary_classes[:1]) == ("cuda_graph_capture", ("oom",))
    assert got.chain is not None and got.chain.startswith("failed:cuda_graph_capture <- oom: ")


def test_a_death_after_an_error_is_its_fallout() -> None:
    log = ["ValueError: bad config", "Killed"]
    causes = read(log)
    assert [c.type for c in causes] == ["ValueError", "shell"]
    root = root_of(causes)
    assert root is not None and root.type == "ValueError"


def test_every_table_entry_cites_a_source_and_names_a_class() -> None:
    assert all(e.source.startswith("S ") for e in TABLE)
    assert class_of("torch._dynamo.exc.BackendCompilerFailed", "backend='inductor' raised")[0] == "torch_compile"
    assert class_of("triton.compiler.errors.CompilationError", "at 12:4")[0] == "triton"
    assert class_of("OSError", "[Errno 98] Address already in use")[0] == "port_in_use"
    assert class_of("ImportError", "libcudart.so.12: cannot open shared object file")[0] == "import_error"
    assert class_of("RuntimeError", "CUDA error: an illegal memory access was encountered")[0] == (
        "illegal_memory_access"
    )
    assert class_of("KeyError", "'model'") == ("other", None)


def test_classify_never_prints_a_secret_in_the_cause(tmp_path: Path) -> None:
    import json
    import subprocess
    import sys

    log = tmp_path / "server.log"
    secret = "hf_" + "abcdefghijklmnopqrstuvwxyz0123456789"
    log.write_text(
        f'Traceback (most recent call last):\n  File "a.py", line 1\nRuntimeError: token {secret} rejected\n'
    )
    done = subprocess.run(
        [sys.executable, "-m", "diagbench", "classify", "--json", str(log)], capture_output=True, text=True
    )
    assert done.returncode == 1, done.stderr  # failed (classify: 0 ready, 1 failed, 3 unknown)
    out = done.stdout
    assert secret not in out
    assert json.loads(out)["cause"] == {"type": "RuntimeError", "message": "token <redacted> rejected", "line_no": 3}


def test_a_large_log_is_read_around_its_decision(tmp_path: Path) -> None:
    """The cause of a failure early in a log larger than the reader's window is read where
    it is, with the scanner's line numbers; a megabyte-long line is read by its start."""
    log = tmp_path / "server.log"
    head = ["INFO starting"] * 10 + TRACEBACK
    filler = "INFO a request line that says nothing much at all, again and again\n" * 40_000
    log.write_text("x" * (2 << 20) + "\n" + "\n".join(head) + "\n" + filler)
    got = classify_file(log, SIGS)
    assert (got.outcome, got.failure_class, got.line_no) == ("failed", "oom", 15)
    assert got.cause is not None and (got.cause.type, got.cause.line_no) == ("torch.OutOfMemoryError", 15)


def test_an_error_of_no_finer_class_during_capture_is_a_capture_failure(tmp_path: Path) -> None:
    """slime's SGLang engines: a FlashInfer JIT build (ninja) fails while CUDA graphs are being
    captured; SGLang words such a failure "Capture cuda graph failed: ...". The root stays the
    cause; a root of a finer class keeps its class (a ptxas failure during capture is triton)."""
    got = classify_file(CORPUS / "batch2/logs/003.log", SIGS)
    assert (got.outcome, got.failure_class, got.phase) == ("failed", "cuda_graph_capture", "capture bs=32")
    assert got.cause is not None and got.cause.type == "subprocess.CalledProcessError"
    assert (classify_file(CORPUS / "logs/005.log", SIGS).failure_class, "capture") == ("triton", "capture")
    # the same error after the capture ended is no capture failure
    log = tmp_path / "server.log"
    lines = (CORPUS / "batch2/logs/003.log").read_text().splitlines()
    log.write_text(
        "\n".join([lines[0], "[2026-01-04 01:42:55 TP0] Capture cuda graph end. Time elapsed: 3.1 s", *lines[1:]])
    )
    assert classify_file(log, SIGS).failure_class == "other"


@pytest.mark.parametrize(
    "last",
    [
        "[2024-05-17 14:45:46] [INFO] Server stopped",
        "INFO  ModelServer Model server stopped.",  # DJL Serving ModelServer.java
        "INFO  ModelServer Stopping model server.",
    ],
)
def test_a_server_that_stops_before_any_ready_line_failed(tmp_path: Path, last: str) -> None:
    log = tmp_path / "server.log"
    log.write_text(f"INFO loading the model\nINFO model loaded\n{last}\n")
    got = classify_file(log, SIGS)
    assert (got.outcome, got.failure_class, got.line_no) == ("failed", "other", 3)
    assert got.cause is not None and got.cause.type == "server stopped"
    # after a ready line the same words are a clean shutdown
    log.write_text(f"INFO loading\nINFO:     Uvicorn running on http://0.0.0.0:8000 (Press CTRL+C to quit)\n{last}\n")
    assert classify_file(log, SIGS).outcome == "ready"
    # and far from the end they are not the log's last state
    log.write_text(f"{last}\n" + "INFO loading the model again\n" * 10)
    assert classify_file(log, SIGS).outcome == "unknown"


@pytest.mark.parametrize(
    "last",
    [
        "INFO:     Shutting down",  # uvicorn server.py: after its start-up completed, on a signal
        "INFO:     Finished server process [4242]",
        "2024-05-01T10:00:00.000Z  INFO text_generation_launcher: Shutting down shards",  # TGI, on any signal
    ],
)
def test_a_shutdown_on_a_signal_says_nothing_of_the_start(tmp_path: Path, last: str) -> None:
    log = tmp_path / "server.log"
    log.write_text(f"INFO loading the model\nINFO Waiting for shard to be ready... rank=0\n{last}\n")
    assert classify_file(log, SIGS).outcome == "unknown"


def test_lm_studio_stopping_its_server_is_a_failed_start() -> None:
    got = classify_file(CORPUS / "batch2/logs/093.log", SIGS)
    assert (got.outcome, got.failure_class) == ("failed", "other")


def test_asyncio_bind_errors_and_rendezvous_errors_are_read_without_packs() -> None:
    """lmdeploy's gradio server: CPython asyncio's "error while attempting to bind on address"
    (errno 99, not a port in use: other); torch's RendezvousTimeoutError is the process group's
    start-up (nccl)."""
    got = classify_file(CORPUS / "logs/086.log", [], "re")
    assert (got.outcome, got.failure_class) == ("failed", "other")
    assert got.cause is not None and got.cause.type == "bind"
    assert class_of("torch.distributed.elastic.rendezvous.api.RendezvousTimeoutError", "")[0] == "nccl"
    assert class_of("torch.distributed.DistNetworkError", "failed to connect")[0] == "nccl"


def test_triton_ascend_frames_its_compile_errors() -> None:
    """triton-ascend's MLIRCompilationError message ends in "///---[ERROR][Triton][END]---";
    the kill that follows it is its fallout."""
    got = classify_file(CORPUS / "batch2/logs/002.log", SIGS)
    assert (got.outcome, got.failure_class, got.signature) == ("failed", "triton", "triton.mlir_compilation_error")


def test_after_a_frameworks_ready_line_handled_errors_keep_it_ready(tmp_path: Path) -> None:
    """DJL Serving bound its API, then a request's chunk read timed out: the Java exception
    follows a WARN record of the request handler, so the server went on (ready). BentoML bound
    first and then its runner failed to import a module: that ended it (failed, ready kept)."""
    got = classify_file(CORPUS / "batch2/logs/091.log", SIGS)
    assert (got.outcome, got.phase, got.line_no) == ("ready", "serving", 1)
    died = classify_file(CORPUS / "batch2/logs/075.log", SIGS)
    assert (died.outcome, died.failure_class, died.phase) == ("failed", "import_error", "serving")
    assert died.ready is not None and died.ready.line_no == 1
    # a web framework's own request-error record (uvicorn's), then the request's traceback
    request = [
        "ERROR:    Exception in ASGI application",
        "Traceback (most recent call last):",
        '  File "/app/server.py", line 12, in generate',
        "    raise ValueError(prompt)",
        "ValueError: prompt too long",
    ]
    up = "INFO:     Uvicorn running on http://0.0.0.0:8000 (Press CTRL+C to quit)"
    log = tmp_path / "server.log"
    log.write_text("\n".join(["INFO: loading", up, *request, 'INFO:     127.0.0.1:5 - "POST /x HTTP/1.1" 500']) + "\n")
    assert classify_file(log, SIGS).outcome == "ready"
    log.write_text("\n".join(["INFO: loading", up, *request]) + "\n")  # the excerpt ends in it
    assert classify_file(log, SIGS).outcome == "ready"
    # then the shell's prompt came back: the server ended
    log.write_text("\n".join(["INFO: loading", up, *request, "user@host:~$ "]) + "\n")
    assert classify_file(log, SIGS).outcome == "failed"
    # the same traceback with no handler's record before it ended the server
    log.write_text("\n".join(["INFO: loading", up, *request[1:]]) + "\n")
    assert (classify_file(log, SIGS).outcome, classify_file(log, SIGS).phase) == ("failed", "serving")
    # a warning just before a Python traceback is no handler's record: the interpreter printed it as it died
    log.write_text("\n".join(["INFO: loading", up, "WARNING: slow tokenizer", *request[1:]]) + "\n")
    assert classify_file(log, SIGS).outcome == "failed"
    # a handled record does not make a death harmless
    log.write_text("\n".join(["INFO: loading", up, *request, "Segmentation fault (core dumped)"]) + "\n")
    assert classify_file(log, SIGS).failure_class == "segfault"


def test_a_persons_ctrl_c_is_not_the_launchs_end(tmp_path: Path) -> None:
    """A launch that hung in capture until someone pressed Ctrl-C: KeyboardInterrupt is not the
    server's error, and what the interrupt makes the server print (SGLang's sigquit line, a
    kill) is its fallout: the log is read up to the ^C, where nothing was decided yet."""
    hang = [
        "[2025-01-01 10:00:00 TP0] Load weight begin. avail mem=78.00 GB",
        "[2025-01-01 10:00:31 TP0] Capture cuda graph begin. This can take up to several minutes.",
    ]
    interrupt = [
        "^CTraceback (most recent call last):",
        '  File "/sgl-workspace/sglang/python/sglang/launch_server.py", line 14, in <module>',
        "    launch_server(server_args)",
        '  File "/usr/lib/python3.10/multiprocessing/connection.py", line 384, in _recv',
        "    chunk = read(handle, remaining)",
        "KeyboardInterrupt",
    ]
    log = tmp_path / "server.log"
    log.write_text("\n".join(hang + interrupt) + "\n")
    got = classify_file(log, SIGS)
    assert (got.outcome, got.failure_class, got.interrupted, got.phase) == ("unknown", None, 3, "capture")
    fallout = [
        "^C[2025-01-01 10:05:00] Received sigquit from a child process. It usually means the child failed.",
        "Killed",
    ]
    log.write_text("\n".join(hang + fallout) + "\n")
    fell = classify_file(log, SIGS)
    assert (fell.outcome, fell.interrupted, fell.signature, fell.line_no) == ("unknown", 3, None, None)
    # an error before the interrupt still decides
    log.write_text("\n".join([*hang, "RuntimeError: CUDA error: out of memory", *interrupt]) + "\n")
    assert (classify_file(log, SIGS).outcome, classify_file(log, SIGS).failure_class) == ("failed", "oom")


@pytest.mark.parametrize(
    ("up", "died", "want"),
    [
        (  # vLLM: the engine's own fatal line, its OOM, the API server's EngineDeadError (v1/engine/core.py, exceptions.py)
            "(APIServer pid=1) INFO:     Application startup complete.",
            [
                "(EngineCore_DP0 pid=2) ERROR 10-25 13:09:00 [core.py:710] EngineCore encountered a fatal error.",
                "(EngineCore_DP0 pid=2) ERROR 10-25 13:09:00 [core.py:710] Traceback (most recent call last):",
                '(EngineCore_DP0 pid=2) ERROR 10-25 13:09:00 [core.py:710]   File "/vllm/v1/engine/core.py", line 1, in run',
                "(EngineCore_DP0 pid=2) ERROR 10-25 13:09:00 [core.py:710] torch.OutOfMemoryError: CUDA out of memory.",
                "(APIServer pid=1) ERROR 10-25 13:09:00 [async_llm.py:480] vllm.v1.engine.exceptions.EngineDeadError: "
                "EngineCore encountered an issue. See stack trace (above) for the root cause.",
                "(APIServer pid=1) INFO:     Shutting down",
            ],
            "oom",
        ),
        (  # SGLang: its scheduler died after the fired-up line, then SIGQUIT and the kill
            "[2025-01-01 10:00:00] The server is fired up and ready to roll!",
            [
                "[2025-01-01 10:01:00 TP0] Scheduler hit an exception: Traceback (most recent call last):",
                '  File "/sgl-workspace/sglang/python/sglang/srt/managers/scheduler.py", line 1, in event_loop',
                "RuntimeError: CUDA error: an illegal memory access was encountered",
                "[2025-01-01 10:01:00] Received sigquit from a child process. It usually means the child failed.",
                "Killed",
            ],
            "illegal_memory_access",
        ),
        (  # TGI: a shard crashed once the router served (launcher/src/main.rs)
            "2024-05-01T10:00:00.000Z  INFO text_generation_router::server: router/src/server.rs:1: Connected",
            ["2024-05-01T10:05:00.000Z ERROR text_generation_launcher: Shard 0 crashed"],
            "other",
        ),
    ],
)
def test_a_server_whose_engine_died_after_its_ready_line_failed(
    tmp_path: Path, up: str, died: list[str], want: str
) -> None:
    log = tmp_path / "server.log"
    log.write_text(
        "\n".join(["INFO loading", up, 'INFO: 127.0.0.1:1 - "POST /v1/completions HTTP/1.1" 200', *died]) + "\n"
    )
    got = classify_file(log, SIGS)
    assert (got.outcome, got.failure_class, got.phase) == ("failed", want, "serving")
    assert got.ready is not None and got.ready.line_no == 2


def test_what_a_server_prints_after_it_was_asked_to_stop_is_fallout(tmp_path: Path) -> None:
    """diagbench's teardown SIGTERMs a vLLM that came up: the engine says so (vllm 0.32
    core.py "trigger received signal=SIGTERM"), and the API server may then find it dead
    (EngineDeadError): that is the stop's fallout, the launch was ready. A hang a supervisor
    ended reads as a log that stops (unknown); a failure before vLLM's own SIGTERM of its
    workers still decides."""
    up = [
        "(APIServer pid=1) INFO 12-03 08:19:20 [api_server.py:1] vLLM API server version 0.32.0",
        "INFO:     Application startup complete.",
        'INFO:     127.0.0.1:57358 - "POST /v1/completions HTTP/1.1" 200 OK',
    ]
    stop = (
        "(EngineCore pid=2) INFO 12-03 08:19:54 [core.py:1454] [shutdown] EngineCore: trigger received signal=SIGTERM"
    )
    dead = (
        "(APIServer pid=1) ERROR 12-03 08:19:54 [async_llm.py:480] vllm.v1.engine.exceptions.EngineDeadError: "
        "EngineCore encountered an issue. See stack trace (above) for the root cause."
    )
    log = tmp_path / "server.log"
    log.write_text("\n".join([*up, stop, dead]) + "\n")
    got = classify_file(log, SIGS)
    assert (got.outcome, got.line_no, got.interrupted) == ("ready", 2, None)
    # the API server's own signal handler (launchers/launcher.py) may speak first
    api = "(APIServer pid=1) INFO 12-03 08:19:54 [launcher.py:254] [shutdown] API server: shutdown triggered"
    log.write_text("\n".join([*up, api, dead]) + "\n")
    assert classify_file(log, SIGS).outcome == "ready"
    log.write_text("\n".join([up[0], "(EngineCore pid=2) INFO Loading weights took 1.0 GB", stop, dead]) + "\n")
    got = classify_file(log, SIGS)
    assert (got.outcome, got.interrupted) == ("unknown", 3)
    got = classify_file(FIXTURES / "vllm_cpu_startup_memory.log", SIGS)
    assert (got.outcome, got.failure_class, got.line_no, got.interrupted) == ("failed", "oom", 49, None)


GO_CGO_CRASH = """\
time=2024-06-01T10:00:00.000Z level=INFO source=server.go:594 msg="waiting for llama runner to start responding"
SIGSEGV: segmentation violation
PC=0x7f3a2c1b2e40 m=5 sigcode=1 addr=0x18
signal arrived during cgo execution

goroutine 7 gp=0xc000007dc0 m=5 mp=0xc000100008 [syscall]:
runtime.cgocall(0x5593b8a0c1d0, 0xc000049b48)
"""
GO_PANIC = """\
2024/06/01 10:00:00 routes.go:1008: INFO server config
{first}
[signal SIGSEGV: segmentation violation code=0x1 addr=0x0 pc=0x55d1c2f4a1b3]

goroutine 1 [running]:
"""
GO_EXEC = (
    'time=2024-06-01T10:00:02.000Z level=ERROR source=sched.go:443 msg="error loading llama server" '
    'error="llama runner process has terminated: signal: {said}"\n'
)


@pytest.mark.parametrize(
    ("text", "want", "cause_type"),
    [
        (GO_CGO_CRASH, "segfault", "signal"),  # runtime/signal_unix.go sighandler's banner
        (
            GO_PANIC.format(first="panic: runtime error: invalid memory address or nil pointer dereference"),
            "segfault",
            "Go panic",
        ),
        (
            GO_PANIC.format(first="fatal error: unexpected signal during runtime execution"),
            "segfault",
            "Go fatal error",
        ),
        (
            GO_PANIC.format(first="panic: runtime error: index out of range [3] with length 3").split("[signal")[0],
            "other",
            "Go panic",
        ),
        (GO_EXEC.format(said="segmentation fault (core dumped)"), "segfault", "signal"),  # os.ProcessState.String
        (GO_EXEC.format(said="killed"), "killed", "signal"),
        (GO_EXEC.format(said="illegal instruction"), "other", "signal"),
    ],
)
def test_go_runtimes_own_reports_of_a_signal(tmp_path: Path, text: str, want: str, cause_type: str) -> None:
    """A Go server (Ollama) or its cgo library killed by a signal: the runtime's banner, the
    `[signal ...]` line under a panic, and os/exec's `signal: <name>` of a child."""
    log = tmp_path / "go.log"
    log.write_text(text)
    for signatures in ([], SIGS):  # the reader alone, and under the packs (ollama's runner line is `other`)
        got = classify_file(log, signatures)
        assert (got.outcome, got.failure_class) == ("failed", want), (signatures and "packs", got)
        assert got.cause is not None and got.cause.type == cause_type


def test_a_native_pattern_is_searched_only_where_its_words_are_and_finds_the_same():
    """native() skips a pattern when none of the words every match of it holds is in the line:
    on every fixture log's lines, each pattern that matches a line holds one of its words."""
    from diagbench.logs.native import NATIVE_PATTERNS, _gates

    for path in sorted((Path(__file__).parents[1] / "fixtures").glob("*.log")):
        for line in path.read_text(errors="replace").splitlines():
            for (pattern, kind), gate in zip(NATIVE_PATTERNS, _gates(), strict=True):
                if gate is not None and re.search(pattern, line):
                    assert any(word in line for word in gate), (path.name, kind, line)
