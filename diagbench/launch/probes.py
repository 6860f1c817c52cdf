"""HTTP readiness: GET a path until it answers 200, and send the ready request. Never raises into the runner."""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Callable
from dataclasses import dataclass

import httpx

from diagbench.spec.ready import ReadyRequest

__all__ = [
    "BODY_CHARS",
    "FIRST_DELAY_S",
    "MAX_DELAY_S",
    "REQUEST_TIMEOUT_S",
    "Answer",
    "ClientFactory",
    "HttpProbe",
    "Readiness",
    "RequestProbe",
]

FIRST_DELAY_S = 0.05
MAX_DELAY_S = 0.5
REQUEST_TIMEOUT_S = 2.0
BODY_CHARS = 300  # of an unexpected answer, kept for the record

ClientFactory = Callable[[], httpx.Client]


def _local_client() -> httpx.Client:
    return httpx.Client(trust_env=False)  # a local probe must not go through the user's HTTP_PROXY


class HttpProbe(threading.Thread):
    """Polls `url` in the background; calls `notify` on the first 200.

    HTTP has no way to announce readiness, so this is the one place that polls; the
    interval starts at 50 ms and backs off to 500 ms. The client is injected for tests.
    """

    def __init__(self, url: str, notify: Callable[[], None], client: ClientFactory | None = None):
        super().__init__(name=f"probe {url}", daemon=True)
        self.url, self.notify = url, notify
        self.client = client or _local_client
        self.stopped = threading.Event()
        self.last_error = ""

    def run(self) -> None:
        delay = FIRST_DELAY_S
        with self.client() as client:
            while not self.stopped.is_set():
                if self._ready(client):
                    self.notify()
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


@dataclass(frozen=True)
class Answer:
    """How the ready request went, in words for the record."""

    ok: bool
    detail: str  # "POST /v1/completions -> 200", "... -> 500: {...}", "...: no answer within 60s"


class RequestProbe(threading.Thread):
    """Sends the ready request once the server accepts connections; calls `notify` with the answer.

    A refused connection is retried (the ready line may come just before the server listens);
    anything else, an HTTP answer, a reset or no answer in time, is the answer.
    """

    def __init__(
        self, url: str, request: ReadyRequest, notify: Callable[[Answer], None], client: ClientFactory | None = None
    ):
        super().__init__(name=f"ready request {url}", daemon=True)
        self.url, self.request, self.notify = url, request, notify
        self.client = client or _local_client
        self.stopped = threading.Event()

    def run(self) -> None:
        delay = FIRST_DELAY_S
        with self.client() as client:
            while not self.stopped.is_set():
                answer = self._send(client)
                if answer is not None:
                    self.notify(answer)
                    return
                self.stopped.wait(delay)
                delay = min(delay * 1.5, MAX_DELAY_S)

    def _send(self, client: httpx.Client) -> Answer | None:
        req, label = self.request, self.request.label
        timeout = httpx.Timeout(req.timeout, connect=REQUEST_TIMEOUT_S)
        try:
            response = client.request(req.method, self.url, json=req.body, timeout=timeout)
        except (httpx.ConnectError, httpx.ConnectTimeout):  # not listening yet: ask again
            return None
        except httpx.TimeoutException:
            return Answer(False, f"{label}: no answer within {req.timeout:g}s")
        except httpx.HTTPError as exc:  # the server closed the connection: it may be dying
            return Answer(False, f"{label}: {type(exc).__name__}: {exc}")
        if response.status_code == req.status:
            return Answer(True, f"{label} -> {response.status_code}")
        return Answer(False, f"{label} -> {response.status_code}: {_excerpt(response)}")

    def stop(self) -> None:
        self.stopped.set()


def _excerpt(response: httpx.Response) -> str:
    """The answer's error message where it is JSON (OpenAI-style `error.message`), else its start."""
    text = response.text
    try:
        error = json.loads(text).get("error")
    except (ValueError, AttributeError):
        error = None
    message = error.get("message") if isinstance(error, dict) else error
    return (message if isinstance(message, str) else text).strip()[:BODY_CHARS]


class Readiness:
    """The HTTP side of one attempt's readiness: the health probe and the ready request,
    behind one descriptor that wakes the attempt's select().

    The threads may still be inside a request when the attempt ends; a lock keeps them
    from writing to the pipe once it is closed (its number may already be reused).
    """

    def __init__(
        self,
        health_url: str | None,
        request: ReadyRequest | None,
        request_url: str | None,
        client: ClientFactory | None = None,
    ):
        self._read, self._write = os.pipe()
        self._lock = threading.Lock()
        self._closed = False
        self._answers: list[Answer] = []
        self.health = HttpProbe(health_url, self._health_ok, client) if health_url else None
        self.request = RequestProbe(request_url, request, self._answered, client) if request and request_url else None
        self._request_started = False

    def fileno(self) -> int:
        return self._read

    def start(self) -> None:
        if self.health:
            self.health.start()

    def health_said(self) -> str:
        """What the health probe last got instead of a 200 (`HTTP 503`, `ConnectError`), or ""."""
        return self.health.last_error if self.health else ""

    def send_request(self) -> None:
        """Send the ready request (once; later calls do nothing)."""
        if self.request and not self._request_started:
            self._request_started = True
            self.request.start()

    def news(self) -> tuple[bool, list[Answer]]:
        """What woke the descriptor: whether the health probe got its 200, and request answers."""
        data = os.read(self._read, 64)
        with self._lock:
            answers, self._answers = self._answers, []
        return b"h" in data, answers

    def _health_ok(self) -> None:
        self._ring(b"h")

    def _answered(self, answer: Answer) -> None:
        with self._lock:
            self._answers.append(answer)
        self._ring(b"r")

    def _ring(self, byte: bytes) -> None:
        with self._lock:
            if not self._closed:
                os.write(self._write, byte)

    def close(self, join_s: float) -> None:
        """Stop both threads, wait up to `join_s` for each, and close the pipe."""
        threads = [t for t in (self.health, self.request) if t is not None]
        for thread in threads:
            thread.stop()
        for thread in threads:
            if thread.is_alive():
                thread.join(join_s)
        with self._lock:
            self._closed = True
            os.close(self._read)
            os.close(self._write)
