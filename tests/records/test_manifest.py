"""The manifest as typed data: read in one place, written from the same value, exactly as
committed runs hold it; a newer version refused, a malformed part named and left out."""

from __future__ import annotations

import json
import shutil
import subprocess
from dataclasses import replace
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from conftest import diagbench_argv, fake_command, write_spec
from diagbench.errors import RecordError, RunDirError
from diagbench.records.build_manifest import build_manifest
from diagbench.records.manifest import Manifest, PlannedEntry, RunSettings
from diagbench.records.record import not_launched
from diagbench.records.store import RunDir, read_manifest
from diagbench.schemas import load_schema
from diagbench.spec.hypotheses import Condition
from diagbench.spec.load import load_spec
from diagbench.spec.plan import plan_attempts
from diagbench.vocab import FAILURE_CLASSES, FailureClass, Outcome

ROOT = Path(__file__).resolve().parents[2]
RUNS = sorted(p for p in (ROOT / "runs").iterdir() if (p / "manifest.json").is_file())


@pytest.mark.parametrize("run", RUNS, ids=lambda p: p.name)
def test_every_committed_manifest_reads_whole_and_writes_back_byte_for_byte(run: Path) -> None:
    data = json.loads((run / "manifest.json").read_text())
    manifest = read_manifest(run)
    assert manifest.problems == ()
    assert manifest.to_json() == data
    assert [a.attempt for a in manifest.attempts] == [a["attempt"] for a in data["attempts"]]


def _spec(tmp_path: Path) -> Any:
    path = write_spec(tmp_path, {"command": fake_command("ready")}, {"mode": {"env": "MODE", "values": ["a", "b"]}})
    return load_spec(path)


def test_a_built_manifest_matches_the_schema_and_reads_back_equal(tmp_path: Path) -> None:
    spec = _spec(tmp_path)
    settings = RunSettings(only=(), repeat=2, parallel=None, gpus=(), gpus_per_attempt=0, slots=((),))
    built = build_manifest(spec, plan_attempts(spec.cells, 2), "r1", replace(settings, stop_when_decided=False), {})
    jsonschema.validate(built.to_json(), load_schema("manifest"))
    assert Manifest.from_json(json.loads(json.dumps(built.to_json()))) == built
    assert [a.repeat for a in built.attempts] == [1, 2, 1, 2]
    assert built.to_json()["options"] == {
        "only": [],
        "repeat": 2,
        "parallel": None,
        "gpus": [],
        "gpus_per_attempt": 0,
        "slots": [[]],
        "stop_when_decided": False,
        "fail_fast": False,
    }
    assert "environment" not in built.to_json()


def test_the_environment_is_kept_as_given_when_there_is_one(tmp_path: Path) -> None:
    spec = _spec(tmp_path)
    dists = [{"name": "x", "version": "1.0", "origin": {"kind": "index"}}]
    environment: dict[str, Any] = {
        "python": {"interpreter": "/v/bin/python", "python": "3.12.1", "distributions": dists}
    }
    environment |= {"gpus": None, "variables": {"NCCL_DEBUG": "INFO"}}  # the server's (launch/environment.py)
    built = replace(build_manifest(spec, [], "r1", RunSettings(), {}), environment=environment)
    data = built.to_json()
    assert data["environment"] == environment
    jsonschema.validate(data, load_schema("manifest"))
    assert Manifest.from_json(data).environment == environment


def test_a_newer_manifest_is_refused_and_a_mistyped_version_named(tmp_path: Path) -> None:
    with pytest.raises(RecordError, match="manifest_version 2: written by a newer diagbench"):
        Manifest.from_json({"manifest_version": 2})
    with pytest.raises(RecordError, match="field 'manifest_version': expected an integer, got '1'"):
        Manifest.from_json({"manifest_version": "1"})
    run = RunDir(tmp_path / "r")
    run.path.mkdir()
    (run.path / "manifest.json").write_text(json.dumps({"manifest_version": 3}))
    with pytest.raises(RunDirError, match=f"^{tmp_path / 'r' / 'manifest.json'}: manifest_version 3"):
        read_manifest(run.path)


def test_each_malformed_part_is_named_and_the_rest_read() -> None:
    manifest = Manifest.from_json(
        {
            "run_id": "r",
            "attempts": [{"attempt": "a", "cell_id": "c", "repeat": 1}, {"attempt": "b", "cell_id": "c"}, 7],
            "cells": "none",
            "provenance": [],
            "options": {"gpus": "0,1", "parallel": 2},
        }
    )
    assert manifest.attempts == (PlannedEntry("a", "c", 1),)
    assert [str(p) for p in manifest.problems] == [
        "attempts[1]: field 'repeat': expected an integer, got None",
        "attempts[2]: expected {attempt, cell_id, repeat, ...}",
        "field 'cells': expected a list",
        "options.gpus: expected a list of GPU ids, got '0,1'; give --gpus again",
        "field 'provenance': expected a mapping",
    ]
    assert manifest.failed("attempts") and not manifest.failed("hypotheses")
    assert manifest.settings == RunSettings()


def test_a_record_of_an_attempt_that_never_launched_is_the_same_whoever_planned_it(tmp_path: Path) -> None:
    from diagbench.execute.remote.files import JobFile

    spec = _spec(tmp_path)
    item = plan_attempts(spec.cells, 1)[1]
    entry = PlannedEntry(item.name, item.cell.id, 1, dict(item.cell.params))
    job = JobFile(item.name, item.cell.id, 1, dict(item.cell.params), str(spec.path), spec.sha256)
    at = "2026-12-03T04:00:00+00:00"
    made = [not_launched(p, Outcome.CANCELLED, "stopped", ended_at=at) for p in (item, entry, job)]
    assert made[0] == made[1] == made[2]
    assert (made[0].command, made[0].env_changes, made[0].params, made[0].ended_at) == ([], {}, {"mode": "b"}, at)
    jsonschema.validate(made[0].to_json(), load_schema("result"))
    assert not_launched(item, Outcome.SKIPPED, "decided").ended_at  # when it was settled, always said


def test_the_failure_classes_are_the_words_the_schemas_accept() -> None:
    schema: Any = load_schema("manifest")
    pattern = schema["$defs"]["condition"]["pattern"]
    words = pattern.split("(:(")[1].split("))")[0].split("|")
    assert words == [c.value for c in FailureClass] == list(FAILURE_CLASSES)
    assert FailureClass.of("oom") is FailureClass.OOM and FailureClass.of("ooms") is None
    failed = not_launched(PlannedEntry("a", "c", 1), Outcome.FAILED, "")
    assert not Condition(Outcome.FAILED, FailureClass.OOM).holds(failed)
    assert Condition(Outcome.FAILED, FailureClass.OOM).holds(replace(failed, failure_class="oom"))


HAND_EDITED = [
    {"python": "x"},
    {"python": {"interpreter": 3}},
    {"python": {"interpreter": "/p", "distributions": "all"}},
    {"python": {"interpreter": "/p", "distributions": [{"name": "torch"}]}},
    {"python": {"interpreter": "/p", "distributions": [{"name": "t", "version": "1", "origin": "pypi"}]}},
    {"python": {"interpreter": "/p", "distributions": [], "torch": "2.1"}},
    {"gpus": 5},
    {"gpus": ["H200"]},
    {"variables": ["A=1"]},
    {"variables": {"A": 1}},
    "python",
]


@pytest.fixture(scope="module")
def two_runs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Two real runs of one spec (made once; each test edits its own copy)."""
    folder = tmp_path_factory.mktemp("two")
    ready = fake_command("out=The server is fired up and ready to roll!", "hang")
    spec = write_spec(folder, {"command": ready, "timeout": "20s"})
    for name in ("a", "b"):
        argv = diagbench_argv("run", str(spec), "--runs-dir", str(folder / "runs"), "--run-id", name)
        assert subprocess.run(argv, capture_output=True, timeout=120).returncode == 0
    return folder / "runs"


@pytest.mark.parametrize("environment", HAND_EDITED, ids=range(len(HAND_EDITED)))
def test_a_hand_edited_environment_is_named_and_refused_never_a_traceback(
    tmp_path: Path, two_runs: Path, environment: Any
) -> None:
    runs = [tmp_path / name for name in ("a", "b")]
    for run in runs:
        shutil.copytree(two_runs / run.name, run)
    data = json.loads((runs[0] / "manifest.json").read_text())
    data["environment"] = environment
    data["attempts"][0]["environment"] = environment
    (runs[0] / "manifest.json").write_text(json.dumps(data))
    manifest = read_manifest(runs[0])
    assert manifest.environment is None and manifest.attempts[0].environment is None
    assert [p.part for p in manifest.problems] == ["environment"]
    for command in (("diff", *map(str, runs)), ("report", str(runs[0]), "--format", "issue")):
        done = subprocess.run(diagbench_argv(*command), capture_output=True, text=True, timeout=120)
        assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr  # it was one, exit 1
        assert f"{runs[0]}/manifest.json: field 'environment': " in done.stderr
