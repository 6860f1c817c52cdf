"""Real host-side hangs for the reference server's `--hang-in-capture` (no torch needed here,
so the same code runs on a CPU-only machine: `python -m diagbench.refserver.hang MODE`).

Each mode blocks the calling thread for good, on the host, the way a real server deadlocks
while a CUDA graph capture is open; never a GPU kernel that spins (the GPU may be shared):
- `queue`: the capture waits for a metadata worker's result; the worker waits for a
  request on a queue nobody fills (SGLang's scheduler/tokenizer hand-offs look like this);
- `join`: the capture waits for a helper process that never finishes (it reads a pipe
  whose writer never writes), as a compile worker that hung would.
"""

from __future__ import annotations

import os
import queue
import subprocess
import sys
import threading
import time

__all__ = ["MODES", "hang", "wait_for_helper", "wait_for_metadata"]

MODES = ("queue", "join")


def _log(text: str) -> None:
    sys.stderr.write(f"[{time.strftime('%Y-%m-%d %H:%M:%S')}] {text}\n")
    sys.stderr.flush()


def _metadata_worker(requests: queue.Queue[int], results: queue.Queue[int]) -> None:
    """Waits for a batch that is never sent, so its result never comes."""
    bs = requests.get()
    results.put(bs)


def wait_for_metadata(bs: int) -> int:
    """`queue`: the capturing thread blocks on the worker's result queue."""
    requests: queue.Queue[int] = queue.Queue()
    results: queue.Queue[int] = queue.Queue()
    worker = threading.Thread(target=_metadata_worker, args=(requests, results), name="metadata-worker", daemon=True)
    worker.start()
    _log(f"refserver: capture bs={bs} waits for the metadata worker")
    return results.get()  # the request for bs was never put: the worker waits, and so do we


def wait_for_helper(bs: int) -> int:
    """`join`: the capturing thread waits for a helper process that never exits."""
    reader, writer = os.pipe()
    code = "import os, sys; os.read(int(sys.argv[1]), 1)"  # blocks: the writer stays open, silent
    helper = subprocess.Popen([sys.executable, "-c", code, str(reader)], pass_fds=(reader,))
    os.close(reader)
    _log(f"refserver: capture bs={bs} waits for helper process {helper.pid}")
    try:
        return helper.wait()
    finally:
        os.close(writer)


def hang(mode: str, bs: int) -> int:
    if mode == "queue":
        return wait_for_metadata(bs)
    if mode == "join":
        return wait_for_helper(bs)
    raise ValueError(f"unknown hang mode {mode!r} (one of {', '.join(MODES)})")


if __name__ == "__main__":
    _log("Capture cuda graph begin (CPU stand-in: no graph is captured here)")
    hang(sys.argv[1], 8)
