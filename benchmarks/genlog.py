"""Generate a realistic SGLang/vLLM-style server log of a given size (for the scan benchmark).

The mix: timestamped INFO lines from both servers, tqdm progress bars ending in "\\r",
Inductor autotune chatter, per-rank prefixes, a little binary junk, and one capture
failure at the very end, so a classifier has to read the whole file to decide.
"""

from __future__ import annotations

import random
import sys
from pathlib import Path

LINES = [
    b"[2025-05-12 08:03:12 TP%d] Decode batch. #running-req: 17, #token: 40960, token usage: 0.21, cuda graph: True, gen throughput (token/s): 1843.22, #queue-req: 0",
    b"[2025-05-12 08:03:12 TP%d] Prefill batch. #new-seq: 1, #new-token: 512, #cached-token: 0, token usage: 0.20, #running-req: 16, #queue-req: 0",
    b"(EngineCore_0 pid=2817) INFO 06-03 11:02:10 [loggers.py:123] Engine 000: Avg prompt throughput: 1024.5 tokens/s, Avg generation throughput: 389.2 tokens/s, Running: 12 reqs",
    b'(APIServer pid=2701) INFO:     127.0.0.1:51234 - "POST /v1/completions HTTP/1.1" 200 OK',
    b"[rank%d]:[W506 08:00:00.000000000 ProcessGroupNCCL.cpp:4454] Warning: Waiting for pending NCCL work to finish before starting graph capture.",
    b"AUTOTUNE addmm(32x2880, 32x4096, 4096x2880)",
    b"  triton_mm_21 0.0205 ms 100.0% ACC_TYPE='tl.float32', ALLOW_TF32=False, BLOCK_K=128, BLOCK_M=32, BLOCK_N=64",
    b"[2025-05-12 08:03:12 TP%d] Load weight end. type=DeepseekV3ForCausalLM, dtype=torch.bfloat16, avail mem=35.10 GB, mem usage=43.40 GB.",
    b"INFO 06-03 11:02:20 [backends.py:508] Dynamo bytecode transform time: 9.81 s",
]
PROGRESS = b"Capturing batches (bs=%d avail_mem=59.10 GB):  %d%%|#####     | 12/23 [00:05<00:04,  2.4it/s]\r"
FAILURE = (
    b"[2025-05-12 08:03:14 TP0] Scheduler hit an exception: Traceback (most recent call last):\n"
    b"RuntimeError: CUDA error: out of memory\n"
    b"Exception: Capture cuda graph failed: CUDA error: out of memory\n"
)


def generate(path: Path, megabytes: int, seed: int = 1) -> None:
    rng = random.Random(seed)
    target = megabytes << 20
    with path.open("wb") as out:
        written = 0
        while written < target - len(FAILURE):
            block = bytearray()
            for _ in range(2000):
                pick = rng.random()
                if pick < 0.05:
                    block += PROGRESS % (rng.choice((1, 8, 32, 64, 160)), rng.randrange(100))
                elif pick < 0.0502:
                    block += b"\xff\xfe junk \xc3\x28\n"
                else:
                    line = rng.choice(LINES)
                    block += (line % rng.randrange(8) if b"%d" in line else line) + b"\n"
            out.write(block)
            written += len(block)
        out.write(FAILURE)


if __name__ == "__main__":
    generate(Path(sys.argv[1]), int(sys.argv[2]))
