"""The run's cancel flag: something every attempt can select() on."""

from __future__ import annotations

import os
import threading


class Cancel:
    """A cancel flag every attempt can select() on: set() wakes them all at once."""

    def __init__(self) -> None:
        self.event = threading.Event()
        self.read_fd, self._write_fd = os.pipe()

    def set(self) -> None:
        if not self.event.is_set():
            self.event.set()
            os.write(self._write_fd, b"x")

    def is_set(self) -> bool:
        return self.event.is_set()

    def close(self) -> None:
        os.close(self.read_fd)
        os.close(self._write_fd)
