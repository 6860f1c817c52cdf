"""The run's stop flag, in two steps, and the signals that raise it.

The first Ctrl-C, SIGTERM or SIGHUP starts an orderly stop: nothing more is launched,
every running attempt is torn down with its grace, recorded `cancelled`, and the run
is judged and written as usual. Each further one skips what is left of the grace
(SIGKILL now), but diagbench still waits until every tree is gone and every record,
verdict and table is written: it never exits leaving a server behind.
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
from collections.abc import Iterator

__all__ = ["INTERRUPTED", "STOP_SIGNALS", "Cancel", "stop_on_signals"]

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
INTERRUPTED = "the run was interrupted"


class Cancel:
    """A stop flag every attempt can select() on: set() wakes them all at once;
    hurry() cuts every teardown's grace short."""

    def __init__(self) -> None:
        self.event = threading.Event()
        self.urgent = threading.Event()  # skip the rest of the grace: SIGKILL now
        self.read_fd, self._write_fd = os.pipe()
        self.reason = ""
        self.interrupted = False  # the user asked for the stop (a signal, Ctrl-C)
        self._lock = threading.Lock()

    def set(self, reason: str = INTERRUPTED) -> None:
        with self._lock:
            if self.event.is_set():
                return
            self.reason = reason
            self.event.set()
        os.write(self._write_fd, b"x")

    def interrupt(self) -> None:
        """The user's stop: the first is orderly, each further one hurries."""
        if self.event.is_set():
            self.hurry()
        self.interrupted = True
        self.set(INTERRUPTED)

    def hurry(self) -> None:
        self.urgent.set()

    def is_set(self) -> bool:
        return self.event.is_set()

    def close(self) -> None:
        os.close(self.read_fd)
        os.close(self._write_fd)


@contextlib.contextmanager
def stop_on_signals(cancel: Cancel) -> Iterator[None]:
    """While the block runs, SIGINT, SIGTERM and SIGHUP interrupt `cancel` instead of
    killing diagbench. The handler only writes a byte to a pipe; a thread does the rest,
    so a signal landing inside a lock the main thread holds cannot deadlock it."""
    if threading.current_thread() is not threading.main_thread():
        yield  # signal handlers can only be set from the main thread
        return
    read_fd, write_fd = os.pipe()
    os.set_blocking(write_fd, False)

    def on_signal(_signum: int, _frame: object) -> None:
        with contextlib.suppress(OSError):  # a full pipe already holds enough wake-ups
            os.write(write_fd, b"s")

    def relay() -> None:
        while os.read(read_fd, 1) == b"s":
            cancel.interrupt()

    previous = {sig: signal.signal(sig, on_signal) for sig in STOP_SIGNALS}
    watcher = threading.Thread(target=relay, name="stop-signals", daemon=True)
    watcher.start()
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler if handler is not None else signal.SIG_DFL)
        os.write(write_fd, b"q")  # ends the relay
        watcher.join()
        os.close(read_fd)
        os.close(write_fd)
