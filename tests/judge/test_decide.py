"""--stop-when-decided, --fail-fast and flaky repeats: the pure rules (checked against every
way a small run can end), then real runs of fake servers, one per hypothesis shape."""

from __future__ import annotations

import itertools
import json
import random
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
import yaml

from conftest import run_cli
from diagbench.judge.decide import NOTHING_TO_DECIDE, Decider, decision_order
from diagbench.judge.diff import diff_runs
from diagbench.judge.verdicts import check_expectations, judge
from diagbench.judge.view import view_of
from diagbench.records.record import AttemptRecord
from diagbench.records.store import load_run
from diagbench.spec.load import Spec, load_spec
from diagbench.spec.plan import PlannedAttempt, plan_attempts
from diagbench.vocab import Outcome

ROOT = Path(__file__).resolve().parents[2]
READY = "The server is fired up and ready to roll!"
ENDINGS = [("ready", None), ("failed", "cuda_graph_capture"), ("failed", "oom"), ("timeout", None)]


def ended(item: PlannedAttempt, outcome: str, cls: str | None = None, reason: str = "") -> AttemptRecord:
    return AttemptRecord(
        cell_id=item.cell.id,
        repeat=item.repeat,
        attempt=item.name,
        params=dict(item.cell.params),
        command=[],
        env_changes={},
        outcome=Outcome(outcome),
        failure_class=cls,
        reason=reason,
    )


def outcome_of(spec: Spec, records: Sequence[AttemptRecord]) -> tuple[list[str], list[int]]:
    """What a run concludes: each verdict word, and which expects were violated."""
    verdicts = [judge(h, spec.cells, records).verdict.value for h in spec.hypotheses]
    violated = sorted({v.expectation for v in check_expectations(spec.expectations, records)})
    return verdicts, violated


def simulate(spec: Spec, planned: list[PlannedAttempt], ends: dict[str, tuple[str, str | None]], slots: int, seed: int):
    """A run with the gate, `slots` at a time, attempts finishing in a random order."""
    repeat = max(p.repeat for p in planned)
    decider = Decider(spec.hypotheses, spec.expectations, stop_when_decided=True, repeat=repeat)
    rng = random.Random(seed)
    todo = decision_order(planned, spec.hypotheses, spec.expectations)
    running: list[PlannedAttempt] = []
    records: list[AttemptRecord] = []
    while todo or running:
        while todo and len(running) < slots:
            item = todo.pop(0)
            reason = decider(item, records)
            if reason is None:
                running.append(item)
            else:
                records.append(ended(item, "skipped", reason=reason))
        if running:
            item = running.pop(rng.randrange(len(running)))
            records.append(ended(item, *ends[item.name]))
    return records


def demo() -> Spec:
    return load_spec(ROOT / "experiments" / "demo.yaml")


@pytest.mark.parametrize("slots", [1, 3])
def test_verdicts_and_expects_equal_a_full_runs_for_every_way_the_demo_can_end(slots):
    spec = demo()
    planned = plan_attempts(spec.cells, 1)
    launches = 0
    combos = list(itertools.product(ENDINGS, repeat=len(planned)))[slots::5]  # a fifth of them: CI has 2 cores
    for n, combo in enumerate(combos):
        ends = {p.name: e for p, e in zip(planned, combo, strict=True)}
        full = [ended(p, *ends[p.name]) for p in planned]
        gated = simulate(spec, planned, ends, slots, seed=n)
        assert outcome_of(spec, gated) == outcome_of(spec, full), ends
        launches += sum(r.outcome.ran for r in gated)
    assert launches < len(planned) * len(combos)  # and it does skip


def test_with_repeats_and_two_hypotheses_over_one_cell(tmp_path):
    spec = load_spec(
        write(
            tmp_path,
            hypotheses=[
                {"id": "up", "when": {"mode": ["a", "b"]}, "supported_if": "ready", "refuted_if": "failed"},
                {"id": "only-crash-refutes", "when": {"mode": "b"}, "supported_if": "ready", "refuted_if": "crashed"},
            ],
            expect=[{"when": {"mode": "a"}, "outcome": "ready"}],
        )
    )
    planned = plan_attempts(spec.cells, 2)
    for n, combo in enumerate(itertools.product(ENDINGS, repeat=len(planned))):
        ends = {p.name: e for p, e in zip(planned, combo, strict=True)}
        full = [ended(p, *ends[p.name]) for p in planned]
        assert outcome_of(spec, simulate(spec, planned, ends, 2, seed=n)) == outcome_of(spec, full), ends


def test_the_demo_order_tries_each_hypothesis_first_and_ends_with_what_decides_nothing():
    spec = demo()
    order = [p.cell.index for p in decision_order(plan_attempts(spec.cells, 1), spec.hypotheses, spec.expectations)]
    assert order == [3, 2, 4, 6, 5, 1]
    twice = decision_order(plan_attempts(spec.cells, 2), spec.hypotheses, spec.expectations)
    assert [p.repeat for p in twice[:5]] == [1] * 5  # every first launch before any repeat


def test_skip_reasons_name_what_is_already_decided():
    spec = demo()
    planned = {p.cell.index: p for p in plan_attempts(spec.cells, 1)}
    decider = Decider(spec.hypotheses, spec.expectations, stop_when_decided=True)
    assert decider(planned[1], []) == NOTHING_TO_DECIDE
    assert decider(planned[5], []) is None
    records = [ended(planned[2], "failed", "cuda_graph_capture")]
    assert decider(planned[5], records) == (
        "hypothesis inductor-graphs-collide already refuted by "
        "kernel=mma,compile=on,max_bs=32,inductor_graphs=0 (failed:cuda_graph_capture)"
    )
    # supported needs every deciding attempt: a ready eager cell does not spare the other
    assert decider(planned[6], [ended(planned[3], "ready")]) is None
    # a violated expect alone does not spare a cell a hypothesis still needs
    assert decider(planned[6], [ended(planned[3], "failed", "oom")]) is not None  # eager-is-healthy refuted
    assert decider(planned[6], [ended(planned[3], "timeout")]) is None  # timed out: could still be refuted


def test_fail_fast_skips_everything_after_a_violated_expect_only():
    spec = demo()
    planned = {p.cell.index: p for p in plan_attempts(spec.cells, 1)}
    decider = Decider(spec.hypotheses, spec.expectations, fail_fast=True)
    assert decider(planned[1], [ended(planned[2], "failed", "oom")]) is None  # no expect selects cell 2
    reason = decider(planned[1], [ended(planned[3], "crashed")])
    assert (
        reason
        == "expect #1 already violated by kernel=mma,compile=off,max_bs=32,inductor_graphs=unset (crashed) (--fail-fast)"
    )


# -- real runs: a dispatcher picks what each fake server does from its cell and repeat ---------


def dispatcher(tmp_path: Path, modes: dict[str, Any]) -> Path:
    """mode -> actions, or mode -> {repeat: actions} (the repeat read from the attempt's tag)."""
    path = tmp_path / "dispatch.py"
    path.write_text(
        "import os, sys\n"
        f"modes = {modes!r}\n"
        "mode = modes[sys.argv[1]]\n"
        "if isinstance(mode, dict):\n"
        "    mode = mode[os.environ['DIAGBENCH_ATTEMPT'].rsplit('-r', 1)[1]]\n"
        f"os.execv(sys.executable, [sys.executable, {str(ROOT / 'tests' / 'fakeserver.py')!r}, *mode])\n"
    )
    return path


MODES = {
    "ok1": [f"out={READY}", "hang"],
    "ok2": [f"out={READY}", "hang"],
    "bad": ["err=Exception: Capture cuda graph failed: CUDA error: operation not permitted", "hang"],
    "crash": ["out=loading", "exit=3"],
    "flaky": {
        "1": [f"out={READY}", "hang"],
        "2": ["err=Exception: Capture cuda graph failed: CUDA error: operation not permitted", "exit=1"],
        "3": [f"out={READY}", "hang"],
    },
}


def write(tmp_path: Path, values: Sequence[str] = ("a", "b"), **top: Any) -> Path:
    dispatch = dispatcher(tmp_path, MODES)
    spec = {
        "name": "decide",
        "server": {
            "command": [sys.executable, str(dispatch)],  # the mode reaches it as its one argument
            "ready": {"log": "fired up and ready"},
            "timeout": "20s",
            "grace": "2s",
        },
        "matrix": {"mode": {"args": ["{value}"], "values": list(values)}},
        **top,
    }
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    return path


def both(runs, spec: Path, **kw: Any):
    """The run with --stop-when-decided, and a full run of the same spec."""
    gated = runs.run(spec, stop_when_decided=True, **kw)
    full = runs.run(spec, **kw)
    words = [v.verdict for v in gated.verdicts]
    assert words == [v.verdict for v in full.verdicts]
    return gated, words


def shown(result) -> dict[str, tuple[str, str]]:
    """mode -> (outcome, reason where it was not launched)."""
    return {r.params["mode"]: (r.outcome.value, "" if r.outcome.ran else r.reason) for r in result.records}


def test_refuted_early_skips_the_rest_of_its_cells(runs, tmp_path):
    spec = write(
        tmp_path,
        ("bad", "ok1", "ok2", "crash"),
        hypotheses=[
            {"id": "all-up", "when": {"mode": ["bad", "ok1", "ok2"]}, "supported_if": "ready", "refuted_if": "failed"}
        ],
    )
    gated, words = both(runs, spec)
    assert words == ["refuted"]
    got = shown(gated)
    assert got["bad"][0] == "failed"
    for mode in ("ok1", "ok2"):
        assert got[mode] == ("skipped", "hypothesis all-up already refuted by mode=bad (failed:cuda_graph_capture)")
    assert got["crash"] == ("skipped", NOTHING_TO_DECIDE)
    full, stopped = (view_of(load_run(r.run_dir.path)) for r in (runs.last, gated))
    changes = diff_runs(full, stopped)  # ready -> skipped is a change, never a regression
    moved = [(c.cell_id, c.before.words, c.after.words) for c in changes.cells]
    assert changes.regressions == 0 and changes.verdicts == [] and ("mode=ok1", "ready", "not run (skipped)") in moved


def test_supported_needs_every_deciding_cell(runs, tmp_path):
    spec = write(
        tmp_path,
        ("ok1", "ok2", "bad"),
        hypotheses=[
            {"id": "both-up", "when": {"mode": ["ok1", "ok2"]}, "supported_if": "ready", "refuted_if": "failed"}
        ],
    )
    gated, words = both(runs, spec)
    assert words == ["supported"]
    assert shown(gated) == {"ok1": ("ready", ""), "ok2": ("ready", ""), "bad": ("skipped", NOTHING_TO_DECIDE)}


def test_inconclusive_keeps_running_what_could_still_refute(runs, tmp_path):
    spec = write(
        tmp_path,
        ("crash", "ok1", "ok2"),
        hypotheses=[
            {"id": "could-refute", "when": {"mode": ["crash", "ok1"]}, "supported_if": "ready", "refuted_if": "failed"},
        ],
    )
    gated, words = both(runs, spec)
    assert words == ["inconclusive"]
    got = shown(gated)
    assert got["crash"][0] == "crashed" and got["ok1"][0] == "ready"  # ok1 could have refuted: it ran
    assert got["ok2"] == ("skipped", NOTHING_TO_DECIDE)


def test_stop_when_decided_without_anything_to_decide_is_a_usage_error(tmp_path):
    done = cli("run", str(write(tmp_path)), "--stop-when-decided", "--runs-dir", str(tmp_path / "runs"))
    assert done.returncode == 2 and "--stop-when-decided needs hypotheses or an expect" in done.stderr


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return run_cli(*args)


def test_fail_fast_stops_at_the_first_violated_expect_and_exits_1(tmp_path):
    spec = write(
        tmp_path, ("ok1", "bad", "ok2", "crash"), expect=[{"when": {"mode": ["ok1", "bad", "ok2"]}, "outcome": "ready"}]
    )
    done = cli(
        "run", str(spec), "--fail-fast", "--runs-dir", str(tmp_path / "runs"), "--junit", str(tmp_path / "j.xml")
    )
    assert done.returncode == 1, done.stderr
    report = json.loads(cli("report", str(tmp_path / "runs" / "latest"), "--format", "json").stdout)
    outcomes = {a["params"]["mode"]: (a["outcome"], a["reason"]) for a in report["attempts"]}
    assert outcomes["ok1"][0] == "ready" and outcomes["bad"][0] == "failed"
    reason = "expect #1 already violated by mode=bad (failed:cuda_graph_capture) (--fail-fast)"
    assert outcomes["ok2"] == ("skipped", reason) and outcomes["crash"] == ("skipped", reason)
    assert report["complete"] is True
    assert "4 attempts: 2 launched, 2 skipped before launch" in done.stdout
    junit = (tmp_path / "j.xml").read_text()
    assert 'failures="1"' in junit and junit.count("<skipped") == 2  # skipped are never failures


def test_repeats_with_mixed_outcomes_are_counted_and_flaky(tmp_path):
    spec = write(
        tmp_path,
        ("flaky", "ok1"),
        hypotheses=[
            {"id": "flaky-up", "when": {"mode": "flaky"}, "supported_if": "ready", "refuted_if": "crashed"},
            {"id": "capture-breaks", "when": {"mode": "flaky"}, "supported_if": "ready", "refuted_if": "failed"},
            {"id": "ok-up", "when": {"mode": "ok1"}, "supported_if": "ready", "refuted_if": "failed"},
        ],
    )
    done = cli("run", str(spec), "--repeat", "3", "--runs-dir", str(tmp_path / "runs"))
    assert done.returncode == 0, done.stderr
    assert "ready 2/3 · failed:cuda_graph_capture 1/3" in done.stdout
    assert "ready 3/3" in done.stdout
    verdicts = {v["id"]: v for v in json.loads((tmp_path / "runs" / "latest" / "verdicts.json").read_text())}
    assert (verdicts["flaky-up"]["verdict"], verdicts["flaky-up"]["reason"]) == (
        "inconclusive",
        "mode=flaky flaky (2/3 ready)",
    )
    # the example: ready 2/3 and failed 1/3 against refuted_if: failed is a cell that
    # disagrees with itself, so the hypothesis is inconclusive, flaky, not refuted
    assert (verdicts["capture-breaks"]["verdict"], verdicts["capture-breaks"]["reason"]) == (
        "inconclusive",
        "mode=flaky flaky (2/3 ready)",
    )
    assert verdicts["capture-breaks"]["flaky"] == "mode=flaky 2/3 ready"
    assert verdicts["ok-up"]["verdict"] == "supported" and verdicts["ok-up"]["flaky"] is None
    markdown = cli("report", str(tmp_path / "runs" / "latest"), "--format", "md").stdout
    assert "| `mode=flaky` | ready 2/3 · failed:cuda_graph_capture 1/3 |" in markdown
