"""The HTTP probe and the ready request with httpx's MockTransport: no server, no sockets."""

from __future__ import annotations

import json
import os
import select
import threading

import httpx

from diagbench.launch.probes import Answer, HttpProbe, Readiness, RequestProbe
from diagbench.spec.ready import ReadyRequest

COMPLETION = ReadyRequest("POST", "/v1/completions", {"prompt": "hi", "max_tokens": 1}, 200, 5.0)


def mock(handler):
    return lambda: httpx.Client(transport=httpx.MockTransport(handler))


def answers_in_order(*answers):
    """A handler that gives each answer in turn (an exception is raised, a number is a status)."""
    left = iter(answers)
    seen: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        answer = next(left)
        if isinstance(answer, Exception):
            raise answer
        if isinstance(answer, tuple):
            return httpx.Response(answer[0], text=answer[1])
        return httpx.Response(answer)

    return handler, seen


def test_notifies_on_the_first_200_after_errors_and_503s():
    handler, _ = answers_in_order(httpx.ConnectError("refused"), 503, 503, 200)
    rang = threading.Event()
    probe = HttpProbe("http://127.0.0.1:1/health", rang.set, client=mock(handler))
    probe.start()
    assert rang.wait(10)
    probe.join(5)
    assert not probe.is_alive()


def test_stop_ends_a_probe_that_never_succeeds():
    rang = threading.Event()
    probe = HttpProbe("http://127.0.0.1:1/health", rang.set, client=mock(lambda request: httpx.Response(503)))
    probe.start()
    probe.stop()
    probe.join(5)
    assert not probe.is_alive()
    assert probe.last_error == "HTTP 503"
    assert not rang.is_set()


def ask(handler, request: ReadyRequest = COMPLETION) -> Answer:
    got: list[Answer] = []
    probe = RequestProbe("http://127.0.0.1:1/v1/completions", request, got.append, client=mock(handler))
    probe.start()
    probe.join(10)
    assert not probe.is_alive() and len(got) == 1
    return got[0]


def test_the_request_is_retried_while_refused_then_sent_with_its_json_body():
    handler, seen = answers_in_order(httpx.ConnectError("refused"), httpx.ConnectError("refused"), 200)
    answer = ask(handler)
    assert answer == Answer(True, "POST /v1/completions -> 200")
    assert len(seen) == 3
    assert seen[-1].method == "POST"
    assert json.loads(seen[-1].content) == {"prompt": "hi", "max_tokens": 1}


def test_an_unexpected_status_is_a_failed_answer_with_the_servers_error_message():
    body = json.dumps({"error": {"message": "EngineCore encountered an issue.", "code": 500}})
    handler, seen = answers_in_order((500, body))
    assert ask(handler) == Answer(False, "POST /v1/completions -> 500: EngineCore encountered an issue.")
    assert len(seen) == 1  # an answer is never retried


def test_a_reset_connection_and_no_answer_in_time_are_failed_answers():
    handler, _ = answers_in_order(httpx.RemoteProtocolError("Server disconnected without sending a response."))
    answer = ask(handler)
    assert not answer.ok
    assert answer.detail == "POST /v1/completions: RemoteProtocolError: Server disconnected without sending a response."
    handler, _ = answers_in_order(httpx.ReadTimeout("timed out"))
    assert ask(handler) == Answer(False, "POST /v1/completions: no answer within 5s")


def test_the_expected_status_need_not_be_200():
    handler, _ = answers_in_order((404, "not here"))
    teapot = ReadyRequest("GET", "/x", None, 404, 5.0)
    assert ask(handler, teapot) == Answer(True, "GET /x -> 404")


def test_readiness_wakes_one_descriptor_for_health_and_for_the_answer():
    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200 if request.url.path == "/health" else 500, text="boom")

    readiness = Readiness("http://h/health", COMPLETION, "http://h/v1/completions", client=mock(handler))
    readiness.start()
    assert select.select([readiness], [], [], 10)[0]
    assert readiness.news() == (True, [])
    readiness.send_request()
    readiness.send_request()  # sent once, however often asked
    assert select.select([readiness], [], [], 10)[0]
    assert readiness.news() == (False, [Answer(False, "POST /v1/completions -> 500: boom")])
    readiness.close(5)
    assert readiness.request is not None and not readiness.request.is_alive()


def test_a_thread_that_answers_after_close_writes_nowhere():
    release = threading.Event()

    def slow(request: httpx.Request) -> httpx.Response:
        release.wait(10)
        return httpx.Response(200)

    readiness = Readiness(None, COMPLETION, "http://h/v1/completions", client=mock(slow))
    readiness.send_request()
    readiness.close(0.05)  # the request is still in flight
    spare_r, spare_w = os.pipe()  # may reuse the closed descriptors' numbers
    release.set()
    assert readiness.request is not None
    readiness.request.join(10)
    assert select.select([spare_r], [], [], 0.2)[0] == []  # nothing was written into the new pipe
    os.close(spare_r)
    os.close(spare_w)
