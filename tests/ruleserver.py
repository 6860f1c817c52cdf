"""A fake server whose failure is a known function of its own flags and environment: a real
process (tests and benchmarks/isolate.py launch it through diagbench isolate).

    ruleserver.py [--rule CONDS=>CLASS]... [--rate P [--seed FILE:N]] [--alternate FILE] [anything else]

CONDS is a comma-separated list, all of which must hold: `--flag` (given), `--opt=value`
(given with that value, in either form), `--opt>N` or `--opt<N` (given, a whole number above
or below N), `+word` (a word of the command line), `NAME=value` or `NAME>N`, `NAME<N` (in the
environment). The first rule that holds decides: CLASS is `capture` (CUDA graph capture
error), `oom`, `illegal` (an asynchronous CUDA error, reported at a later call),
`illegal-sharp` (the same error raised at the kernel's launch, as CUDA_LAUNCH_BLOCKING=1
makes it), `nccl` (torch's NCCL error), `nccl-info` (the same after NCCL's own INFO and WARN
lines, as NCCL_DEBUG=INFO prints them), `crash` (exit 3, no error line) or `hang`; `CLASS@P` fails with probability P
only. With `--rate P` a matching rule fails only with probability P (with `--seed FILE:N`,
drawn from a generator seeded by N and the launch's number, counted in FILE: the same
sequence in every test run); with `--alternate FILE` only on every other launch (a counter
in FILE).
Otherwise the server prints SGLang's ready line and waits to be stopped.
"""

from __future__ import annotations

import fcntl
import os
import random
import re
import signal
import sys
from pathlib import Path

READY = "The server is fired up and ready to roll!"
FAILURES = {
    "capture": "RuntimeError: CUDA error: operation not permitted when stream is capturing",
    "oom": "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB",
    # PyTorch's wording (c10/cuda/CUDAMiscFunctions.cpp): the error surfaces at the next synchronising call
    "illegal": (
        "Traceback (most recent call last):\n"
        '  File "server.py", line 88, in main\n'
        "    engine.warm_up()\n"
        '  File "engine.py", line 120, in warm_up\n'
        "    torch.cuda.synchronize()\n"
        "RuntimeError: CUDA error: an illegal memory access was encountered\n"
        "CUDA kernel errors might be asynchronously reported at some other API call, so the stacktrace below "
        "might be incorrect.\nFor debugging consider passing CUDA_LAUNCH_BLOCKING=1"
    ),
    # the same with CUDA_LAUNCH_BLOCKING=1: raised where the failing kernel was launched
    "illegal-sharp": (
        "Traceback (most recent call last):\n"
        '  File "server.py", line 88, in main\n'
        "    engine.warm_up()\n"
        '  File "engine.py", line 117, in warm_up\n'
        "    self.model(tokens)\n"
        '  File "kernels/paged_attention.py", line 42, in forward\n'
        "    paged_attention_kernel[grid](q, k_cache, v_cache, block_tables)\n"
        "RuntimeError: CUDA error: an illegal memory access was encountered"
    ),
    # torch's wording (ProcessGroupNCCL.cpp) and NCCL's own (libnccl.so.2: "[%d] %s:%d NCCL WARN %s")
    "nccl": (
        "torch.distributed.DistBackendError: NCCL error in: /pytorch/torch/csrc/distributed/c10d/"
        "ProcessGroupNCCL.cpp:3356, unhandled system error (run with NCCL_DEBUG=INFO for details), NCCL version 2.27.3"
    ),
    "nccl-info": (
        "node1:4122:4122 [0] NCCL INFO Bootstrap : Using eth0:10.0.0.1<0>\n"
        "node1:4122:4150 [0] NCCL INFO NET/Socket : Using [0]eth0:10.0.0.1<0>\n"
        "node1:4122:4150 [0] misc/socket.cc:484 NCCL WARN socketStartConnect: Connect to 10.0.0.2<43127> failed : "
        "Software caused connection abort\n"
        "node1:4122:4150 [0] NCCL INFO bootstrap.cc:77 -> 6\n"
        "torch.distributed.DistBackendError: NCCL error in: /pytorch/torch/csrc/distributed/c10d/"
        "ProcessGroupNCCL.cpp:3356, unhandled system error (run with NCCL_DEBUG=INFO for details), NCCL version 2.27.3"
    ),
}
_COMPARE = re.compile(r"^(.+?)([<>])(-?\d+)$")


def options(argv: list[str]) -> dict[str, list[str | None]]:
    """`--name value`, `--name=value` and bare flags, read the way the server's own parser would."""
    found: dict[str, list[str | None]] = {}
    i = 0
    while i < len(argv):
        word = argv[i]
        if word.startswith("--"):
            name, sep, value = word.partition("=")
            following = argv[i + 1] if i + 1 < len(argv) else None
            if not sep and following is not None and not following.startswith("--"):
                value, sep = following, "="
                i += 1
            found.setdefault(name, []).append(value if sep else None)
        i += 1
    return found


def holds(condition: str, argv: list[str], opts: dict[str, list[str | None]]) -> bool:
    if compared := _COMPARE.match(condition):
        name, sign, bound = compared[1], compared[2], int(compared[3])
        given = (opts.get(name) or [None])[-1] if name.startswith("--") else os.environ.get(name)
        try:
            number = int(given or "")
        except ValueError:
            return False
        return number > bound if sign == ">" else number < bound
    if condition.startswith("+"):
        return condition[1:] in argv
    if condition.startswith("--"):
        name, sep, value = condition.partition("=")
        return name in opts and (not sep or value in opts[name])
    name, _, value = condition.partition("=")
    return os.environ.get(name) == value


def decide(argv: list[str]) -> str | None:
    opts = options(argv)
    for rule in [r for r in opts.get("--rule", []) if r]:
        conditions, _, outcome = rule.partition("=>")
        if all(holds(c, argv, opts) for c in conditions.split(",") if c):
            outcome, _, chance = outcome.partition("@")
            if chance:
                return outcome if draw((opts.get("--seed") or [None])[0]) < float(chance) else None
            return outcome if fails_this_time(opts) else None
    return None


def fails_this_time(opts: dict[str, list[str | None]]) -> bool:
    if opts.get("--rate"):
        return draw(opts.get("--seed", [None])[0]) < float(opts["--rate"][0] or 1)
    if opts.get("--alternate"):
        path = Path(opts["--alternate"][0] or "")
        count = int(path.read_text() or 0) if path.exists() else 0
        path.write_text(str(count + 1))
        return count % 2 == 0
    return True


def draw(seed: str | None) -> float:
    """A random number: the launch's own, in a fixed sequence, where a seed is given."""
    if not seed:
        return random.random()
    path, _, number = seed.rpartition(":")
    with open(path, "a+") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)  # launches at once each take their own number
        handle.seek(0)
        count = len(handle.read())
        handle.write("x")
    return random.Random(f"{number}:{count}").random()


def main(argv: list[str]) -> int:
    print("Load weight begin.", flush=True)
    outcome = decide(argv)
    if outcome in FAILURES:
        print(FAILURES[outcome], file=sys.stderr, flush=True)
        return 1
    if outcome == "crash":
        return 3
    if outcome != "hang":
        print(READY, flush=True)
    signal.sigwait({signal.SIGTERM, signal.SIGINT})
    return 0


if __name__ == "__main__":
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM, signal.SIGINT})
    sys.exit(main(sys.argv[1:]))
