"""Readers never crash: `report` renders what it can and names what it cannot read;
`classify` refuses what could block and reads `-` live; control characters from a
server never reach a terminal as such."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import fake_command, run_cli, wait_gone

READY = "The server is fired up and ready to roll!"
# a screen clear, a window title, a cursor move, and a right-to-left override
ESCAPES = "\\x1b[2J\\x1b]0;pwned\\x07\\x1b[1A\\u202e"


def diagbench(*args: str, cwd: Path, stdin: int | None = None) -> subprocess.CompletedProcess[str]:
    return run_cli(*args, cwd=cwd, stdin=stdin)


def assert_nothing_left(run_id: str) -> None:
    wait_gone(run_id)


@pytest.fixture(scope="module")
def finished(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A real two-cell run with a hypothesis and an expect, made once and copied by each test."""
    folder = tmp_path_factory.mktemp("finished")
    ready = json.dumps(fake_command(f"out={READY}", "hang"))
    (folder / "spec.yaml").write_text(
        f"name: readers\nserver: {{command: {ready}, timeout: 10s, grace: 1s}}\n"
        "matrix:\n  a: {env: A, values: [x, y]}\n"
        "expect:\n  - {outcome: ready}\n"
        "hypotheses:\n  - {id: h, when: {a: x}, supported_if: ready, refuted_if: failed}\n"
        "  - {id: g, when: {a: y}, supported_if: ready, refuted_if: failed}\n"
    )
    proc = diagbench("run", "spec.yaml", "--run-id", "r", cwd=folder)
    assert_nothing_left("r")
    assert proc.returncode == 0, proc.stderr
    return folder / "runs" / "r"


@pytest.fixture
def run(finished: Path, tmp_path: Path) -> Path:
    copy = tmp_path / "r"
    shutil.copytree(finished, copy)
    shutil.copy(finished.parent.parent / "spec.yaml", tmp_path / "spec.yaml")
    return copy


def results(run: Path) -> list[Path]:
    return sorted(run.glob("cells/*/result.json"))


def replace_with_fifo(path: Path) -> None:
    path.unlink()
    os.mkfifo(path)


def edit(path: Path, **changes: object) -> None:
    data = json.loads(path.read_text())
    data.update(changes)
    path.write_text(json.dumps(data))


# -- report ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("damage", "why"),
    [
        (lambda p: p.write_text("{not json"), "not valid JSON (Expecting property name enclosed in double quotes"),
        (lambda p: p.write_text("[1, 2]"), "expected a JSON object, got list"),
        (lambda p: edit(p, schema_version=2), "schema_version 2: written by a newer diagbench (this one reads 1)"),
        (
            lambda p: edit(p, time_to_outcome_s="fast"),
            "field 'time_to_outcome_s': expected a number or null, got \"fast\"",
        ),
        (lambda p: edit(p, outcome=None), "field 'outcome': expected a string, got None"),
        (lambda p: edit(p, evidence={"line_no": "one"}), "field 'evidence.line_no': expected an integer, got \"one\""),
        (lambda p: edit(p, killed=[{"pid": 1}]), "field 'killed[0].name': missing"),
        (lambda p: edit(p, attempt="../../elsewhere"), "field 'attempt': '../../elsewhere' is not its folder"),
        (lambda p: replace_with_fifo(p), "a named pipe (FIFO), not a regular file"),
    ],
)
@pytest.mark.parametrize("fmt", ["table", "json"])
def test_one_unreadable_record_is_named_and_the_rest_rendered(run: Path, damage, why: str, fmt: str) -> None:
    bad, good = results(run)
    damage(bad)
    proc = diagbench("report", str(run), "--format", fmt, cwd=run.parent)
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr
    assert proc.stderr.startswith(f"diagbench: {bad}: {why}")
    assert len(proc.stderr.splitlines()) == 1
    assert "ready" in proc.stdout  # the readable attempt is still shown
    if fmt == "json":
        assert [a["attempt"] for a in json.loads(proc.stdout)["attempts"]] == [good.parent.name]


@pytest.mark.parametrize("fmt", ["md", "junit"])
def test_every_format_names_the_unreadable_record(run: Path, fmt: str) -> None:
    bad, good = results(run)
    edit(bad, repeat="first")
    proc = diagbench("report", str(run), "--format", fmt, cwd=run.parent)
    assert proc.returncode == 2
    assert proc.stderr == f"diagbench: {bad}: field 'repeat': expected an integer, got 'first'\n"
    assert "a=y" in proc.stdout or good.parent.name in proc.stdout


def test_a_manifest_from_a_newer_diagbench_is_refused_not_guessed(run: Path) -> None:
    edit(run / "manifest.json", manifest_version=2)
    proc = diagbench("report", str(run), cwd=run.parent)
    assert proc.returncode == 2
    assert proc.stderr == (
        f"diagbench: {run / 'manifest.json'}: manifest_version 2: written by a newer diagbench "
        "(this one reads 1); read it with that version (pip install -U diagbench)\n"
    )


def test_a_broken_manifest_still_shows_the_records(run: Path) -> None:
    (run / "manifest.json").write_text('{"run_id": ')
    proc = diagbench("report", str(run), "--format", "json", cwd=run.parent)
    assert proc.returncode == 2
    assert proc.stderr.startswith(f"diagbench: {run / 'manifest.json'}: not valid JSON")
    assert all(r.parent.name in proc.stdout for r in results(run))


def test_one_malformed_hypothesis_is_named_and_the_other_judged(run: Path) -> None:
    manifest = json.loads((run / "manifest.json").read_text())
    manifest["hypotheses"][0]["refuted_if"] = ["exploded"]
    (run / "manifest.json").write_text(json.dumps(manifest))
    proc = diagbench("report", str(run), "--format", "json", cwd=run.parent)
    assert proc.returncode == 2
    assert proc.stderr == f"diagbench: {run / 'manifest.json'}: hypotheses[0]: 'exploded' is not a valid Outcome\n"
    assert [v["id"] for v in json.loads(proc.stdout)["verdicts"]] == ["g"]


def test_a_log_that_is_a_fifo_does_not_hang_junit(run: Path) -> None:
    log = results(run)[0].parent / "server.log"
    log.unlink()
    os.mkfifo(log)
    proc = diagbench("report", str(run), "--format", "junit", cwd=run.parent)
    assert proc.returncode == 0 and "<testsuites" in proc.stdout


def test_a_log_that_is_a_link_is_not_followed_into_junit(run: Path, tmp_path: Path) -> None:
    private = tmp_path / "private.txt"
    private.write_text("root:not-for-a-ci-report\n")
    log = results(run)[0].parent / "server.log"
    log.unlink()
    log.symlink_to(private)
    proc = diagbench("report", str(run), "--format", "junit", cwd=run.parent)
    assert proc.returncode == 0 and "not-for-a-ci-report" not in proc.stdout


def test_diff_with_an_unreadable_record_is_not_trusted(run: Path, finished: Path) -> None:
    bad = results(run)[0]
    bad.write_text("")
    proc = diagbench("diff", str(finished), str(run), cwd=run.parent)
    assert proc.returncode == 2
    assert proc.stderr.startswith(f"diagbench: {bad}: not valid JSON")


def test_resume_refuses_to_overwrite_an_unreadable_record(run: Path) -> None:
    bad = results(run)[0]
    edit(bad, schema_version=9)
    proc = diagbench("run", "spec.yaml", "--resume", str(run), cwd=run.parent)
    assert proc.returncode == 2
    assert "schema_version 9: written by a newer diagbench" in proc.stderr
    assert json.loads(bad.read_text())["schema_version"] == 9


# -- classify --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("path", "kind"), [("/dev/zero", "a character device"), ("fifo", "a named pipe (FIFO)"), (".", "a directory")]
)
def test_classify_refuses_what_could_block_or_never_end(tmp_path: Path, path: str, kind: str) -> None:
    os.mkfifo(tmp_path / "fifo")
    proc = diagbench("classify", path, cwd=tmp_path)
    assert proc.returncode == 2
    assert proc.stderr == (
        f"diagbench: {path}: {kind}, not a log file (to classify a stream, pipe it in: ... | diagbench classify -)\n"
    )


def test_classify_reads_standard_input_until_the_decision(tmp_path: Path) -> None:
    # the writer prints a failure and hangs: classify decides on the clock and returns
    writer = subprocess.Popen(
        fake_command("out=loading", "out=torch.OutOfMemoryError: CUDA out of memory.", "hang"), stdout=subprocess.PIPE
    )
    assert writer.stdout is not None
    try:
        proc = diagbench("classify", "-", "--json", cwd=tmp_path, stdin=writer.stdout.fileno())
    finally:
        writer.kill()
        writer.wait()
        writer.stdout.close()
    assert proc.returncode == 1, proc.stderr  # failed
    result = json.loads(proc.stdout)
    assert (result["outcome"], result["failure_class"], result["line_no"]) == ("failed", "oom", 2)


def test_classify_stdin_shows_the_context_it_read(tmp_path: Path) -> None:
    log = b"a\nb\nRuntimeError: CUDA error: an illegal memory access was encountered\nc\n"
    proc = subprocess.run(
        [sys.executable, "-m", "diagbench", "classify", "-"], input=log, capture_output=True, timeout=60, cwd=tmp_path
    )
    assert proc.returncode == 1
    assert b">       3 | RuntimeError: CUDA error: an illegal memory access" in proc.stdout


def test_an_unknown_engine_is_a_usage_error(tmp_path: Path) -> None:
    (tmp_path / "x.log").write_text("hello\n")
    proc = diagbench("classify", "x.log", "--engine", "bogus", cwd=tmp_path)
    assert proc.returncode == 2
    assert "'bogus' is not one of 'auto', 'hyperscan', 're'" in proc.stderr


# -- control characters -------------------------------------------------------------------


def test_escape_sequences_from_a_server_are_shown_not_run(tmp_path: Path) -> None:
    line = f"RuntimeError: CUDA error: out of memory {ESCAPES}"
    command = json.dumps(fake_command(f"err={line}", "exit=1"))
    (tmp_path / "spec.yaml").write_text(
        f"name: esc\nserver: {{command: {command}, timeout: 10s, grace: 1s}}\nmatrix:\n  a: {{env: A, values: [x]}}\n"
    )
    run = diagbench("run", "spec.yaml", "--run-id", "esc", cwd=tmp_path)
    assert_nothing_left("esc")
    outputs = {"run": run.stdout + run.stderr}
    for fmt in ("table", "md", "junit"):
        outputs[fmt] = diagbench("report", "runs/esc", "--format", fmt, cwd=tmp_path).stdout
    log = next((tmp_path / "runs" / "esc").glob("cells/*/server.log"))
    outputs["classify"] = diagbench("classify", str(log), cwd=tmp_path).stdout
    for where, text in outputs.items():
        assert "\x1b" not in text and "\x07" not in text and "\u202e" not in text, where
        assert "\\x1b[2J" in text, where  # shown, as an escape


def test_a_record_written_by_hand_with_escapes_in_its_fields(run: Path) -> None:
    edit(results(run)[0], phase="\x1b]0;title\x07capture", reason="\x1b[2J")
    proc = diagbench("report", str(run), cwd=run.parent)
    assert proc.returncode == 0
    assert "\x1b" not in proc.stdout and "\\x1b]0;title\\x07capture" in proc.stdout


@pytest.mark.parametrize("attempts", ["not a list", [{"no": "attempt"}], []])
def test_a_run_whose_plan_cannot_be_read_is_never_called_complete(run: Path, attempts: object) -> None:
    manifest = json.loads((run / "manifest.json").read_text())
    manifest["attempts"] = attempts
    (run / "manifest.json").write_text(json.dumps(manifest))
    assert json.loads(diagbench("report", str(run), "--format", "json", cwd=run.parent).stdout)["complete"] is False
    md = diagbench("report", str(run), "--format", "md", cwd=run.parent).stdout
    assert "Run `r`, partial" in md and "Run `r`, complete" not in md
    assert (
        "partial: some attempts have no outcome"
        in diagbench("report", str(run), "--format", "html", cwd=run.parent).stdout
    )
