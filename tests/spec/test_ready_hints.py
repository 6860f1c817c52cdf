"""Ready rules that help: a server no ready rule knows is named by its last line and the fix;
`plan` warns before the launch."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from conftest import fake_command, write_spec
from diagbench.spec.ready import READY_FIX, timeout_hint

LISTENING = "listening on http://127.0.0.1:8000"


def test_a_timeout_names_the_last_line_and_the_fix(runs) -> None:
    r = runs.one({"command": fake_command("out=starting", f"out={LISTENING}", "hang"), "timeout": "1s"})
    assert r.outcome == "timeout"
    assert r.reason == (
        f"not ready within 1s; no ready rule matched; the log's last line was '{LISTENING}': "
        "add `ready: {log: ...}` or `{http: /}`"
    )


def test_a_timeout_with_a_ready_log_says_it_never_matched(runs) -> None:
    r = runs.one(
        {
            "command": fake_command(f"out={LISTENING}", "raw=almost", "hang"),
            "timeout": "1s",
            "ready": {"log": "fired up"},
        }
    )
    assert r.reason == "not ready within 1s; ready.log /fired up/ never matched; the log's last line was 'almost'"


def test_the_hint_for_a_silent_server_and_a_long_line() -> None:
    assert timeout_hint("", None, "/health") == ""  # what the probe last got is said instead
    assert timeout_hint("", None, None) == "no ready rule matched; the server wrote nothing: " + READY_FIX
    assert timeout_hint("x" * 500, None, None).count("x") == 159


def test_plan_warns_when_no_ready_rule_a_server_of_unknown_kind_prints(tmp_path: Path) -> None:
    spec = write_spec(tmp_path, {"command": fake_command("hang"), "timeout": "600s"})
    out = subprocess.run(
        [sys.executable, "-m", "diagbench", "plan", str(spec)], capture_output=True, text=True, env={"COLUMNS": "200"}
    )
    assert out.returncode == 0, out.stderr
    assert "warning: no ready rule of the spec's own (server.ready) and no server.kind" in out.stdout
    assert "runs until its timeout (600s)" in out.stdout and "vllm" in out.stdout
    for given in ({"ready": {"http": "/"}}, {"ready": {"log": "up"}}, {"kind": "vllm"}):
        spec = write_spec(tmp_path, {"command": fake_command("hang"), **given})
        quiet = subprocess.run([sys.executable, "-m", "diagbench", "plan", str(spec)], capture_output=True, text=True)
        assert quiet.returncode == 0 and "warning: no ready rule" not in quiet.stdout, given


def test_isolate_without_ready_names_the_last_line_and_its_own_fix(tmp_path: Path) -> None:
    command = " ".join(fake_command(f"out={LISTENING.replace(' ', '_')}", "hang"))
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "diagbench",
            "isolate",
            "--good",
            command,
            "--bad",
            command + " out=x",
            "--timeout",
            "1s",
            "--runs-dir",
            str(tmp_path),
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert "no ready rule matched; the log's last line was 'listening_on_http://127.0.0.1:8000'" in out.stderr
    assert "(isolate: --ready REGEX or --http PATH)" in out.stderr


def test_a_recognised_server_that_stalled_is_told_it_hung_not_to_add_a_ready_rule(runs) -> None:
    r = runs.one({"command": fake_command("out=Load weight begin.", "hang"), "timeout": "60s", "stall": "1.5s"})
    assert r.outcome == "timeout" and r.stalled
    assert "add `ready:" not in r.reason
    assert "the log's last line was 'Load weight begin.': it hung on its way up (its stacks say where)" in r.reason
