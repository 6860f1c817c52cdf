"""A user's pattern cannot freeze a run: `(?=a)(a+)+$` (hyperscan refuses the lookaround, so
Python matches it) against a line of `aaaa...!` backtracks for ever under `re`, holding the
GIL, so no timeout, Ctrl-C or SIGTERM could be handled. Under the budget (logs/guard.py) the
run ends on its own timeout, and on SIGINT and SIGTERM at once. Real diagbench processes,
a real fake server printing the line."""

from __future__ import annotations

import signal
import subprocess
import time
from pathlib import Path

import pytest
import yaml

from conftest import diagbench_argv, fake_command, wait_until, write_spec

EVIL = r"(?=a)(a+)+$"
LINE = "a" * 3000 + "!"


def hostile_spec(tmp_path: Path, timeout: str = "4s") -> Path:
    server: dict[str, object] = {"command": fake_command(f"out={LINE}", "out=started", "hang"), "timeout": timeout}
    server["ready"] = {"log": EVIL}
    return write_spec(tmp_path, server)


def test_a_backtracking_ready_pattern_ends_on_the_runs_timeout(tmp_path):
    spec = hostile_spec(tmp_path)
    started = time.monotonic()
    done = subprocess.run(
        diagbench_argv("run", str(spec), "--runs-dir", str(tmp_path / "runs")),
        capture_output=True,
        text=True,
        timeout=90,
    )
    took = time.monotonic() - started
    assert took < 40, f"the run took {took:.0f} s"
    assert "timeout" in done.stdout
    assert "spec.ready took more than" in done.stderr  # said, once, naming the pattern
    assert done.stderr.count("spec.ready took more than") == 1


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_signals_still_stop_a_run_whose_pattern_backtracks(tmp_path, sig):
    spec = hostile_spec(tmp_path, timeout="300s")
    log = tmp_path / "stderr"
    with log.open("w") as stderr:
        proc = subprocess.Popen(
            diagbench_argv("run", str(spec), "--runs-dir", str(tmp_path / "runs")),
            stdout=subprocess.DEVNULL,
            stderr=stderr,
        )
    try:
        wait_until(lambda: "spec.ready took more than" in log.read_text(), timeout=60, what="the pattern to give up")
        proc.send_signal(sig)
        assert proc.wait(timeout=30) == 130
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_engine_re_holds_a_users_pack_to_the_same_budget(tmp_path):
    pack = tmp_path / "mine.yaml"
    pack.write_text(
        yaml.safe_dump({"pack": "mine", "signatures": [{"id": "mine.evil", "kind": "failure", "pattern": EVIL}]})
    )
    log = tmp_path / "server.log"
    log.write_text(f"starting\n{LINE}\nmore\n")
    started = time.monotonic()
    done = subprocess.run(
        diagbench_argv("classify", str(log), "--signatures", f"generic,{pack}", "--engine", "re"),
        capture_output=True,
        text=True,
        timeout=90,
    )
    assert time.monotonic() - started < 30
    assert done.returncode in (0, 1, 3), done.stderr  # ready, failed or unknown: decided, never hung
    assert "mine.evil took more than" in done.stderr


def test_a_users_pattern_still_matches_as_re_would(tmp_path):
    pack = tmp_path / "mine.yaml"
    pack.write_text(
        yaml.safe_dump(
            {
                "pack": "mine",
                "signatures": [{"id": "mine.oom", "kind": "failure", "pattern": r"(?<=: )Out of (?:mem|ram)"}],
            }
        )
    )
    log = tmp_path / "server.log"
    log.write_text("starting\nfatal: Out of mem\n")
    for engine in ("re", "auto"):
        done = subprocess.run(
            diagbench_argv("classify", str(log), "--signatures", str(pack), "--engine", engine, "--json"),
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert '"signature": "mine.oom"' in done.stdout, done.stdout + done.stderr
