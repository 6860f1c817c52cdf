"""HTTP readiness: GET a path until it answers 200. Never raises into the runner."""

from __future__ import annotations

import os
import threading
from collections.abc import Callable

import httpx

FIRST_DELAY_S = 0.05
MAX_DELAY_S = 0.5
REQUEST_TIMEOUT_S = 2.0


class HttpProbe(threading.Thread):
    """Polls `url` in the background; writes one byte to `notify_fd` on the first 200.

    HTTP has no way to announce readiness, so this is the one place that polls; the
    interval starts at 50 ms and backs off to 500 ms. The client is injected for tests.
    """

    def __init__(self, url: str, notify_fd: int, client: Callable[[], httpx.Client] | None = None):
        super().__init__(name=f"probe {url}", daemon=True)
        self.url, self.notify_fd = url, notify_fd
        # a local probe must not go through the user's HTTP_PROXY
        self.client = client or (lambda: httpx.Client(trust_env=False))
        self.stopped = threading.Event()
        self.last_error = ""

    def run(self) -> None:
        delay = FIRST_DELAY_S
        with self.client() as client:
            while not self.stopped.is_set():
                if self._ready(client):
                    os.write(self.notify_fd, b"!")
                    return
                self.stopped.wait(delay)
                delay = min(delay * 1.5, MAX_DELAY_S)

    def _ready(self, client: httpx.Client) -> bool:
        try:
            response = client.get(self.url, timeout=REQUEST_TIMEOUT_S)
        except httpx.HTTPError as exc:  # not listening yet, reset, timed out: keep trying
            self.last_error = type(exc).__name__
            return False
        self.last_error = f"HTTP {response.status_code}"
        return response.status_code == 200

    def stop(self) -> None:
        self.stopped.set()
