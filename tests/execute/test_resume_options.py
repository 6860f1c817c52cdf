"""`run --resume RUN` finishes a run with the options it was started with (GPU slots,
--parallel, --stop-when-decided, --fail-fast), and the small things said about those options:
--stop-when-decided with nothing to decide, --fail-fast with no expect, and --gpus under an
inherited CUDA_VISIBLE_DEVICES. Every server is a real process; the interrupted run is a real
diagbench, interrupted as Ctrl-C would."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from conftest import FAKE, diagbench_argv, fake_command, run_cli, wait_until, write_spec
from diagbench.errors import UserError
from diagbench.execute.resume import RunFlags, resumed_flags
from diagbench.launch.gpu import Gpu, offer_gpus
from diagbench.launch.process import sweep_tagged
from diagbench.spec.gpus import GpuMode, GpuRequest, parse_gpu_request

READY = "The server is fired up and ready to roll!"
CAPTURE = "err=Exception: Capture cuda graph failed: CUDA error: operation not permitted"
REFUTED = "hypothesis all-up already refuted by mode=bad (failed:cuda_graph_capture)"
HOST = [Gpu(i, f"GPU-{i}{i}{i}{i}-0000", "H200") for i in range(4)]


def cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return run_cli(*args, env=env)


def records(run: Path) -> dict[str, dict[str, Any]]:
    """mode -> its result.json."""
    found = [json.loads(p.read_text()) for p in run.glob("cells/*/result.json")]
    return {r["params"]["mode"]: r for r in found}


def starts(journal: Path) -> list[dict[str, Any]]:
    return [e for e in map(json.loads, journal.read_text().splitlines()) if e["event"] == "start"]


def decided_spec(tmp_path: Path, journal: Path) -> Path:
    """Five cells: `bad` refutes all-up (so ok1 and ok2 can change nothing after it); hang1 and
    hang2 each decide a hypothesis of their own and come up only once four servers have
    journalled a start (two before the interruption, two after: both at once on resume)."""
    modes = {
        "bad": [CAPTURE, "hang"],
        "ok1": [f"out={READY}", "hang"],
        "ok2": [f"out={READY}", "hang"],
        "hang1": [f"journal={journal}", f"await={journal}:4", f"out={READY}", "hang"],
        "hang2": [f"journal={journal}", f"await={journal}:4", f"out={READY}", "hang"],
    }
    dispatch = tmp_path / "dispatch.py"
    dispatch.write_text(
        "import os, sys\n"
        f"modes = {modes!r}\n"
        f"os.execv(sys.executable, [sys.executable, {str(FAKE)!r}, *modes[sys.argv[1]]])\n"
    )
    hypothesis = {"claim": "it comes up", "supported_if": "ready", "refuted_if": "failed"}
    spec = {
        "name": "resumed",
        "server": {"command": [sys.executable, str(dispatch)], "ready": {"log": "fired up"}, "timeout": "90s"},
        "matrix": {"mode": {"args": ["{value}"], "values": list(modes)}},
        "hypotheses": [
            {"id": "all-up", "when": {"mode": ["bad", "ok1", "ok2"]}, **hypothesis},
            {"id": "hang1-up", "when": {"mode": "hang1"}, **hypothesis},
            {"id": "hang2-up", "when": {"mode": "hang2"}, **hypothesis},
        ],
    }
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    return path


def test_resume_alone_keeps_the_gpu_slots_and_stop_when_decided(tmp_path):
    journal = tmp_path / "journal.jsonl"
    journal.touch()
    spec = decided_spec(tmp_path, journal)
    runs_dir = tmp_path / "runs"
    argv = diagbench_argv("run", str(spec), "--runs-dir", str(runs_dir), "--gpus", "0,1", "--stop-when-decided")
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:  # bad has failed, and hang1 and hang2 hold both slots: ok1 and ok2 wait for one
        wait_until(lambda: len(list(runs_dir.glob("latest/cells/*/result.json"))) >= 1, what="bad's record")
        wait_until(lambda: len(starts(journal)) == 2, what="hang1 and hang2 running")
    finally:
        proc.send_signal(signal.SIGINT)
        proc.communicate(timeout=60)
    run = (runs_dir / "latest").resolve()
    before = records(run)
    assert proc.returncode == 130
    assert {m: r["outcome"] for m, r in before.items()} == {
        "bad": "failed",
        **{m: "cancelled" for m in ("hang1", "hang2", "ok1", "ok2")},
    }

    resumed = cli("run", "--resume", str(run))
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert "diagbench: note: resuming with the run's own --gpus 0,1 --stop-when-decided\n" in resumed.stderr
    after = records(run)
    # the resumed servers ran at once (each waited for four starts), one on each GPU of the list
    assert after["hang1"]["outcome"] == after["hang2"]["outcome"] == "ready"
    assert sorted(",".join(after[m]["gpus"]) for m in ("hang1", "hang2")) == ["0", "1"]
    for mode in ("hang1", "hang2"):
        assert after[mode]["env_changes"]["CUDA_VISIBLE_DEVICES"] == ",".join(after[mode]["gpus"])
    assert sorted(s["gpus"] for s in starts(journal)[2:]) == ["0", "1"]  # what the servers themselves saw
    for mode in ("ok1", "ok2"):  # nothing they could change: skipped, as the interrupted run would have
        assert (after[mode]["outcome"], after[mode]["reason"]) == ("skipped", REFUTED)
    assert after["bad"] == before["bad"]
    assert sweep_tagged(run) == []


@pytest.fixture
def started_run(tmp_path: Path) -> Path:
    """A run (which ended: only its manifest matters here) started with --parallel 2 --fail-fast --repeat 2 --only n=1, as its manifest keeps it."""
    spec = write_spec(
        tmp_path,
        {"command": fake_command(f"out={READY}")},
        {"n": {"env": "N", "values": ["1", "2"]}},
        expect=[{"when": {"n": "1"}, "outcome": "ready"}],
    )
    run = tmp_path / "runs" / "r"
    done = cli(
        "run", str(spec), "--runs-dir", str(run.parent), "--run-id", "r", "--parallel", "2", "--fail-fast",
        "--repeat", "2", "--only", "n=1",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return run


def test_options_not_given_again_are_the_runs_own_and_given_ones_win(started_run):
    flags, note = resumed_flags(started_run, RunFlags())
    assert flags == RunFlags(("n=1",), 2, 2, GpuRequest(GpuMode.NONE), stop_when_decided=False, fail_fast=True)
    assert note == "resuming with the run's own --parallel 2 --fail-fast"
    given = RunFlags(("n=1",), 2, parallel=1, gpus=parse_gpu_request("3"), stop_when_decided=True)
    flags, note = resumed_flags(started_run, given)
    assert (flags.parallel, str(flags.gpus), flags.stop_when_decided, flags.fail_fast) == (1, "3", True, True)
    assert note == "resuming with the run's own --fail-fast"


@pytest.mark.parametrize(
    ("given", "message"),
    [
        (RunFlags(repeat=3), "--repeat: {run} was planned with --repeat 2, and a resumed run keeps its plan"),
        (RunFlags(only=("n=2",)), "--only: {run} was planned with --only n=1, and a resumed run keeps its plan"),
    ],
)
def test_a_plan_option_given_otherwise_on_resume_is_refused(started_run, given, message):
    with pytest.raises(UserError, match=re.escape(message.format(run=started_run))):
        resumed_flags(started_run, given)


def test_a_mistyped_recorded_option_names_the_field(started_run):
    manifest = json.loads((started_run / "manifest.json").read_text())
    manifest["options"]["gpus"] = "0,1"
    (started_run / "manifest.json").write_text(json.dumps(manifest))
    done = cli("run", "--resume", str(started_run))
    assert done.returncode == 2
    assert done.stderr == (
        f"diagbench: {started_run}/manifest.json: options.gpus: expected a list of GPU ids, got '0,1'; "
        "give --gpus again\n"
    )


def test_run_help_says_resume_keeps_the_options():
    text = " ".join(re.sub(r"-\n\s+", "-", cli("run", "-h").stdout).split())  # unwrapped: --stop-\n when
    assert "finish an interrupted run, with the spec and options it was started with" in text
    assert "(--gpus, --parallel, --stop-when-decided, --fail-fast given again win)" in text


# -- what is said about the options -----------------------------------------------------


def test_plan_refuses_stop_when_decided_with_nothing_to_decide_as_run_does(tmp_path):
    spec = write_spec(tmp_path, {"command": fake_command(f"out={READY}")})
    message = "diagbench: --stop-when-decided needs hypotheses or an expect in the spec: without, nothing would run\n"
    planned = cli("plan", str(spec), "--stop-when-decided")
    ran = cli("run", str(spec), "--stop-when-decided", "--runs-dir", str(tmp_path / "runs"))
    assert (planned.returncode, planned.stdout, planned.stderr) == (2, "", message)
    assert (ran.returncode, ran.stderr) == (2, message)
    assert not (tmp_path / "runs").exists()


def test_fail_fast_without_an_expect_says_it_does_nothing(tmp_path):
    spec = write_spec(tmp_path, {"command": fake_command(f"out={READY}")})
    done = cli("run", str(spec), "--fail-fast", "--runs-dir", str(tmp_path / "runs"))
    assert done.returncode == 0
    assert "diagbench: note: --fail-fast: the spec has no expect, nothing to fail fast on\n" in done.stderr
    with_expect = write_spec(tmp_path, {"command": fake_command(f"out={READY}")}, expect=[{"outcome": "ready"}])
    quiet = cli("run", str(with_expect), "--fail-fast", "--runs-dir", str(tmp_path / "runs"))
    assert quiet.returncode == 0 and "fail fast" not in quiet.stderr


OUTSIDE = (
    "--gpus 0,1 names this host's GPUs (as nvidia-smi numbers them), not positions in the inherited "
    "CUDA_VISIBLE_DEVICES=2,3: attempts run on the host's GPU 0,1 (0,1 outside that list; --gpus all hands out "
    "the inherited ones)"
)


def test_gpus_outside_an_inherited_visible_list_are_said_to_be_the_hosts(tmp_path):
    assert OUTSIDE in offer_gpus(parse_gpu_request("0,1"), {"CUDA_VISIBLE_DEVICES": "2,3"}, HOST).notes
    assert OUTSIDE in offer_gpus(parse_gpu_request("0,1"), {"CUDA_VISIBLE_DEVICES": "2,3"}, None).notes
    within = offer_gpus(parse_gpu_request("GPU-3333,2"), {"CUDA_VISIBLE_DEVICES": "2,3"}, HOST)  # one GPU, two names
    assert within.notes == ()
    part = offer_gpus(parse_gpu_request("2,0"), {"CUDA_VISIBLE_DEVICES": "GPU-2222,GPU-3333"}, HOST)
    assert part.notes == (
        "--gpus 2,0 names this host's GPUs (as nvidia-smi numbers them), not positions in the inherited "
        "CUDA_VISIBLE_DEVICES=GPU-2222,GPU-3333: attempts run on the host's GPU 2,0 (0 outside that list; "
        "--gpus all hands out the inherited ones)",
    )
    spec = write_spec(tmp_path, {"command": fake_command(f"out={READY}")})
    planned = cli("plan", str(spec), "--gpus", "0,1", env={**os.environ, "CUDA_VISIBLE_DEVICES": "2,3"})
    assert planned.returncode == 0 and f"diagbench: note: {OUTSIDE}\n" in planned.stderr
