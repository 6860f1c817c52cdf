"""The contract every executor must pass (docs/executors.md): parametrised over the local
executor, the in-process fake (execute/fake.py) and Slurm where one is up (.ci/slurm.sh).

One spec whose cells end every way a log can decide: each executor gives each attempt one
record, on disk as returned, with the outcome the local executor gives, names itself in the
record, tells the run's events, and a run cancelled before it starts launches nothing."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from conftest import Runs, fake_command, slurm_is_up, write_spec
from diagbench.execute.cancel import Cancel
from diagbench.execute.executors import kinds, on_this_host, plugin_for, register, unregister
from diagbench.execute.fake import FAKE, FakePlugin
from diagbench.execute.pipeline import RunOptions, execute
from diagbench.records.record import AttemptRecord
from diagbench.spec.executor import ExecutorSpec
from diagbench.spec.load import load_spec
from diagbench.spec.plan import PlannedAttempt
from diagbench.vocab import Outcome

CASES = {"ok": "out=READY", "boom": "out=BOOM", "oom": "out=OOM while capturing", "silent": "out=loading"}
EXPECTED = {"ok": "ready", "boom": "failed:other", "oom": "failed:oom", "silent": "timeout"}
HYPOTHESES = [
    {"id": "oom-fails", "when": {"case": ["oom"]}, "supported_if": "failed:oom", "refuted_if": "ready"},
    {"id": "ok-starts", "when": {"case": ["ok"]}, "supported_if": "ready", "refuted_if": "failed"},
]
KINDS = [
    "local",
    FAKE,
    pytest.param("slurm", marks=[pytest.mark.slurm, pytest.mark.skipif(not slurm_is_up(), reason="no Slurm here")]),
    pytest.param("ray", marks=[pytest.mark.ray]),  # skipped where no Ray answers (tests/conftest.py)
]


def fake_logs(item: PlannedAttempt) -> str:
    """What the fake server of the spec below writes for this attempt: its `out=` lines."""
    return "".join(arg[4:] + "\n" for arg in item.cell.args if arg.startswith("out="))


@pytest.fixture(autouse=True)
def fake_registered() -> Iterator[None]:
    register(FakePlugin(fake_logs))
    yield
    unregister(FAKE)


def spec_of(folder: Path) -> Path:
    return write_spec(
        folder,
        {
            "command": fake_command(),
            "ready": {"log": "^READY"},
            "failures": {"boom": "^BOOM", "oom": {"pattern": "^OOM", "class": "oom"}},
            "timeout": "4s",
        },
        {"case": {"args": ["{value}", "hang"], "values": CASES}},
        hypotheses=HYPOTHESES,
    )


def on_disk(run_dir: Path, record: AttemptRecord) -> AttemptRecord:
    return AttemptRecord.from_json(json.loads((run_dir / "cells" / record.attempt / "result.json").read_text()))


@pytest.mark.parametrize("kind", KINDS)
def test_each_attempt_ends_in_one_record_with_the_outcome_its_log_decides(kind: str, runs: Runs) -> None:
    result = runs.run(spec_of(runs.folder), executor=ExecutorSpec(kind=kind), repeat=2)
    labels = {r.attempt: r.label for r in result.records}
    assert labels == {f"{i:03d}-case-{c}-r{n}": EXPECTED[c] for i, c in enumerate(CASES, 1) for n in (1, 2)}
    for record in result.records:
        assert on_disk(result.run_dir.path, record) == record
        assert record.executor is not None and record.executor.kind == kind and record.executor.node
        assert (result.run_dir.cells / record.attempt / "server.log").stat().st_size > 0
        if record.outcome is Outcome.FAILED:
            assert record.evidence is not None and record.evidence.text in ("BOOM", "OOM while capturing")
    started = [name for event, name, _ in runs.events if event == "start"]
    done = [name for event, name, _ in runs.events if event == "done"]
    assert sorted(started) == sorted(done) == sorted(labels)
    assert [(v.id, v.verdict.value) for v in result.verdicts] == [
        ("oom-fails", "supported"),
        ("ok-starts", "supported"),
    ]
    manifest = json.loads((result.run_dir.path / "manifest.json").read_text())
    assert manifest["options"]["executor"]["kind"] == kind
    if kind == "slurm":  # what its plugin adds: one job per attempt, the options every job got
        assert all(r.executor is not None and str(r.executor.job_id).isdigit() for r in result.records)
        assert "--no-requeue" in manifest["options"]["executor"]["sbatch"]
    if kind == "ray":  # one Ray job per attempt, named by its submission id, on a node Ray names
        assert all(r.executor is not None and str(r.executor.job_id).startswith("diagbench-") for r in result.records)
        assert manifest["options"]["executor"]["ray_version"]


@pytest.mark.parametrize("kind", [k for k in KINDS if k != "local"])
def test_it_gives_the_records_and_verdicts_a_local_run_gives(kind: str, runs: Runs) -> None:
    spec = spec_of(runs.folder)
    local = runs.run(spec, run_id="local")
    other = runs.run(spec, run_id=kind, executor=ExecutorSpec(kind=kind))
    assert [r.attempt for r in other.records] == [r.attempt for r in local.records]
    assert [r.label for r in other.records] == [r.label for r in local.records]
    assert [(r.signature, r.evidence) for r in other.records] == [(r.signature, r.evidence) for r in local.records]
    assert [(v.id, v.verdict) for v in other.verdicts] == [(v.id, v.verdict) for v in local.verdicts]


@pytest.mark.parametrize("kind", KINDS)
def test_a_run_cancelled_before_it_starts_launches_nothing_and_records_every_attempt(kind: str, tmp_path: Path) -> None:
    spec = load_spec(spec_of(tmp_path))
    cancel = Cancel()
    cancel.set("stopped by the test")
    try:
        options = RunOptions(tmp_path / "runs", executor=ExecutorSpec(kind=kind))
        result = execute(spec, options, Runs(tmp_path), cancel)
    finally:
        cancel.close()
    assert [r.outcome for r in result.records] == [Outcome.CANCELLED] * len(CASES)
    assert all(r.command == [] for r in result.records)  # never launched
    assert not list(result.run_dir.cells.glob("*/server.log"))
    assert {r.reason for r in result.records} == {"not started: stopped by the test"}


def test_every_registered_kind_offers_only_options_over_its_own_spec_keys() -> None:
    for kind in kinds():
        plugin = plugin_for(kind)
        assert plugin.kind == kind
        assert {o.key for o in plugin.options} <= {k.name for k in plugin.keys}, kind
        assert all(o.flag.startswith(f"--{kind}-") for o in plugin.options), kind


def test_the_fake_executor_is_real_enough_to_be_wrong(tmp_path: Path, runs: Runs) -> None:
    """The contract can fail: an executor whose logs say otherwise gives other records."""
    register(FakePlugin(lambda item: "READY\n"))
    result = runs.run(spec_of(runs.folder), executor=ExecutorSpec(kind=FAKE))
    assert {r.label for r in result.records} == {"ready"} != set(EXPECTED.values())
    records: dict[str, Any] = {r.attempt: r for r in result.records}
    assert len(records) == len(CASES)


def test_only_a_kind_that_runs_here_leaves_attempts_that_die_with_their_diagbench() -> None:
    """What a dead diagbench left unrecorded, and the GPUs a resumed run takes back, are this
    host's only for a kind whose attempts run here (an older run without a kind ran here)."""
    assert on_this_host(None) and on_this_host("local") and on_this_host(FAKE)
    assert not on_this_host("slurm") and not on_this_host("a-kind-registered-nowhere")
