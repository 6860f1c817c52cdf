"""Issue 31's sweep of this round's commands (`logs`, `init`): a run folder handed over, a
server's bytes, a pasted command line; each case failed before its fix."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from conftest import run_cli

HOSTILE = "import sys; print('hello'); print('\\x1b]0;PWNED\\x07\\x1b[2Jcleared'); sys.exit(3)"


def _run(tmp_path: Path) -> Path:
    spec = tmp_path / "spec.yaml"
    server = {"command": [sys.executable, "-c", HOSTILE], "ready": {"log": "never"}, "timeout": "10s"}
    spec.write_text(
        yaml.safe_dump({"name": "lg", "server": server, "matrix": {"o": {"env": "X", "values": ["x", "y"]}}})
    )
    done = run_cli("run", str(spec), "--runs-dir", str(tmp_path / "runs"), "--quiet", cwd=tmp_path)
    assert "crashed" in done.stdout, done.stdout + done.stderr
    return (tmp_path / "runs" / "latest").resolve()


def test_logs_shows_a_servers_escape_sequences_as_text_and_takes_any_tail(tmp_path: Path) -> None:
    run = _run(tmp_path)
    shown = run_cli("logs", str(run), "--tail", str(10**30))
    assert shown.returncode == 0, shown.stderr
    assert "\x1b" not in shown.stdout and "\x07" not in shown.stdout
    assert shown.stdout.count("\\x1b]0;PWNED\\x07\\x1b[2Jcleared") == 2


def test_logs_reads_nothing_outside_the_run_folder(tmp_path: Path) -> None:
    run = _run(tmp_path)
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "server.log").write_text("OUTSIDE THE RUN\n")
    handed = tmp_path / "handed"
    shutil.copytree(run, handed, symlinks=True)
    manifest = json.loads((handed / "manifest.json").read_text())
    manifest["attempts"][0]["attempt"] = "../../outside"  # an edited manifest's attempt name
    (handed / "manifest.json").write_text(json.dumps(manifest))
    cell = manifest["attempts"][1]["attempt"]
    shutil.rmtree(handed / "cells" / cell)
    (handed / "cells" / cell).symlink_to(outside)  # a cell folder planted as a link
    shown = run_cli("logs", str(handed))
    assert shown.returncode == 0, shown.stderr
    assert "OUTSIDE THE RUN" not in shown.stdout
    assert "../../outside (no record)" in shown.stdout


def test_init_writes_and_prints_no_secret_given_as_a_word_of_the_command(tmp_path: Path) -> None:
    secrets = ["abcdefgh123", "zzzz9999xy", "qq12345678"]
    line = f"env HF_TOKEN={secrets[0]} DB_PASSWORD={secrets[1]} vllm serve m -e SECRET_KEY={secrets[2]}"
    made = run_cli("init", line, cwd=tmp_path)
    assert made.returncode == 0, made.stderr
    for secret in secrets:
        assert secret not in made.stdout + made.stderr
    command = yaml.safe_load(made.stdout)["server"]["command"]
    assert "HF_TOKEN=<your secret>" in command and "SECRET_KEY=<your secret>" in command
    assert "HF_TOKEN: its secret value is not written" in made.stderr


def test_logs_streams_a_log_of_one_huge_line(tmp_path: Path) -> None:
    run = _run(tmp_path)
    cell = json.loads((run / "manifest.json").read_text())["attempts"][0]["attempt"]
    with open(run / "cells" / cell / "server.log", "wb") as log:  # a progress bar that never wrote \n
        for _ in range(100):
            log.write(b"\r" + b"7" * ((1 << 20) - 1))
    try:
        shown = run_cli("logs", str(run), cell[:3], "--tail", "1", timeout=30)
    except subprocess.TimeoutExpired:
        pytest.fail("logs --tail 1 of a 100 MB line took over 30 s")
    assert shown.returncode == 0, shown.stderr
    assert 0 < len(shown.stdout) <= 3 << 20 and set(shown.stdout) <= set("7\\x0d\n")  # a part of the line


def test_logs_tail_of_a_huge_sparse_log_reads_only_its_end(tmp_path: Path) -> None:
    run = _run(tmp_path)
    cell = json.loads((run / "manifest.json").read_text())["attempts"][0]["attempt"]
    with open(run / "cells" / cell / "server.log", "wb") as log:
        log.truncate(1 << 40)  # 1 TB of NUL, in no block of the disk
        log.seek(0, os.SEEK_END)
        log.write(b"\nthe line before the end\nthe last line\n")
    try:
        shown = run_cli("logs", str(run), cell[:3], "--tail", "2", timeout=30)
    except subprocess.TimeoutExpired:
        pytest.fail("logs --tail 2 of a 1 TB log read all of it")
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout == "the line before the end\nthe last line\n"


def test_run_failed_of_a_manifest_without_its_spec_says_the_fix_with_failed(tmp_path: Path) -> None:
    run = _run(tmp_path)
    manifest = json.loads((run / "manifest.json").read_text())
    manifest["spec_text"] = 7  # a hand-edited manifest
    (run / "manifest.json").write_text(json.dumps(manifest))
    done = run_cli("run", "--failed", str(run), "--runs-dir", str(tmp_path / "again"), cwd=tmp_path)
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
    assert f"give the spec again: diagbench run SPEC --failed {run}" in done.stderr
