"""One hostile string through every renderer (diagbench/safetext.py is the one policy): a
server's line, a spec's label, a pack's pattern, a process's self-chosen name, holding an OSC
title, CSI codes, control bytes, a right-to-left override, `<script>`, `]]>` and Markdown
pipes. Every output either shows each such character as an escape (terminal, Markdown,
annotations, JUnit) or drops it (HTML), and none of them becomes markup.

Real runs of real fake servers and real diagbench processes."""

from __future__ import annotations

import ctypes
import io
import os
import re
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import psutil
import pytest
import yaml
from rich.console import Console

from conftest import diagbench_argv, fake_command, write_spec
from diagbench.execute.slots import Slot
from diagbench.launch.process import stop_processes
from diagbench.records.store import RunDir
from diagbench.render.live import Progress
from diagbench.spec.load import load_spec
from diagbench.spec.plan import PlannedAttempt

HOSTILE = "\x1b]0;pwned\x07\x1b[2J\x1b[31mred\x00\x01\x1f\u202eevil\u2066 <script>alert(1)</script> ]]> | pipe `tick`"
RAW = ["\x1b", "\x00", "\x01", "\x07", "\x1f", "\u202e", "\u2066"]


def no_raw_controls(text: str) -> None:
    for char in RAW:
        assert char not in text, f"{char!r} passed through"


def hostile_run(tmp_path: Path) -> Path:
    """A run whose one cell fails on a hostile FATAL line, against an expect that wanted ready."""
    server = {
        "command": fake_command(f"out=FATAL {HOSTILE.encode('unicode_escape').decode()}", "exit=1"),
        "failures": {"fatal": "FATAL"},
    }
    matrix = {"mode": {"env": "MODE", "values": ["a|b<i>"]}}
    spec = write_spec(tmp_path, server, matrix, expect=[{"when": {"mode": "a|b<i>"}, "outcome": "ready"}])
    done = subprocess.run(
        diagbench_argv("run", str(spec), "--runs-dir", str(tmp_path / "runs"), "--junit", str(tmp_path / "j.xml")),
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "GITHUB_ACTIONS": "true", "GITHUB_STEP_SUMMARY": str(tmp_path / "summary.md")},
    )
    assert done.returncode == 1, done.stderr
    no_raw_controls(done.stdout + done.stderr)
    assert "::error" in done.stdout + done.stderr and "\\x1b" in done.stdout + done.stderr  # annotations
    return next((tmp_path / "runs").glob("2*"))


def report(run: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        diagbench_argv("report", str(run), *args), capture_output=True, text=True, timeout=120, env=env or os.environ
    )


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return hostile_run(tmp_path_factory.mktemp("hostile"))


def test_the_terminal_table_shows_escapes(run):
    shown = report(run).stdout
    no_raw_controls(shown)
    assert "\\x1b]0;pwned" in shown and "\\u202e" in shown


def test_markdown_and_the_step_summary_take_no_html_and_no_pipes(run, tmp_path):
    md = report(run, "--format", "md").stdout
    no_raw_controls(md)
    assert "<script>" not in re.sub(r"`[^`\n]*`", "", md) and "&lt;script&gt;" in md
    assert "a\\|b<i>" in md  # in a code span: the pipe cannot end the cell, `<i>` is literal there
    row = next(line for line in md.splitlines() if "FATAL" in line)
    assert row.count(" | ") - row.count("\\|") <= 6  # the line's own pipe is escaped, the row keeps its columns
    annotated = report(run, env={**os.environ, "GITHUB_ACTIONS": "true"})
    no_raw_controls(annotated.stdout + annotated.stderr)
    written = (run.parent.parent / "summary.md").read_text()  # the step summary `run` wrote
    no_raw_controls(written)
    assert "<script>" not in written


def test_junit_is_well_formed_with_the_deciding_line(run, tmp_path):
    for text in ((tmp_path.parent / "hostile0" / "j.xml"), None):
        body = report(run, "--format", "junit").stdout if text is None else text.read_text()
        no_raw_controls(body)
        root = ET.fromstring(body.split("\n", 1)[1])  # parses: what any CI reader needs
        failure = next(root.iter("failure"))
        assert "FATAL" in (failure.text or "") and "<script>" in (failure.text or "")  # text, escaped by XML


def test_html_drops_controls_and_bidi_and_escapes_markup(run):
    page = report(run, "--format", "html").stdout
    no_raw_controls(page)
    assert "<script>alert(1)" not in page and "&lt;script&gt;alert(1)" in page


def test_isolate_step_table_and_its_reports(tmp_path):
    """The bad launch's deciding line (and so its factor) is hostile: the steps table, the
    answer, `report` of the isolation in every form and its report.html show it escaped."""
    oom = "torch.OutOfMemoryError: CUDA out of memory. " + HOSTILE.encode("unicode_escape").decode()
    good = " ".join(fake_command("out='The server is fired up and ready to roll!'", "hang"))
    bad = " ".join(fake_command(f"out='{oom}'", "exit=1"))
    done = subprocess.run(
        diagbench_argv("isolate", "--good", good, "--bad", bad),
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
        env={**os.environ, "COLUMNS": "250"},
    )
    assert done.returncode == 0, done.stderr
    no_raw_controls(done.stdout + done.stderr)
    assert "\\x1b]0;pwned" in done.stdout and "culprit" in done.stdout
    iso = next((tmp_path / "runs").glob("2*"))
    for form in ("table", "md", "html", "junit"):
        no_raw_controls(report(iso, "--format", form).stdout)
    outside_code = re.sub(r"`[^`\n]*`", "", report(iso, "--format", "md").stdout)
    assert "<script>" not in outside_code  # inside a code span it is literal text
    no_raw_controls((iso / "report.html").read_text())


def test_signatures_full_shows_a_packs_escapes(tmp_path):
    pack = tmp_path / "mine.yaml"
    pack.write_text(
        yaml.safe_dump(
            {"pack": "mine", "signatures": [{"id": "mine.x", "kind": "failure", "pattern": "FATAL \x1b\\[2J\u202e"}]},
            allow_unicode=True,
        )
    )
    for flags in (["--full"], []):
        done = subprocess.run(
            diagbench_argv("signatures", "--signatures", str(pack), *flags), capture_output=True, text=True, timeout=60
        )
        assert done.returncode == 0, done.stderr
        no_raw_controls(done.stdout)
        assert "\\x1b" in done.stdout


def test_the_live_view_shows_a_specs_labels_escaped(tmp_path):
    spec = tmp_path / "spec.yaml"
    spec.write_text(
        'name: t\nserver: {command: "srv {port}"}\nmatrix:\n  "ax\\e[31m": {env: A, values: ["v\\e]0;t\\a\\u202e"]}\n'
    )
    planned = [PlannedAttempt(cell, 1) for cell in load_spec(spec).cells]
    for terminal in (True, False):
        buffer = io.StringIO()
        term = Console(file=buffer, force_terminal=terminal, width=100, height=30, color_system=None)
        progress = Progress(term, timeout_s=60, heartbeat_s=0)
        progress.on_open(RunDir(tmp_path), planned)
        progress.on_start(planned[0], Slot(0))
        frame = Console(file=io.StringIO(), width=100, height=30, color_system=None, force_terminal=True)
        with frame.capture() as capture:
            frame.print(progress.frame())
        progress.close()
        no_raw_controls(capture.get().replace("\x1b[", "").replace("\x1b]", ""))  # rich's own codes aside
        assert "\\x1b" in capture.get() and "\\u202e" in capture.get()


def _named(name: bytes) -> subprocess.Popen[bytes]:
    """A real process that renamed itself (prctl PR_SET_NAME), as any process may."""
    code = (
        "import ctypes,sys,time;libc=ctypes.CDLL(None);"
        f"libc.prctl(15,ctypes.c_char_p({name!r}),0,0,0);print('named',flush=True);time.sleep(60)"
    )
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE)
    assert proc.stdout is not None and proc.stdout.readline() == b"named\n"
    return proc


@pytest.mark.skipif(not hasattr(ctypes, "CDLL") or sys.platform != "linux", reason="prctl is Linux's")
def test_a_process_that_named_itself_with_escapes_is_shown_escaped():
    proc = _named(b"\x1b]0;x\x07\xe2\x80\xae")
    try:
        target = psutil.Process(proc.pid)
        teardown = stop_processes(lambda: [target] if target.is_running() else [], lambda: [], 2.0)
        names = [k.name for k in teardown.killed]
        assert names, teardown
        no_raw_controls(" ".join(names))
        assert "\\x1b" in names[0]
    finally:
        proc.kill()
        proc.wait()
