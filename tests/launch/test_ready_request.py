"""`ready.request`: readiness by a real request, against real fake-server processes."""

from __future__ import annotations

import os
import sys
from pathlib import Path

from conftest import fake_command, unique_id, write_spec
from diagbench.spec.load import load_spec
from diagbench.spec.ready import DEFAULT_REQUEST_TIMEOUT_S, ReadyRequest
from diagbench.vocab import Outcome

COMPLETION = {"path": "/v1/completions", "json": {"prompt": "Hello", "max_tokens": 1}}


def test_defaults_post_with_a_body_get_without_and_the_manifest_keeps_it(tmp_path):
    spec = load_spec(write_spec(tmp_path, {"command": "x", "ready": {"log": "up", "request": COMPLETION}}))
    assert spec.server.ready_request == ReadyRequest(
        "POST", "/v1/completions", {"prompt": "Hello", "max_tokens": 1}, 200, DEFAULT_REQUEST_TIMEOUT_S
    )
    assert spec.to_json()["server"]["ready"]["request"]["json"] == {"prompt": "Hello", "max_tokens": 1}
    spec = load_spec(write_spec(tmp_path, {"command": "x", "ready": {"request": {"path": "/ping", "timeout": "5s"}}}))
    assert spec.server.ready_request == ReadyRequest("GET", "/ping", None, 200, 5.0)


def test_ready_only_once_the_request_succeeds_and_it_is_sent_after_the_ready_line(runs):
    record = runs.one(
        {
            "command": fake_command("post=200:the request arrived", "sleep=0.5", "out=server up", "hang"),
            "env": {"PORT": "{port}"},
            "ready": {"log": "server up", "request": COMPLETION},
        },
        run_id=unique_id(),
    )
    assert (record.outcome, record.reason) == (Outcome.READY, "ready line and POST /v1/completions -> 200")
    assert record.evidence is not None and record.evidence.text == "server up"
    log = (runs.last.run_dir.cells / record.attempt / "server.log").read_text().splitlines()
    assert log.index("server up") < log.index("the request arrived")


def test_a_server_that_passes_health_but_dies_on_its_first_request_is_failed_with_its_own_line(runs):
    # the head-size trap in miniature: GET /health is 200, the first POST prints the error, answers
    # 500, and the process exits 0
    record = runs.one(
        {
            "command": fake_command(
                "http=/health", "post=500:RuntimeError: Unsupported CPU attention configuration: head_dim=16", "hang"
            ),
            "env": {"PORT": "{port}"},
            "ready": {"http": "/health", "request": COMPLETION},
        },
        run_id=unique_id(),
    )
    assert (record.outcome, record.failure_class) == (Outcome.FAILED, "other")
    assert record.evidence is not None
    assert record.evidence.text == "RuntimeError: Unsupported CPU attention configuration: head_dim=16"
    assert record.signature == "generic.uncaught_exception"
    assert record.reason.startswith("ready request failed: POST /v1/completions -> 500: fake answer 500")
    # its own exit 0 when it was gone before the teardown's SIGTERM, none when that signal ended it;
    # either way exit 0 is no success: the outcome stays failed
    assert record.exit_code in (None, 0) and record.signal is None


def test_a_wrong_answer_with_no_error_line_is_failed_with_the_answer_as_evidence(runs):
    record = runs.one(
        {
            "command": fake_command("http=/health", "post=404:", "hang"),
            "env": {"PORT": "{port}"},
            "ready": {"http": "/health", "request": COMPLETION},
            "settle": "100ms",
        },
        run_id=unique_id(),
    )
    assert (record.outcome, record.failure_class, record.signature) == (Outcome.FAILED, "other", "ready.request")
    assert record.evidence is not None
    assert (record.evidence.line_no, record.evidence.text) == (0, "POST /v1/completions -> 404: fake answer 404")


def test_an_attempts_own_tmpdir_holds_what_the_server_leaves_and_goes_with_it(runs, tmp_path):
    leave = (
        "import os, tempfile; d = tempfile.gettempdir(); open(os.path.join(d, 'vllm_dist_test'), 'w').close(); "
        "print('tmp', d); print('The server is fired up and ready to roll!', flush=True); import time; time.sleep(30)"
    )
    record = runs.one({"command": [sys.executable, "-c", leave], "fresh_caches": ["TMPDIR"]}, run_id=unique_id())
    assert record.outcome is Outcome.READY
    tmpdir = record.env_changes["TMPDIR"]
    assert tmpdir is not None and Path(tmpdir).name == "tmpdir"
    log = (runs.last.run_dir.cells / record.attempt / "server.log").read_text().splitlines()
    assert log[0] == f"tmp {tmpdir}"  # it existed, so Python did not fall back to /tmp
    assert not os.path.exists(tmpdir)  # removed after the attempt, with what was left in it
