"""GPU memory settling, with an injected reader (no GPU needed)."""

from __future__ import annotations

import threading

from diagbench.launch import gpu


def test_waits_until_memory_returns_to_baseline():
    readings = iter([[9000], [5000], [1100], [1000]])
    now, waited = gpu.wait_for_baseline([1000], read=lambda: next(readings), bound_s=10)
    assert now == [1100]  # within the 256 MiB tolerance
    assert 0 < waited < 5


def test_the_wait_is_bounded():
    now, waited = gpu.wait_for_baseline([1000], read=lambda: [90000], bound_s=0.3)
    assert now == [90000] and 0.3 <= waited < 2


def test_cancel_ends_the_wait():
    cancelled = threading.Event()
    cancelled.set()
    _now, waited = gpu.wait_for_baseline([1000], cancelled, read=lambda: [90000], bound_s=30)
    assert waited < 1


def test_no_gpu_means_no_wait():
    assert gpu.wait_for_baseline([1000], read=lambda: None)[0] is None
