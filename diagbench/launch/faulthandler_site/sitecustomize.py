"""Put first on PYTHONPATH by diagbench, only for a spec with `server.stacks: faulthandler`
or `server.stacks: flight-recorder`.

Every Python process the server starts (by exec, so each worker too) registers faulthandler
on SIGUSR2: all its threads' stacks go to $DIAGBENCH_FAULTHANDLER_DIR/<pid>.txt, which it
opens now (diagbench signals only processes whose file exists: SIGUSR2 would end any other).
Then the environment's own sitecustomize, if there is one, runs as it would have.
A process forked without exec shares its parent's file and is not asked.

With $DIAGBENCH_FLIGHT_DIR (flight-recorder), a daemon thread `diagbench-flight-recorder`
polls for $DIAGBENCH_FLIGHT_DIR/dump-now; when diagbench writes it (before it takes stacks),
a process with torch.distributed initialised writes PyTorch's flight-recorder dump
(`torch._C._distributed_c10d._dump_fr_trace`, or `_dump_nccl_trace` of older torch) to
rank_<its rank> there, once. torch is never imported here: only looked up once the program did.
"""

from __future__ import annotations

import faulthandler
import importlib.machinery
import importlib.util
import os
import signal
import sys
import threading
import time

__all__: list[str] = []


def _register() -> None:
    folder = os.environ.get("DIAGBENCH_FAULTHANDLER_DIR")
    if not folder:
        return
    try:
        handle = open(os.path.join(folder, f"{os.getpid()}.txt"), "a", buffering=1, encoding="utf-8")  # noqa: SIM115  # open for the process's life
        faulthandler.register(signal.SIGUSR2, file=handle, all_threads=True, chain=False)
    except (OSError, AttributeError, ValueError):  # no such folder, no SIGUSR2 on this platform
        return


def _flight() -> None:
    folder = os.environ.get("DIAGBENCH_FLIGHT_DIR")
    if folder:
        threading.Thread(target=_flight_wait, args=(folder,), name="diagbench-flight-recorder", daemon=True).start()


def _flight_wait(folder: str) -> None:
    trigger = os.path.join(folder, "dump-now")
    while not os.path.exists(trigger):
        time.sleep(0.2)
    dist = sys.modules.get("torch.distributed")
    try:
        if dist is None or not dist.is_initialized():
            return
        rank = dist.get_rank()
        c10d = sys.modules["torch._C._distributed_c10d"]
        dump = getattr(c10d, "_dump_fr_trace", None) or c10d._dump_nccl_trace
        try:
            data = dump(includeCollectives=True, includeStackTraces=False, onlyActive=False)
        except TypeError:  # an older signature
            data = dump()
        tmp = os.path.join(folder, f".rank_{rank}.{os.getpid()}.tmp")
        with open(tmp, "wb") as handle:
            handle.write(data)
        os.replace(tmp, os.path.join(folder, f"rank_{rank}"))
    except Exception:  # noqa: BLE001  # whatever torch says, the server runs on as it would
        return


def _chain() -> None:
    """Run the sitecustomize this one shadows."""
    here = os.path.dirname(os.path.abspath(__file__))
    rest = [p for p in sys.path if os.path.abspath(p or ".") != here]
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", rest)
    if spec is None or spec.loader is None:
        return
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)


_register()
_flight()
_chain()
