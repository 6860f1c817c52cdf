"""The reference server: load a tiny decoder, optionally torch.compile it, capture CUDA
graphs per batch size the way SGLang does, serve /health and /generate, and print the
ready line only after a real warm-up request has succeeded. Nothing here is simulated:
whatever fails, fails in torch, Triton or CUDA."""

from __future__ import annotations

import argparse
import json
import os
import sys
import threading
import time
import urllib.request
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import torch

from diagbench.jsonreply import read_json, reply_json
from diagbench.jsonvalue import JSON
from diagbench.refserver import hang, kernel
from diagbench.refserver.model import TinyDecoder

__all__ = [
    "CAPTURE_FAILED_ADVICE",
    "GIB",
    "READY_LINE",
    "Engine",
    "avail_gb",
    "batch_sizes",
    "build",
    "capture_or_explain",
    "describe_device",
    "main",
    "make_handler",
    "parse_args",
]

GIB = 1 << 30
CAPTURE_FAILED_ADVICE = (
    "Possible solutions:\n"
    "1. set --mem-fraction-static to a smaller value (e.g., 0.8 or 0.7)\n"
    "2. set --cuda-graph-max-bs to a smaller value (e.g., 16)\n"
    "3. disable torch compile by not using --enable-torch-compile\n"
    "4. disable CUDA graph by --disable-cuda-graph. (Not recommended. Huge performance loss)"
)
READY_LINE = "The server is fired up and ready to roll!"


def log(text: str) -> None:
    sys.stderr.write(f"[{time.strftime('%Y-%m-%d %H:%M:%S')}] {text}\n")
    sys.stderr.flush()


def avail_gb(device: torch.device) -> float:
    return torch.cuda.mem_get_info(device)[0] / GIB if device.type == "cuda" else 0.0


def batch_sizes(max_bs: int) -> list[int]:
    """SGLang's bucket shape: 1, 2, 4, 8, then steps of 8."""
    sizes = [b for b in (1, 2, 4) if b <= max_bs] + list(range(8, max_bs + 1, 8))
    return sizes or [1]


class Engine:
    """Decode steps through captured graphs when there are any, else straight through."""

    def __init__(self, model: TinyDecoder, device: torch.device, forward: Callable[..., torch.Tensor], max_bs: int):
        self.model, self.device, self.forward = model, device, forward
        self.tokens = torch.zeros(max_bs, dtype=torch.long, device=device)
        self.pos = torch.zeros(max_bs, dtype=torch.long, device=device)
        self.graphs: dict[int, tuple[torch.cuda.CUDAGraph, torch.Tensor]] = {}
        self.lock = threading.Lock()

    def warm(self, bs: int) -> None:
        side = torch.cuda.Stream(self.device)
        side.wait_stream(torch.cuda.current_stream(self.device))
        with torch.cuda.stream(side):
            for _ in range(2):
                self.forward(self.tokens[:bs], self.pos[:bs])
        torch.cuda.current_stream(self.device).wait_stream(side)
        torch.cuda.synchronize(self.device)

    def capture(self, sizes: list[int], warmup: str, hang_mode: str | None = None) -> None:
        start = time.perf_counter()
        log(f"Capture cuda graph begin. This can take up to several minutes. avail mem={avail_gb(self.device):.2f} GB")
        log(f"Capture cuda graph bs {sizes}")
        if warmup == "first":
            self.warm(min(sizes))
        pool = torch.cuda.graph_pool_handle()
        stream = torch.cuda.Stream(self.device)
        for done, bs in enumerate(reversed(sizes)):
            sys.stderr.write(
                f"\rCapturing batches (bs={bs} avail_mem={avail_gb(self.device):.2f} GB): "
                f"{100 * done // len(sizes):3d}%|"
            )
            sys.stderr.flush()
            if warmup == "every":
                self.warm(bs)
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph, pool=pool, stream=stream):
                out = self.forward(self.tokens[:bs], self.pos[:bs])
                if hang_mode and done == min(1, len(sizes) - 1):  # a host-side wait while the capture is open
                    hang.hang(hang_mode, bs)
            self.graphs[bs] = (graph, out)
        torch.cuda.synchronize(self.device)
        sys.stderr.write("\n")
        log(
            f"Capture cuda graph end. Time elapsed: {time.perf_counter() - start:.2f} s. "
            f"avail mem={avail_gb(self.device):.2f} GB."
        )

    def step(self, tokens: list[int], positions: list[int]) -> list[int]:
        n = len(tokens)
        with self.lock, torch.inference_mode():
            self.tokens[:n] = torch.tensor(tokens, device=self.device)
            self.pos[:n] = torch.tensor(positions, device=self.device)
            fit = min((bs for bs in self.graphs if bs >= n), default=None)
            if fit is not None:
                graph, out = self.graphs[fit]
                graph.replay()
                logits = out[:n]
            else:
                logits = self.forward(self.tokens[:n], self.pos[:n])
            return logits.argmax(-1).tolist()

    def generate(self, ids: list[int], max_new_tokens: int) -> list[int]:
        ids = [i % self.model.embed.num_embeddings for i in ids][: self.model.ctx - max_new_tokens] or [0]
        out: list[int] = []
        token = ids[0]
        for pos in range(len(ids) + max_new_tokens - 1):
            nxt = self.step([token], [pos])[0]
            if pos + 1 < len(ids):
                token = ids[pos + 1]
            else:
                out.append(nxt)
                token = nxt
        return out


def make_handler(engine: Engine, ready: threading.Event) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            if self.path in ("/health", "/health_generate"):
                self._reply(200 if ready.is_set() else 503, {"ready": ready.is_set()})
            else:
                self._reply(404, {"error": "not found"})

        def do_POST(self) -> None:
            if self.path != "/generate":
                self._reply(404, {"error": "not found"})
                return
            try:
                body: Any = read_json(self)  # a wrong shape is a TypeError or ValueError: answered 400
                ids = body.get("input_ids") or list(str(body.get("text", "hello")).encode())
                tokens = engine.generate(ids, int(body.get("max_new_tokens", 8)))
            except (ValueError, TypeError) as exc:
                self._reply(400, {"error": str(exc)})
                return
            self._reply(200, {"output_ids": tokens})

        def _reply(self, code: int, data: JSON) -> None:
            reply_json(self, code, data)

        def log_message(self, *args: object) -> None:
            return

    return Handler


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m diagbench.refserver", description=__doc__.splitlines()[0])
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=30000)
    p.add_argument("--enable-torch-compile", action="store_true")
    p.add_argument("--torch-compile-max-bs", type=int, default=32)
    p.add_argument("--cuda-graph-max-bs", type=int, default=32)
    p.add_argument("--disable-cuda-graph", action="store_true")
    p.add_argument(
        "--warmup",
        choices=("every", "first", "none"),
        default="every",
        help="warm up every batch size before its capture, only the smallest, or none",
    )
    p.add_argument("--hidden", type=int, default=512)
    p.add_argument("--layers", type=int, default=4)
    p.add_argument("--heads", type=int, default=8)
    p.add_argument("--vocab", type=int, default=8192)
    p.add_argument("--context", type=int, default=64)
    p.add_argument("--device", default="auto", help="auto, cuda or cpu")
    p.add_argument(
        "--hang-in-capture",
        choices=hang.MODES,
        default=os.environ.get("REFSERVER_HANG_IN_CAPTURE") or None,  # an env axis can set it too
        help="hang on the host inside the second batch size's capture: on a queue, or joining a helper process",
    )
    return p.parse_args(argv)


def describe_device(device: torch.device) -> str:
    """`cuda:0 (NVIDIA H200, GPU-8f3c...), CUDA_VISIBLE_DEVICES=3`: which GPU this process got."""
    visible = f"CUDA_VISIBLE_DEVICES={os.environ.get('CUDA_VISIBLE_DEVICES', '<unset>')}"
    if device.type != "cuda":
        return f"{device} ({visible})"
    index = torch.cuda.current_device() if device.index is None else device.index
    props = torch.cuda.get_device_properties(index)
    uuid = getattr(props, "uuid", None)  # torch >= 2.2
    named = f"{props.name}, GPU-{uuid}" if uuid else props.name
    return f"cuda:{index} ({named}) of {torch.cuda.device_count()} visible, {visible}"


def build(args: argparse.Namespace) -> tuple[Engine, torch.device]:
    device = torch.device(
        "cuda"
        if args.device == "auto" and torch.cuda.is_available()
        else ("cpu" if args.device == "auto" else args.device)
    )
    dtype = torch.bfloat16 if device.type == "cuda" else torch.float32
    triton_version = getattr(kernel.triton, "__version__", None)
    log(f"refserver: device={describe_device(device)}, torch {torch.__version__}, triton {triton_version}")
    want_kernel = os.environ.get("REFSERVER_TRITON_KERNEL", "0") == "1"
    custom = want_kernel and kernel.available()
    if want_kernel and not custom:
        log("refserver: REFSERVER_TRITON_KERNEL=1 but Triton on CUDA is unavailable here; using torch ops")
    log(f"refserver: MLP activation: {'custom Triton kernel (autotuned per shape)' if custom else 'torch silu * mul'}")
    log(f"Load weight begin. avail mem={avail_gb(device):.2f} GB")
    before = avail_gb(device)
    torch.manual_seed(0)
    max_bs = max(args.cuda_graph_max_bs, 1)
    model = TinyDecoder(args.vocab, args.hidden, args.layers, args.heads, args.context, max_bs, custom)
    model = model.to(device=device, dtype=dtype).eval()
    log(
        f"Load weight end. type=TinyDecoder, dtype={dtype}, avail mem={avail_gb(device):.2f} GB, "
        f"mem usage={before - avail_gb(device):.2f} GB."
    )
    forward: Callable[..., torch.Tensor] = model
    if args.enable_torch_compile:
        graphs = os.environ.get("TORCHINDUCTOR_CUDAGRAPHS", "unset")
        log(
            f"refserver: torch.compile enabled (mode=default, dynamic=False, max bs {args.torch_compile_max_bs}); "
            f"TORCHINDUCTOR_CUDAGRAPHS={graphs}"
        )
        compiled = torch.compile(model, dynamic=False)
        limit = args.torch_compile_max_bs

        def forward(tokens: torch.Tensor, pos: torch.Tensor) -> torch.Tensor:
            return compiled(tokens, pos) if tokens.shape[0] <= limit else model(tokens, pos)

    return Engine(model, device, forward, max_bs), device


def capture_or_explain(engine: Engine, device: torch.device, args: argparse.Namespace) -> None:
    if args.hang_in_capture and device.type != "cuda":  # the same wait, where the capture would be
        log("refserver: no GPU: --hang-in-capture hangs where the capture would begin")
        hang.hang(args.hang_in_capture, 1)
    if args.disable_cuda_graph or device.type != "cuda":
        log("refserver: CUDA graphs disabled" + ("" if device.type == "cuda" else " (no GPU)"))
        return
    with torch.inference_mode():
        try:
            engine.capture(batch_sizes(args.cuda_graph_max_bs), args.warmup, args.hang_in_capture)
        except RuntimeError as exc:  # SGLang's CudaGraphRunner wraps capture the same way
            sys.stderr.write("\n")
            raise Exception(f"Capture cuda graph failed: {exc}\n{CAPTURE_FAILED_ADVICE}") from exc


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    engine, device = build(args)
    capture_or_explain(engine, device, args)
    ready = threading.Event()
    httpd = ThreadingHTTPServer((args.host, args.port), make_handler(engine, ready))
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    log(f"refserver: serving on http://{args.host}:{httpd.server_address[1]}")
    request = urllib.request.Request(
        f"http://{args.host}:{httpd.server_address[1]}/generate",
        method="POST",
        data=json.dumps({"text": "warm up", "max_new_tokens": 4}).encode(),
        headers={"Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=120) as response:
        tokens = json.loads(response.read())["output_ids"]
    log(f"refserver: warm-up request POST /generate -> {response.status} ({len(tokens)} tokens)")
    ready.set()
    log(READY_LINE)
    threading.Event().wait()
    return 0
