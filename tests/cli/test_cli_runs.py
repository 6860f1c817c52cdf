"""The CLI end to end: exit codes, reports of full and partial runs, JUnit, step summary, diff."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from conftest import fake_command, run_cli

ROOT = Path(__file__).resolve().parents[2]
READY = "The server is fired up and ready to roll!"


def diagbench(*args: str, env: dict[str, str] | None = None, cwd: Path | None = None) -> subprocess.CompletedProcess:
    return run_cli(*args, env=env, cwd=cwd)


def write(tmp: Path, text: str) -> Path:
    path = tmp / "spec.yaml"
    path.write_text(text)
    return path


@pytest.fixture
def two_mode_spec(tmp_path: Path):
    def make(good_ready: bool) -> Path:
        # a tiny dispatcher: the axis value picks which fake-server script runs
        good = fake_command(f"out={READY}", "hang") if good_ready else fake_command("err=CUDA out of memory", "exit=1")
        bad = fake_command("err=torch.OutOfMemoryError: CUDA out of memory.", "exit=1")
        dispatch = tmp_path / "dispatch.py"
        dispatch.write_text(
            f"import os, sys\ncmds = {{'a': {good!r}, 'b': {bad!r}}}\nos.execv(sys.executable, cmds[sys.argv[1]])\n"
        )
        return write(
            tmp_path,
            f"""
name: cli
server:
  command: [{json.dumps(sys.executable)}, {json.dumps(str(dispatch))}]
  timeout: 10s
  grace: 1s
matrix:
  mode: {{args: ["{{value}}"], values: {{good: "a", bad: "b"}}}}
expect:
  - {{when: {{mode: good}}, outcome: ready}}
hypotheses:
  - id: good-is-ready
    claim: the good mode comes up
    when: {{mode: good}}
    supported_if: ready
    refuted_if: [failed, crashed]
  - id: bad-fails
    claim: the bad mode fails on OOM
    when: {{mode: bad}}
    supported_if: failed:oom
    refuted_if: ready
    meaning:
      supported: bad really is bad
""",
        )

    return make


def test_exit_0_when_expectations_hold_and_reports_parse(two_mode_spec, tmp_path):
    spec = two_mode_spec(good_ready=True)
    summary = tmp_path / "summary.md"
    junit = tmp_path / "junit.xml"
    proc = diagbench(
        "run",
        str(spec),
        "--runs-dir",
        str(tmp_path / "runs"),
        "--junit",
        str(junit),
        env={"GITHUB_STEP_SUMMARY": str(summary)},
    )
    assert proc.returncode == 0, proc.stderr
    assert "supported" in proc.stdout and "bad really is bad" in proc.stdout
    md = summary.read_text()
    assert "| `good-is-ready` the good mode comes up | **supported** |" in md
    assert "| `bad-fails` the bad mode fails on OOM | **supported** |" in md
    tree = ET.parse(junit).getroot()
    cases = {c.get("name"): c for c in tree.iter("testcase")}
    assert set(cases) == {"001-mode-good-r1", "002-mode-bad-r1", "good-is-ready", "bad-fails"}
    assert all(c.find("failure") is None for c in cases.values())
    assert READY in cases["001-mode-good-r1"].find("system-out").text
    data = json.loads(diagbench("report", str(tmp_path / "runs" / "latest"), "--format", "json").stdout)
    assert [v["verdict"] for v in data["verdicts"]] == ["supported", "supported"]
    assert data["complete"] is True and data["hypotheses_sha256_matches"] is True


def test_exit_1_when_an_expectation_is_violated(two_mode_spec, tmp_path):
    spec = two_mode_spec(good_ready=False)
    proc = diagbench("run", str(spec), "--runs-dir", str(tmp_path / "runs"))
    assert proc.returncode == 1, proc.stderr
    assert "expect #1 violated: mode=good wanted ready, got failed:oom" in proc.stdout
    junit = diagbench("report", str(tmp_path / "runs" / "latest"), "--format", "junit")
    assert junit.returncode == 1
    root = ET.fromstring(junit.stdout)
    failing = {c.get("name") for c in root.iter("testcase") if c.find("failure") is not None}
    assert failing == {"001-mode-good-r1", "good-is-ready"}


def test_strict_fails_unless_every_hypothesis_is_supported(two_mode_spec, tmp_path):
    spec = two_mode_spec(good_ready=True)
    proc = diagbench("run", str(spec), "--runs-dir", str(tmp_path / "runs"), "--only", "mode=good", "--strict")
    assert proc.returncode == 1  # bad-fails was not run: inconclusive
    report = diagbench("report", str(tmp_path / "runs" / "latest"), "--format", "md")
    assert "| **inconclusive** | mode=bad not run |" in report.stdout
    assert report.returncode == 0


def test_report_judges_against_the_manifest_not_the_edited_spec(two_mode_spec, tmp_path):
    spec = two_mode_spec(good_ready=True)
    assert diagbench("run", str(spec), "--runs-dir", str(tmp_path / "runs")).returncode == 0
    spec.write_text(spec.read_text().replace("supported_if: failed:oom", "supported_if: ready"))
    data = json.loads(diagbench("report", str(tmp_path / "runs" / "latest"), "--format", "json").stdout)
    assert [v["verdict"] for v in data["verdicts"]] == ["supported", "supported"]
    manifest = tmp_path / "runs" / "latest" / "manifest.json"
    tampered = json.loads(manifest.read_text())
    tampered["hypotheses"][1]["supported_if"] = ["ready"]
    manifest.write_text(json.dumps(tampered))
    table = diagbench("report", str(tmp_path / "runs" / "latest"))
    assert "MISMATCH: the manifest was edited after the run" in table.stdout


def test_report_reads_a_partial_run(two_mode_spec, tmp_path):
    spec = two_mode_spec(good_ready=True)
    diagbench("run", str(spec), "--runs-dir", str(tmp_path / "runs"))
    run = (tmp_path / "runs" / "latest").resolve()
    shutil.rmtree(run / "cells" / "002-mode-bad-r1")  # as if diagbench died before it
    data = json.loads(diagbench("report", str(run), "--format", "json").stdout)
    assert data["complete"] is False
    assert [v["verdict"] for v in data["verdicts"]] == ["supported", "inconclusive"]


def test_report_on_a_missing_run_is_a_usage_error(tmp_path):
    proc = diagbench("report", str(tmp_path / "nope"))
    assert proc.returncode == 2
    assert (
        proc.stderr
        == f"diagbench: {tmp_path / 'nope'}: no such run directory (runs are under runs/, e.g. runs/latest)\n"
    )


def test_diff_names_changed_cells_and_verdicts(two_mode_spec, tmp_path):
    good = two_mode_spec(good_ready=True)
    diagbench("run", str(good), "--runs-dir", str(tmp_path / "runs"), "--run-id", "night1")
    two_mode_spec(good_ready=False)
    diagbench("run", str(good), "--runs-dir", str(tmp_path / "runs"), "--run-id", "night2")
    proc = diagbench("diff", str(tmp_path / "runs" / "night1"), str(tmp_path / "runs" / "night2"))
    assert proc.returncode == 1
    assert (
        "REGRESSION cell mode=good: ready -> failed:other" in proc.stdout
        or "REGRESSION cell mode=good: ready -> failed:oom" in proc.stdout
    )
    assert "hypothesis good-is-ready: supported -> refuted" in proc.stdout
    same = diagbench("diff", str(tmp_path / "runs" / "night2"), str(tmp_path / "runs" / "night2"))
    assert same.returncode == 0 and "no change" in same.stdout


def test_the_demo_runs_and_decides(tmp_path):
    proc = diagbench("run", str(ROOT / "experiments" / "demo.yaml"), "--runs-dir", str(tmp_path / "runs"))
    assert proc.returncode == 0, proc.stderr
    data = json.loads(diagbench("report", str(tmp_path / "runs" / "latest"), "--format", "json").stdout)
    verdicts = {v["id"]: v["verdict"] for v in data["verdicts"]}
    assert verdicts == {
        "kernel-is-blocker": "refuted",
        "inductor-graphs-collide": "refuted",
        "eager-is-healthy": "supported",
    }
    assert {a["outcome"] for a in data["attempts"]} == {"ready", "failed"}


def test_plan_lists_every_cell_with_argv_and_env(tmp_path):
    proc = diagbench("plan", str(ROOT / "experiments" / "demo.yaml"))
    assert proc.returncode == 0
    assert proc.stdout.count("    argv: ") == 6
    assert "env:  SGLANG_SM120_MMA_FLASHMLA=0  unset TORCHINDUCTOR_CUDAGRAPHS" in proc.stdout
    assert "decides: kernel-is-blocker" in proc.stdout


@pytest.mark.parametrize(
    "name", ["refserver-capture-h200", "refserver-capture-h200-fresh-caches", "refserver-cold-shapes-h200"]
)
def test_the_committed_gpu_evidence_runs_read_back(name):
    run = ROOT / "runs" / name
    proc = diagbench("report", str(run), "--format", "json")
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    assert data["complete"] and data["hypotheses_sha256_matches"]
    outcomes = {a["outcome"] + (":" + a["failure_class"] if a["failure_class"] else "") for a in data["attempts"]}
    assert "failed:cuda_graph_capture" in outcomes and outcomes <= {"ready", "failed:cuda_graph_capture"}
    assert all(v["verdict"] != "inconclusive" for v in data["verdicts"])
    manifest = json.loads((run / "manifest.json").read_text())
    assert manifest["provenance"]["gpus"][0]["name"] == "NVIDIA H200"


@pytest.mark.parametrize("spec", sorted((ROOT / "experiments").glob("*.yaml")))
def test_every_shipped_experiment_plans(spec):
    proc = diagbench("plan", str(spec))
    assert proc.returncode == 0, proc.stderr


def test_resume_finishes_only_what_did_not_end(tmp_path):
    from conftest import write_spec

    spec = write_spec(
        tmp_path,
        {"command": fake_command(f"out={READY}", "hang")},
        matrix={"n": {"env": "N", "values": ["1", "2", "3"]}},
    )
    assert diagbench("run", str(spec), "--runs-dir", str(tmp_path / "runs")).returncode == 0
    run = (tmp_path / "runs" / "latest").resolve()
    results = sorted(run.glob("cells/*/result.json"))
    first = results[0].read_text()
    (results[1]).unlink()  # as if diagbench was killed before the second attempt ended
    cancelled = json.loads(results[2].read_text()) | {"outcome": "cancelled"}
    results[2].write_text(json.dumps(cancelled))
    proc = diagbench("run", str(spec), "--resume", str(run))
    assert proc.returncode == 0, proc.stderr
    assert results[0].read_text() == first  # not launched again
    assert [json.loads(p.read_text())["outcome"] for p in sorted(run.glob("cells/*/result.json"))] == ["ready"] * 3
    original = spec.read_text()
    spec.write_text(original + "\ndescription: changed\n")
    refused = diagbench("run", str(spec), "--resume", str(run))
    assert refused.returncode == 2
    assert f"{spec.resolve()} changed since this run started" in refused.stderr
    spec.write_text(original)
    finished = diagbench("run", str(spec), "--resume", str(run))
    assert finished.returncode == 0, finished.stderr
    assert "nothing to resume: every one of the 3 attempt(s)" in finished.stderr
    assert finished.stdout == ""  # not the tables again
    other = tmp_path / "other" / "spec.yaml"
    other.parent.mkdir()
    other.write_text(spec.read_text() + "\ndescription: another\n")
    wrong = diagbench("run", str(other), "--resume", str(run))
    assert wrong.returncode == 2
    assert f"this run was started with {spec.resolve()}, not {other}" in wrong.stderr


def test_diff_of_the_two_gpu_runs_shows_the_cache_artifact():
    proc = diagbench(
        "diff",
        str(ROOT / "runs" / "refserver-capture-h200"),
        str(ROOT / "runs" / "refserver-capture-h200-fresh-caches"),
    )
    assert proc.returncode == 1
    assert (
        "REGRESSION cell kernel=torch,compile=on,inductor_graphs=unset,warmup=first: ready -> failed:cuda_graph_capture"
        in proc.stdout
    )
    assert "hypothesis custom-kernel-breaks-capture: supported -> refuted" in proc.stdout


def test_an_unwritable_junit_path_is_one_message_before_anything_runs(two_mode_spec, tmp_path):
    spec = two_mode_spec(good_ready=True)
    proc = diagbench(
        "run", str(spec), "--runs-dir", str(tmp_path / "runs"), "--junit", str(tmp_path / "no" / "such" / "j.xml")
    )
    assert proc.returncode == 2
    assert proc.stderr == (
        f"diagbench: --junit {tmp_path / 'no' / 'such' / 'j.xml'}: cannot write there (No such file or "
        "directory); fix the path, nothing was run\n"
    )
    assert not (tmp_path / "runs").exists()  # found before the first launch, not after the matrix
