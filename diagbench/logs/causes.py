"""One table from an error to its failure class, built from each class's definition.

Every entry matches an error's type (a Python exception's qualified name, or a native
report's kind) and/or its message, and cites the library source that raises it. The
root-cause reader (rootcause.py) asks `class_of` about each error it finds; the first entry
that matches names the class. An error no entry names is class `other`.

Sources are cited as `S <library> <file>`: what raises the exception or prints the line.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass

__all__ = ["CAPTURE_FRAME", "FRAMES", "TABLE", "Entry", "class_of", "class_of_frame"]


@dataclass(frozen=True)
class Entry:
    failure_class: str
    type: str  # a regex over the error's type ("" matches any)
    message: str  # a regex searched in "type: message" ("" matches any)
    source: str


TABLE = (
    # -- killed / crashed by a signal: the shell's, the kernel's and Python's reports. `segfault` is
    # SIGSEGV (and Windows' access violation); SIGABRT, SIGFPE, SIGILL, SIGBUS are `other`, as the
    # generic pack's shell_signal has them -----------------------------------------------------------
    Entry(
        "segfault",
        "signal|Fatal Python error|shell|OSError|Error|Rust panic|Go panic|Go fatal error",
        r"SIGSEGV|[Ss]egmentation fault|access violation|exitcode\s*:\s*-11\b|[Ss]ignal \(?11\b"
        r"|exit(?:ed with)? code (?:139|-11)\b",
        "S cpython Python/faulthandler.c (Fatal Python error: Segmentation fault); bash jobs.c "
        "(Segmentation fault (core dumped)); torch/distributed/elastic/multiprocessing/api.py (Signal 11 (SIGSEGV)); "
        "docker compose (exited with code 139 = 128 + SIGSEGV); tritonserver (Signal (11) received.); "
        "cpython Modules/_ctypes/callproc.c (OSError: exception: access violation, Windows)",
    ),
    Entry(
        "killed",
        "signal|shell",
        r"SIGKILL|\b[Kk]illed\b|[Ss]ignal \(?9\b|Signals\.SIGKILL"
        r"|exit(?:ed with)? code (?:137|-9)\b|exitcode\s*:\s*-9\b",
        "S bash jobs.c (Killed); torch/distributed/elastic/multiprocessing/api.py (Signal 9 (SIGKILL)); "
        "cpython Lib/multiprocessing/process.py (exitcode -9); docker compose (exited with code 137 = 128 + SIGKILL); "
        "TGI launcher/src/main.rs (Shard process was signaled to shutdown with signal 9); Go os/exec_posix.go "
        "(signal: killed)",
    ),
    # -- a child killed or crashed, as the error that reports it words it, whatever its type ----------
    Entry(
        "killed",
        "",
        r"terminated with signal SIGKILL\b|died with <Signals\.SIGKILL: 9>|\bexit (?:code|status) (?:137|-9)\b",
        "S torch torch/multiprocessing/spawn.py (ProcessExitedException: process N terminated with signal SIGKILL); "
        "cpython Lib/subprocess.py CalledProcessError.__str__ (Command '...' died with <Signals.SIGKILL: 9>.); "
        "kubectl exec (command terminated with exit code 137); Go os.ProcessState (exit status 137: a shell's "
        "child killed, 128 + SIGKILL)",
    ),
    Entry(
        "segfault",
        "",
        r"terminated with signal SIGSEGV\b|died with <Signals\.SIGSEGV: 11>|\bexit (?:code|status) (?:139|-11)\b",
        "S the same reports of a child ended by SIGSEGV (128 + 11 = 139)",
    ),
    # -- the GPU's own errors: CUDA runtime (cuda_runtime_api.h cudaError_t strings) -----------------
    Entry(
        "illegal_memory_access",
        "",
        r"an illegal memory access was encountered|cudaErrorIllegalAddress|CUDA_ERROR_ILLEGAL_ADDRESS"
        r"|misaligned address|cudaErrorMisalignedAddress",
        "S CUDA runtime cudaGetErrorString(cudaErrorIllegalAddress=700, cudaErrorMisalignedAddress=716); "
        "torch c10/cuda/CUDAException.h (CUDA error: ...)",
    ),
    Entry(
        "oom",
        "",
        r"OutOfMemoryError|MemoryError|[Oo]ut of memory|cudaErrorMemoryAllocation|CUDA_ERROR_OUT_OF_MEMORY"
        r"|CUBLAS_STATUS_ALLOC_FAILED|cudaMalloc\w* failed|[Ii]nsufficient (?:GPU |device )?memory"
        r"|Cannot allocate memory|std::bad_alloc|would exceed allowed memory",
        "S torch c10/cuda/CUDACachingAllocator.cpp (torch.OutOfMemoryError: CUDA out of memory. "
        "Tried to allocate; Allocation on device would exceed allowed memory); CUDA runtime "
        "(cudaErrorMemoryAllocation=2: out of memory); torch aten/src/ATen/cuda/CUDABlas.cpp "
        "(CUBLAS_STATUS_ALLOC_FAILED); "
        "cpython MemoryError; libstdc++ std::bad_alloc",
    ),
    Entry(
        "oom",
        "",
        r"No available memory for the cache blocks|[Nn]ot enough (?:GPU |KV cache )?memory|No enough gpu memory for ",
        "S vllm v1/core/kv_cache_utils.py (No available memory for the cache blocks); sglang "
        "mem_cache (Not enough memory); lmdeploy pytorch/engine/executor/base.py (No enough gpu memory for kv cache)",
    ),
    # -- NCCL: torch's ProcessGroupNCCL and NCCL's own ncclResult_t strings ----------------------------
    Entry(
        "nccl",
        r"torch\.distributed\.DistBackendError|DistBackendError|NCCL",
        "",
        "S torch torch/csrc/distributed/c10d/NCCLUtils.hpp (C10D_NCCL_CHECK raises DistBackendError)",
    ),
    Entry(
        "nccl",
        "",
        r"NCCL error|ncclInternalError|ncclUnhandledCudaError|ncclSystemError|ncclInvalidUsage"
        r"|ncclRemoteError|ncclInvalidArgument|NCCL WARN|ProcessGroupNCCL",
        "S nccl src/misc/utils.cc ncclGetErrorString; torch c10d/NCCLUtils.hpp (NCCL error in: ..., "
        "unhandled cuda error / internal error)",
    ),
    Entry(
        "nccl",
        r"(?:torch\.distributed\.[\w.]*)?(?:Rendezvous(?:Timeout|Closed|Connection|State)Error|DistNetworkError"
        r"|DistStoreError)",
        "",
        "S torch torch/distributed/elastic/rendezvous/api.py (RendezvousTimeoutError, RendezvousClosedError, "
        "RendezvousConnectionError, RendezvousStateError); torch/csrc/distributed/c10d (DistNetworkError, "
        "DistStoreError): the process group's start-up, as the nccl pack's rendezvous line has it",
    ),
    # -- compilers ------------------------------------------------------------------------------------
    Entry(
        "triton",
        r"triton\.[\w.]*|CompilationError|PTXASError|OutOfResources",
        "",
        "S triton python/triton/compiler/errors.py (CompilationError, CompileTimeAssertionFailure); "
        "triton/runtime/errors.py (OutOfResources, PTXASError)",
    ),
    Entry(
        "triton",
        "",
        r"ptxas (?:fatal|error)|/ptxas .*returned non-zero exit status|PTXASError|triton\.compiler\.errors"
        r"|out of resource: shared memory",
        "S triton python/triton/backends/nvidia/compiler.py make_cubin (runs ptxas, raises PTXASError); "
        "triton/runtime/errors.py",
    ),
    Entry(
        "torch_compile",
        r"torch\._dynamo\.exc\.\w+|torch\._inductor\.exc\.\w+|BackendCompilerFailed|InductorError"
        r"|TorchRuntimeError|torch\._dynamo\.\w+",
        "",
        "S torch torch/_dynamo/exc.py (BackendCompilerFailed, Unsupported, TorchRuntimeError, "
        "InternalTorchDynamoError); "
        "torch/_inductor/exc.py (InductorError)",
    ),
    # -- imports and shared libraries -----------------------------------------------------------------
    Entry(
        "import_error",
        r"ImportError|ModuleNotFoundError",
        "",
        "S cpython Python/import.c (ModuleNotFoundError: No module named; ImportError: cannot import name, "
        "undefined symbol, cannot open shared object file from dlopen)",
    ),
    Entry(
        "import_error",
        "",
        r"undefined symbol: |cannot open shared object file|error while loading shared libraries"
        r"|No module named ",
        "S glibc dlfcn/dlerror.c, elf/dl-load.c (cannot open shared object file), elf/dl-lookup.c (undefined symbol)",
    ),
    # -- the port ---------------------------------------------------------------------------------
    Entry(
        "port_in_use",
        "",
        r"[Aa]ddress already in use|EADDRINUSE|(?:couldn't|could not|[Ff]ailed to|[Uu]nable to) bind\b"
        r"|[Ee]rrno 98\b|[Ee]rrno 48\b|Only one usage of each socket address"
        r"|\blisten (?:tcp|udp)\d? \S+: bind: (?!permission denied|cannot assign requested address"
        r"|An attempt was made to access a socket)",
        "S glibc strerror(EADDRINUSE=98: Address already in use); Go net (bind: address already in use); "
        "Rust std::io::ErrorKind::AddrInUse; Windows WSAEADDRINUSE; llama.cpp tools/server/server.cpp "
        "(couldn't bind HTTP server socket); Go net OpError (listen tcp ADDR: bind: <the OS's words>, which may be "
        "localized: all but EACCES's and EADDRNOTAVAIL's, which say another reason than a port in use)",
    ),
    # -- CUDA graph capture: last, as it wraps the errors above ("Capture cuda graph failed: CUDA error:
    # out of memory" is an OOM under a capture) ------------------------------------------------------
    Entry(
        "cuda_graph_capture",
        "",
        r"cudaErrorStreamCapture\w+|operation not permitted when stream is capturing"
        r"|operation failed due to a previous error during capture|CUDA graph capture failed"
        r"|Capture cuda graph failed",
        "S CUDA runtime cudaGetErrorString(cudaErrorStreamCaptureUnsupported=900..cudaErrorStreamCaptureImplicit); "
        "torch c10/cuda/CUDAGraph.cpp; sglang cuda_graph_runner.py (Capture cuda graph failed)",
    ),
    # -- out of memory: torch's caching allocator, CUDA, cuBLAS, the host ---------------------------
    # -- other GPU errors the CUDA runtime reports: a failure, of no finer class ------------------------
    Entry(
        "other",
        "",
        r"CUDA error|cudaError\w+|CUDA_ERROR_\w+|CUDA driver error",
        "S torch c10/cuda/CUDAException.h (CUDA error: ...); CUDA driver API cuGetErrorName",
    ),
)


# A traceback cut before its exception line: the package its last frame is in names the class.
FRAMES = (
    Entry(
        "torch_compile", "", r"torch/_(?:dynamo|inductor)/", "S torch torch/_dynamo, torch/_inductor (torch.compile)"
    ),
    Entry("triton", "", r"triton/(?:compiler|backends|runtime)/", "S triton python/triton/compiler, backends, runtime"),
)


# A traceback that passes through CUDA graph capture: what it raised broke a capture, the wrapper's
# class (as SGLang's "Capture cuda graph failed: {e}" words it) when the error has no finer one.
# S torch torch/cuda/graphs.py (class graph: __enter__ calls capture_begin, __exit__ capture_end);
# vllm 0.34.0 v1/worker/gpu/model_runner.py:1141 capture_model, v1/worker/gpu/cudagraph_utils.py:456
# capture; sglang 0.5.23 srt/model_executor/model_runner_components/cuda_graph_setup.py:391
# capture_cuda_graphs, runner/decode_cuda_graph_runner.py:1249 capture, :1368 capture_one_shape
CAPTURE_FRAME = re.compile(
    r'(?:graph\w*\.py", line \d+, in capture\w*'
    r'|model_runner\.py", line \d+, in capture_model\b'
    r'|torch/cuda/graphs\.py", line \d+, in (?:capture_begin|capture_end|__enter__|__exit__)\b)'
)


@dataclass(frozen=True)
class _Compiled:
    entry: Entry
    type: re.Pattern[str] | None
    message: re.Pattern[str] | None


@functools.cache
def _compiled() -> tuple[_Compiled, ...]:
    """The table's regexes, compiled when the first error is looked up (not at import)."""
    return tuple(
        _Compiled(e, re.compile(rf"(?:{e.type})\Z") if e.type else None, re.compile(e.message) if e.message else None)
        for e in TABLE
    )


def class_of(kind: str, message: str) -> tuple[str, Entry | None]:
    """The class of an error of type `kind` saying `message`, and the entry that names it."""
    text = f"{kind}: {message}"
    for c in _compiled():
        if c.type is not None and not c.type.match(kind):
            continue
        if c.message is not None and not c.message.search(text):
            continue
        return c.entry.failure_class, c.entry
    return "other", None


def class_of_frame(path: str) -> str:
    """The class the package of a traceback's last frame names, or `other`."""
    for entry in FRAMES:
        if re.search(entry.message, path):
            return entry.failure_class
    return "other"
