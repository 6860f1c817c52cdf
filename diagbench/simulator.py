"""A simulated SGLang server for the demo: no GPU, no model, real processes and real I/O.

It prints SGLang's startup wording (as SGLang's source writes it) and reacts
to the seed's factors the way the seed's stack did, with timings scaled to seconds:

  SGLANG_SM120_MMA_FLASHMLA=1|0   the custom MMA kernel or the stock one (no effect on capture)
  --enable-torch-compile           capture fails with the StreamCapture error, either kernel
  TORCHINDUCTOR_CUDAGRAPHS=1       Inductor's own graphs collide with the outer capture
  --cuda-graph-max-bs N            buckets up to N; N >= 256 runs out of simulated memory
  --disable-cuda-graph             no capture at all: it comes up, and decodes eagerly

POST /generate answers after a simulated decode: 2 ms a token with CUDA graphs, twice
that without them, a fifth less with torch.compile (divided by --speed), so a triage's
pricing load has real, repeatable differences to measure.

Its first line says it is a simulator, so nobody mistakes a demo log for a real one.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from diagbench.jsonreply import read_json, reply_json
from diagbench.jsonvalue import JSON

__all__ = [
    "ADVICE",
    "BANNER",
    "COMPILE_FACTOR",
    "EAGER_FACTOR",
    "INDUCTOR_REPLAY",
    "ISOLATION",
    "TOKEN_S",
    "buckets",
    "capture",
    "capture_error",
    "fail_capture",
    "main",
    "max_new_tokens",
    "serve_health",
    "token_seconds",
]

BANNER = "[diagbench simulator] simulated SGLang server: no GPU, no model; timings scaled to seconds"
ADVICE = (
    "Possible solutions:\n"
    "1. set --mem-fraction-static to a smaller value (e.g., 0.8 or 0.7)\n"
    "2. set --cuda-graph-max-bs to a smaller value (e.g., 16)\n"
    "3. disable torch compile by not using --enable-torch-compile\n"
    "4. disable cuda graph by --disable-cuda-graph. (Not recommonded. Huge perf loss)\n"
    "Open an issue on GitHub https://github.com/sgl-project/sglang/issues/new/choose \n"
)
ISOLATION = "CUDA error: dependency created on uncaptured work in another stream"
INDUCTOR_REPLAY = "Cannot prepare for replay during capturing stage."


def log(text: str, end: str = "\n") -> None:
    stamp = time.strftime("%Y-%m-%d %H:%M:%S")
    sys.stderr.write(f"[{stamp}] {text}{end}" if text and not text.startswith("\r") else text + end)
    sys.stderr.flush()


def buckets(max_bs: int) -> list[int]:
    sizes = [1, 2, 4, 8, 12, 16, 24, 32, 40, 48, 56, 64, 80, 96, 112, 128, 160, 192, 224, 256]
    return [b for b in sizes if b <= max_bs]


def capture_error(compile_on: bool) -> str | None:
    if not compile_on:
        return None
    if os.environ.get("TORCHINDUCTOR_CUDAGRAPHS") == "1":
        return f"RuntimeError: {INDUCTOR_REPLAY}"
    return f"torch.AcceleratorError: {ISOLATION}"


def fail_capture(error: str, bs: int) -> None:
    wrapped = error.split(": ", 1)[1]
    log("Scheduler hit an exception: Traceback (most recent call last):")
    sys.stderr.write(
        '  File "sglang/srt/model_executor/cuda_graph_runner.py", line 360, in __init__\n'
        "    self.capture()\n"
        f'  File "sglang/srt/model_executor/cuda_graph_runner.py", line 455, in capture\n'
        f"    ) = self.capture_one_batch_size(bs={bs}, forward=forward)\n"
        f"{error}\n\n"
        "During handling of the above exception, another exception occurred:\n\n"
        "Traceback (most recent call last):\n"
        '  File "sglang/srt/managers/scheduler.py", line 2890, in run_scheduler_process\n'
        "    scheduler = Scheduler(server_args, port_args, gpu_id, tp_rank, dp_rank)\n"
        f"Exception: Capture cuda graph failed: {wrapped}\n{ADVICE}\n"
    )
    sys.stderr.flush()
    time.sleep(0.05)
    log("Received sigquit from a child process. It usually means the child failed.")
    os.kill(os.getpid(), signal.SIGKILL)  # SGLang's kill_process_tree ends its own process too


TOKEN_S = 0.002  # one simulated decode step with CUDA graphs
EAGER_FACTOR = 2.0  # without graphs, each step launches its kernels one by one
COMPILE_FACTOR = 0.8  # torch.compile's fused kernels


def token_seconds(graphs: bool, compiled: bool, speed: float) -> float:
    return TOKEN_S * (1.0 if graphs else EAGER_FACTOR) * (COMPILE_FACTOR if compiled else 1.0) / speed


def max_new_tokens(body: JSON) -> int:
    """SGLang's /generate: `sampling_params.max_new_tokens`, else `max_new_tokens`, else 8."""
    if not isinstance(body, dict):
        raise ValueError("expected a JSON object")
    params = body.get("sampling_params") or {}
    value = params.get("max_new_tokens", body.get("max_new_tokens", 8)) if isinstance(params, dict) else None
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        raise ValueError(f"max_new_tokens: expected a number, got {value!r}")
    return int(value)


def serve_health(port: int, token_s: float = TOKEN_S) -> None:
    class Health(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            ok = self.path in ("/health", "/health_generate", "/get_model_info")
            self.send_response(200 if ok else 404)
            self.end_headers()
            self.wfile.write(b"{}" if ok else b"not found")

        def do_POST(self) -> None:
            if self.path != "/generate":
                self.send_response(404)
                self.end_headers()
                return
            try:
                tokens = max_new_tokens(read_json(self))
            except ValueError:
                self.send_response(400)
                self.end_headers()
                return
            time.sleep(tokens * token_s)
            reply_json(self, 200, {"text": " Paris" * tokens, "meta_info": {"completion_tokens": tokens}})

        def log_message(self, *args: object) -> None:
            return

    server = ThreadingHTTPServer(("127.0.0.1", port), Health)
    threading.Thread(target=server.serve_forever, daemon=True).start()


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="diagbench.simulator", description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--enable-torch-compile", action="store_true")
    parser.add_argument("--cuda-graph-max-bs", type=int, default=32)
    parser.add_argument("--torch-compile-max-bs", type=int, default=32)
    parser.add_argument("--disable-cuda-graph", action="store_true")
    parser.add_argument("--api-key", help="accepted and ignored, as SGLang's (for tests of redaction)")
    parser.add_argument("--speed", type=float, default=1.0, help="divide every delay by this")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)

    def pause(seconds: float) -> None:
        time.sleep(seconds / args.speed)

    log(BANNER)
    kernel = "MMA" if os.environ.get("SGLANG_SM120_MMA_FLASHMLA", "0") == "1" else "stock"
    log(f"[diagbench simulator] attention kernel: {kernel}")
    log("Load weight begin. avail mem=94.12 GB")
    pause(0.3)
    log("Load weight end. type=DeepseekV4ForCausalLM, dtype=torch.bfloat16, avail mem=61.70 GB, mem usage=32.42 GB.")
    sizes = buckets(args.cuda_graph_max_bs)
    if args.enable_torch_compile:
        for bs in buckets(min(args.torch_compile_max_bs, args.cuda_graph_max_bs)):
            log(f"AUTOTUNE addmm({bs}x2880, {bs}x4096, 4096x2880)")
            pause(0.03)
    if not args.disable_cuda_graph:
        capture(sizes, capture_error(args.enable_torch_compile), pause)
    if args.port:
        serve_health(args.port, token_seconds(not args.disable_cuda_graph, args.enable_torch_compile, args.speed))
    log(f"INFO:     Uvicorn running on http://127.0.0.1:{args.port} (Press CTRL+C to quit)")
    log("INFO:     Application startup complete.")
    pause(0.2)  # SGLang's warm-up request runs after uvicorn is up
    log("The server is fired up and ready to roll!")
    signal.sigwait({signal.SIGTERM, signal.SIGINT}) if hasattr(signal, "sigwait") else time.sleep(3600)
    return 0


def capture(sizes: list[int], error: str | None, pause: Callable[[float], None]) -> None:
    log("Capture cuda graph begin. This can take up to several minutes. avail mem=61.20 GB")
    log(f"Capture cuda graph bs {sizes}")
    for done, bs in enumerate(reversed(sizes)):
        bar = f"\rCapturing batches (bs={bs} avail_mem=61.{20 - done:02d} GB): {100 * done // len(sizes):3d}%|"
        sys.stderr.write(bar)
        sys.stderr.flush()
        pause(0.04)
        if bs >= 256:
            sys.stderr.write("\n")
            fail_capture(
                "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a "
                "total capacity of 94.97 GiB of which 1.12 GiB is free.",
                bs,
            )
        if error:
            sys.stderr.write("\n")
            fail_capture(error, bs)
    sys.stderr.write("\n")
    log("Capture cuda graph end. Time elapsed: 1.42 s. mem usage=0.61 GB. avail mem=60.59 GB.")


if __name__ == "__main__":
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM, signal.SIGINT})
    sys.exit(main())
