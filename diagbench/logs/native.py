"""What native runtimes and the system print when a process fails: C++, Rust, Go, the shell,
the kernel, CUDA, NCCL, glog-style records, a server's word that it stopped or was asked to.

The root-cause reader (rootcause.py) asks `native` about each line outside a Python
traceback; the kind it names is what causes.py's table maps to a class. Each pattern cites
the program that prints it.
"""

from __future__ import annotations

import functools
import re

__all__ = [
    "ANSWERED",
    "DEATHS",
    "ENDING",
    "FATAL_RECORD",
    "GAVE_UP",
    "INTERRUPTED",
    "LOGGED",
    "MESSAGE_CHARS",
    "NATIVE_PATTERNS",
    "PROMPT",
    "STOPPED",
    "WORDS",
    "native",
    "native_patterns",
]

LOGGED = "logged error"  # a log record at error level: an error, not a report of why
PROMPT = "shell prompt"  # a log that ends at the shell's prompt: the process ended (counts only at the end)
STOPPED = "server stopped"  # a server's own word that it is shutting down (counts only at the end, before ready)
GAVE_UP = "launcher gave up"  # a launcher that stopped waiting for the server to come up
INTERRUPTED = "interrupted"  # Ctrl-C, or a request to stop (SIGTERM): what follows is its fallout, not the launch's end
ENDING = (LOGGED, PROMPT, STOPPED)  # what names a failure only among a log's last lines
DEATHS = ("signal", "shell", "kernel")  # reports of a process killed or crashed, not of why
# native reports: (regex, kind), searched in each (stripped) line; the message is the regex's
# group 1, or the whole line where it has none. No pattern starts with `.*`: a search that
# does is quadratic on a long line.
NATIVE_PATTERNS = (
    (r"terminate called after throwing an instance of '([^']+)'", "C++"),
    (r"^\s*what\(\):\s*(.+)", "C++ what()"),
    (r"thread '[^']*' panicked at (.+)", "Rust panic"),
    (r"^panic: (.+)", "Go panic"),
    (r"^fatal error: (.+)", "Go fatal error"),
    # the Go runtime's banner for a fatal signal it did not turn into a panic (runtime/signal_unix.go
    # sighandler prints sigtable's name: "SIGSEGV: segmentation violation", then "PC=... m=N sigcode=N",
    # and "signal arrived during cgo execution" when C code (a cgo library) got it)
    (r"^(SIG[A-Z]+\d?: [a-z]+(?:[ -][a-z]+)*(?: \d)?)\s*$", "signal"),
    (r"^(Fatal Python error: .+)", "Fatal Python error"),
    # bash (strsignal: "Segmentation fault (core dumped)", after "[1]+  " or "line 3: 123 "), zsh
    # ("zsh: segmentation fault  cmd", "[1]    123 floating point exception  cmd"): the line's start
    (
        r"^(?:zsh: |\[\d+\][+-]?\s+|(?:[\w./-]+: )?line \d+:\s+|\s*)(?:\d+\s+)?"
        r"((?:Segmentation fault|Bus error|Aborted|Killed|Floating point exception|Illegal instruction"
        r"|segmentation fault|bus error|abort|killed|floating point exception|illegal hardware instruction)"
        r"(?: \(core dumped\))?)(?:\s{2,}\S.*|\s*)$",
        "shell",
    ),
    # a server saying it was asked to stop (SIGTERM, SIGINT, SIGHUP: a person, a supervisor, diagbench's
    # teardown): vllm v1/engine/core.py ("[shutdown] EngineCore: trigger received signal=SIGTERM") and
    # entrypoints/launchers/launcher.py signal_handler, on SIGINT or SIGTERM ("[shutdown] API server:
    # shutdown triggered"), torch elastic agent/server/api.py ("Received Signals.SIGTERM death signal, ..."),
    # tritonserver src/triton_signal.cc's graceful handler, for SIGINT and SIGTERM ("Signal (15) received.")
    (
        r"((?:[Rr]eceived|[Cc]aught|[Gg]ot) (?:signal[= ]?)?(?:Signals\.)?SIG(?:TERM|INT|HUP)\b.*"
        r"|\bSIG(?:TERM|INT) received\b.*|\bAPI server: shutdown triggered.*|^Signal \((?:2|15)\) received\..*)",
        INTERRUPTED,
    ),
    # Go's os.ProcessState.String() for a child killed by a signal (os/exec_posix.go: "signal: " and
    # the signal's name, " (core dumped)"), as Ollama reports its llama runner's death
    (
        r"\bsignal: ((?:segmentation fault|killed|aborted|illegal instruction|bus error"
        r"|floating point exception|trace/breakpoint trap)(?: \(core dumped\))?)",
        "signal",
    ),
    (
        r"\*\*\* SIGSEGV received|\*\*\* Process received signal \*\*\*"
        r"|(?:Caught|Received|got) signal\b[^\n]{0,80}?SIG\w+"
        r"|(?:exit ?code|exitcode)\s*[:=]?\s*-(?:9|11)\b"
        r"|Signal \(\d+\) received|Signal: [\w ]+ \(\d+\)|(?:exited with|terminated with exit) code (?:137|139)\b"
        r"|Signal (?:9|11) \(SIG\w+\)|signal(?: number)? (?:9|11)\b|<Signals\.SIG(?:KILL|SEGV): \d+>",
        "signal",
    ),
    (r"^Out of memory: Killed process |invoked oom-killer", "kernel"),
    (r"(?:CUDA|Cuda) error\b|\bcudaError\w+|CUDA_ERROR_\w+|\bcudaMalloc\w* failed\b", "CUDA"),
    (r"NCCL error|\bnccl(?:Internal|UnhandledCuda|System|Remote)Error\b|NCCL WARN ", "NCCL"),
    (
        r"[Aa]ddress already in use|(?:couldn't|could not|[Ff]ailed to|[Uu]nable to) bind\b"
        r"|\blisten (?:tcp|udp)\d? \S+: bind: |error while attempting to bind on address",  # cpython asyncio
        "bind",
    ),
    # a launcher that gave up waiting for the server: docker compose's health check (docker/compose v2
    # pkg/compose/convergence.go, "dependency failed to start: container %s is unhealthy"), Ollama's wait
    # for its runner (llm/server.go, "timed out waiting for llama runner to start - progress ..."), SGLang's
    # launchers (V sglang 0.5.23 srt/entrypoints/http_server_engine.py:55, test/test_utils.py:717,
    # "Server failed to start within the timeout period")
    (
        r"(dependency failed to start: container \S+ is unhealthy.*"
        r"|\b[Tt]imed out waiting for (?:the )?(?:server|endpoint|llama runner|model server|service)\b.*"
        r"|\bServer failed to start within the timeout period.*)",
        GAVE_UP,
    ),
    (r"^(?:[\w.-]+: )?(?:Error|error): (.+)", "Error"),
    (r"^(?:unknown|unrecognized|invalid) (?:option|argument)s?\b|: error: unrecognized arguments: ", "usage"),
    # cpython Lib/multiprocessing/process.py _bootstrap: "Process NAME:" then the child's traceback
    (r"^(Process [\w-]+):\s*$", "multiprocessing"),
    # a server's own word that it stopped: DJL Serving ModelServer.java ("Stopping model server.", and
    # "Model server stopped." in startAndWait's finally, after a start that failed too), LM Studio's
    # "[LM STUDIO SERVER] Server stopped". Not uvicorn's "Shutting down" or TGI's "Shutting down
    # shards": they print those on any signal, and uvicorn only after its start-up completed
    (r"(\b(?:[Mm]odel )?[Ss]erver stopped\b.*|\b[Ss]topping (?:the )?(?:model )?server\b.*)", STOPPED),
    (r"^((?:[\w.-]+@[\w.-]+:\S*\s?)?[$#])\s*$", PROMPT),  # the shell's prompt is back: the process ended
    # an error record: a logger's level word, logrus's `level=error`, Go log/slog's TextHandler
    # `level=ERROR` (slog.Level.String(), as Ollama logs: `level=ERROR source=routes.go:...`)
    (
        r"(?:^(?:ERROR|FATAL|CRITICAL|Error|Fatal)\b[\s:|]|\[(?:ERROR|Error|FATAL|Fatal|CRITICAL|E)\]"
        r"|\blevel=(?:error|fatal|ERROR|FATAL)\b|\"level\":\s*\"(?:ERROR|error|FATAL|fatal)\")\s*(.*)",
        LOGGED,
    ),
    (r"mpirun (?:detected that one or more processes exited with non-zero status|noticed that process)", "mpirun"),
    (r"undefined symbol: |cannot open shared object file|error while loading shared libraries", "loader"),
)
# a word each NATIVE_PATTERNS pattern needs (but the prompt's), for a cheap first look at a line
WORDS = (
    "terminate called",
    "what()",
    "panic",
    "fatal",
    "Fatal",
    "ault",
    "Abort",
    "abort",
    "Killed",
    "killed",
    "exception",
    "nstruction",
    "SIG",
    "ignal",
    "xit",
    "oom-killer",
    "Out of memory",
    "rror",
    "CUDA",
    "cuda",
    "NCCL",
    "nccl",
    "in use",
    "bind",
    "unknown",
    "unrecognized",
    "invalid",
    "Process ",
    "ERROR",
    "FATAL",
    "CRITICAL",
    "[E]",
    "level",
    "mpirun",
    "symbol",
    "shared ",
    "topped",
    "topping",
    "shutdown triggered",
    "unhealthy",
    "imed out waiting",
    "ailed to start within",
)
MESSAGE_CHARS = 300
# a record that says a process or thread of the server died of the traceback it prints (on its
# own line, or the next): SGLang's processes catch what ends them, log "<Name> hit an exception:
# <traceback>" and SIGQUIT their parent (V sglang 0.5.23 srt/managers/scheduler.py:6372,
# detokenizer_manager.py:566, tokenizer_manager.py:4043, data_parallel_controller.py:1011,
# multi_tokenizer_mixin.py:833; older tp_worker_overlap_thread.py's "TpModelWorkerClient hit an
# exception"); vLLM's logger.exception("WorkerProc hit an exception.") (V vllm 0.34.0
# v1/executor/multiproc_executor.py:1223), ("EngineCore encountered a fatal error.")
# (v1/engine/core.py:1759, :3089) and ("AsyncLLM output_handler failed.") (v1/engine/async_llm.py:957)
FATAL_RECORD = re.compile(
    r"\b[A-Z]\w* hit an exception\b|\bEngineCore encountered a fatal error\b|\bAsyncLLM output_handler failed\b"
)
# a request its workers must serve answered with success, in uvicorn's access log ('%s - "%s" %d',
# uvicorn/logging.py AccessFormatter: `127.0.0.1:5000 - "POST /generate HTTP/1.1" 200 OK`): a server
# that answers lives. A POST: a GET (`/health`, `/v1/models`) the HTTP layer answers on its own
ANSWERED = re.compile(r' - "POST /\S* HTTP/[\d.]+" 2\d\d\b')


@functools.cache
def native_patterns() -> tuple[tuple[re.Pattern[str], str], ...]:
    """Compiled when a line first holds one of their words (a short clean log needs none)."""
    return tuple((re.compile(p), kind) for p, kind in NATIVE_PATTERNS)


@functools.cache
def _gates() -> tuple[tuple[str, ...] | None, ...]:
    """For each pattern, words one of which every match of it holds (None: none found, always
    searched): a line with `cuda` in it (SGLang's every `Decode batch` line says `cuda graph:
    True`) is searched only by the patterns that could match it, not by all twenty."""
    from diagbench.logs.engines import required_literals

    gates = []
    for pattern, _ in NATIVE_PATTERNS:
        words = required_literals(pattern) if "(?i" not in pattern else None  # a scoped flag it does not read
        gates.append(tuple(w.decode("ascii") for w in words) if words else None)
    return tuple(gates)


@functools.cache
def _compiled(index: int) -> re.Pattern[str]:
    return re.compile(NATIVE_PATTERNS[index][0])


def native(text: str) -> tuple[str, str] | None:
    """The kind of native report a (stripped) line is, and what it says; None for most lines."""
    if not any(word in text for word in WORDS) and not text.rstrip().endswith(("$", "#")):
        return None  # most lines: no word any native report needs (a substring test, not 20 searches)
    for index, gate in enumerate(_gates()):
        if gate is not None and not any(word in text for word in gate):
            continue  # this pattern cannot match: none of the words its every match holds
        pattern, kind = _compiled(index), NATIVE_PATTERNS[index][1]
        found = pattern.search(text)
        if found is not None:
            said = found.group(1) if pattern.groups else text
            return kind, said.strip()[:MESSAGE_CHARS]
    return None
