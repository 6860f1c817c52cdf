"""The HTTP probe with httpx's MockTransport: no server, no sockets."""

from __future__ import annotations

import os
import select

import httpx

from diagbench.launch.probes import HttpProbe


def probe_with(handler) -> tuple[HttpProbe, int]:
    read_fd, write_fd = os.pipe()
    probe = HttpProbe(
        "http://127.0.0.1:1/health", write_fd, client=lambda: httpx.Client(transport=httpx.MockTransport(handler))
    )
    return probe, read_fd


def test_notifies_on_the_first_200_after_errors_and_503s():
    answers = iter([httpx.ConnectError("refused"), 503, 503, 200])

    def handler(request: httpx.Request) -> httpx.Response:
        answer = next(answers)
        if isinstance(answer, Exception):
            raise answer
        return httpx.Response(answer)

    probe, read_fd = probe_with(handler)
    probe.start()
    ready, _, _ = select.select([read_fd], [], [], 10)
    assert ready and os.read(read_fd, 1) == b"!"
    probe.join(5)
    assert not probe.is_alive()


def test_stop_ends_a_probe_that_never_succeeds():
    probe, read_fd = probe_with(lambda request: httpx.Response(503))
    probe.start()
    probe.stop()
    probe.join(5)
    assert not probe.is_alive()
    assert probe.last_error == "HTTP 503"
    assert select.select([read_fd], [], [], 0)[0] == []
