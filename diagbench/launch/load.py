"""A pricing load: N requests, one after another, to a server that came up, within a budget.

It measures what a launch costs to run, not what it can peak at: sequential requests give
the latency of one request and the throughput of one client, comparable between two
launches of the same server on the same host. Never raises: a server that fails the load
gives its failures as figures.

Two deadlines bound it: the whole load's budget, and FIRST_ANSWER_S for the first answer. A
server that never answers costs FIRST_ANSWER_S, not a request timeout per request: the load
stops at the first request that got no answer at all (a timeout, a refused connection),
since the next would wait as long for nothing.
"""

from __future__ import annotations

import selectors
import statistics
import threading
import time
from collections.abc import Callable

import httpx

from diagbench.records.parts import Price
from diagbench.spec.ready import PriceLoad

__all__ = ["JOIN_S", "PRICE_VERSION", "measure", "price_launch"]

PRICE_VERSION = 1
JOIN_S = 5.0  # a request in flight when the budget ran out
FIRST_ANSWER_S = 30.0  # a server that came up answers its first request within this, or is not priced


def price_launch(url: str, load: PriceLoad, cancel_fd: int, pipe: int | None, pump: Callable[[], bool]) -> Price | None:
    """The load, sent from a thread while this one keeps the server's pipe drained (`pump`
    reads what it wrote; False once the pipe is at its end): a server blocked on a full pipe
    would stall its own answers. A byte on `cancel_fd` (Ctrl-C) stops the load."""
    stop, figures = threading.Event(), list[Price]()
    sender = threading.Thread(target=lambda: figures.append(measure(url, load, stop)), daemon=True)
    sender.start()
    with selectors.DefaultSelector() as sel:
        if pipe is not None:
            sel.register(pipe, selectors.EVENT_READ, "out")
        sel.register(cancel_fd, selectors.EVENT_READ, "cancel")
        while sender.is_alive():
            for key, _ in sel.select(0.05):  # the sender ends by itself: look at it now and then
                if key.data == "cancel":
                    stop.set()
                    sel.unregister(cancel_fd)
                elif not pump():
                    sel.unregister(key.fd)
    sender.join(JOIN_S)
    return figures[0] if figures else None


def measure(url: str, load: PriceLoad, stop: threading.Event) -> Price:
    """Send `load.count` requests to `url` in turn; stop early at the budget or at `stop`."""
    latencies: list[float] = []
    tokens: list[int] = []
    failed, first_error = 0, ""
    start = time.monotonic()
    deadline, first_by = start + load.budget_s, start + FIRST_ANSWER_S
    with httpx.Client(trust_env=False) as client:  # a local server: never through the user's proxy
        for _ in range(load.count):
            left = (deadline if latencies else min(deadline, first_by)) - time.monotonic()
            if stop.is_set() or left <= 0:
                break
            sent = time.monotonic()
            try:
                response = client.request(
                    load.request.method, url, json=load.request.body, timeout=min(left, load.request.timeout)
                )
                ok = response.status_code == load.request.status
            except httpx.HTTPError as exc:
                ok, response = False, None
                first_error = first_error or f"{type(exc).__name__}: {exc}"
            if response is None:  # no answer at all: the next request would wait as long for nothing
                failed += 1
                break
            if not ok:
                failed += 1
                first_error = first_error or f"HTTP {response.status_code}"
                continue
            latencies.append(time.monotonic() - sent)
            if (count := _tokens(response)) is not None:
                tokens.append(count)
    return _figures(load, latencies, tokens, failed, first_error, time.monotonic() - start)


def _figures(
    load: PriceLoad, latencies: list[float], tokens: list[int], failed: int, error: str, seconds: float
) -> Price:
    ok = len(latencies)
    busy = sum(latencies)
    ordered = sorted(latencies)
    return Price(
        version=PRICE_VERSION,
        request=load.request.label,
        requests=load.count,
        ok=ok,
        failed=failed,
        seconds=round(seconds, 4),
        throughput_rps=round(ok / busy, 3) if busy > 0 else None,
        tokens_per_s=round(sum(tokens) / busy, 2) if tokens and busy > 0 else None,
        latency_p50_s=round(statistics.median(ordered), 5) if ordered else None,
        latency_p95_s=round(ordered[min(ok - 1, int(0.95 * ok))], 5) if ordered else None,
        error=error or None,
    )


def _tokens(response: httpx.Response) -> int | None:
    """Output tokens, where the answer says: OpenAI's usage, SGLang's meta_info, token ids."""
    try:
        data = response.json()
    except ValueError:
        return None
    if not isinstance(data, dict):
        return None
    for holder, key in (("usage", "completion_tokens"), ("meta_info", "completion_tokens")):
        inner = data.get(holder)
        if isinstance(inner, dict) and isinstance(inner.get(key), int):
            return int(inner[key])
    ids = data.get("output_ids")
    if isinstance(ids, list):
        return len(ids)
    if isinstance(data.get("eval_count"), int):  # Ollama's /api/generate
        return int(data["eval_count"])
    return None
