"""Put first on PYTHONPATH by diagbench, only for a spec with `server.stacks: faulthandler`.

Every Python process the server starts (by exec, so each worker too) registers faulthandler
on SIGUSR2: all its threads' stacks go to $DIAGBENCH_FAULTHANDLER_DIR/<pid>.txt, which it
opens now (diagbench signals only processes whose file exists: SIGUSR2 would end any other).
Then the environment's own sitecustomize, if there is one, runs as it would have.
A process forked without exec shares its parent's file and is not asked.
"""

from __future__ import annotations

import faulthandler
import importlib.machinery
import importlib.util
import os
import signal
import sys

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
_chain()
