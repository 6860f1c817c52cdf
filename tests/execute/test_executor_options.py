"""Where attempts run, without a cluster: the spec's `executor:`, the command line over it,
what a job asks Slurm for, and the worker a job runs (driven here by hand, then by SIGTERM)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from conftest import fake_command, run_cli, unique_id, wait_until, write_spec
from diagbench.errors import SpecError, UserError
from diagbench.execute.cancel import Cancel
from diagbench.execute.choice import executor_notes, requested
from diagbench.execute.events import QuietEvents
from diagbench.execute.remote import follow
from diagbench.execute.remote.files import JobFile, Progress
from diagbench.execute.slots import queue_notes
from diagbench.execute.slurm.commands import JobState, limit_seconds, parse_queue, parse_sacct
from diagbench.execute.slurm.executor import Turnstile
from diagbench.execute.slurm.jobs import SlurmSettings, job_script, walltime
from diagbench.execute.slurm.probe import probe_options
from diagbench.execute.slurm.queue import SlurmQueue
from diagbench.launch.process import sweep_tagged
from diagbench.records.parts import Placement
from diagbench.spec.executor import LOCAL, ExecutorSpec, command_line_settings
from diagbench.spec.load import load_spec
from diagbench.spec.plan import plan_attempts
from diagbench.vocab import Outcome
from diagbench.yamlsrc import write_duration

READY = "The server is fired up and ready to roll!"


def command_line_executor(
    kind: str | None, partition: str | None, args: list[str] | None, time: str | None
) -> ExecutorSpec:
    """`--executor`, `--slurm-partition`, `--slurm-arg`, `--slurm-time` as the command line gives them."""
    values = {
        "partition": ("--slurm-partition", partition),
        "args": ("--slurm-arg", args),
        "time": ("--slurm-time", time),
    }
    return command_line_settings(kind, values)


def typed(spec: ExecutorSpec) -> tuple[str, dict[str, object]]:
    """A layer's kind and its Slurm settings as the plugin reads them."""
    from diagbench.execute.slurm.plugin import SlurmPlugin

    return spec.resolved_kind, {k.name: spec.read(k) for k in SlurmPlugin.keys if k.name in spec.settings}


def slurm(partition=None, args=(), time=None, setup=()) -> tuple[str, dict[str, object]]:
    given = {"partition": partition, "args": tuple(args), "time": time, "setup": tuple(setup)}
    return "slurm", {k: v for k, v in given.items() if v}


def spec_with(tmp_path: Path, executor: str) -> Path:
    path = tmp_path / "spec.yaml"
    path.write_text(
        f"name: x\nserver: {{command: foo, timeout: 5m, grace: 10s}}\nmatrix:\n  a: {{env: A, values: [1]}}\n{executor}"
    )
    return path


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("executor: slurm\n", slurm()),
        ("executor: local\n", (LOCAL, {})),
        (
            "executor:\n  partition: gpu\n  args: [--qos=high, --account=ml]\n  time: 90m\n  setup: module load x\n",
            slurm("gpu", ("--qos=high", "--account=ml"), 5400.0, ("module load x",)),
        ),
    ],
)
def test_the_spec_names_the_executor(tmp_path: Path, text: str, expected: tuple[str, dict[str, object]]) -> None:
    spec = load_spec(spec_with(tmp_path, text))
    assert typed(requested(spec, ExecutorSpec(), None)) == expected


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("executor: slurmm\n", "spec.yaml:5: executor: unknown executor 'slurmm' (did you mean 'slurm'?)"),
        (
            "executor: {kind: local, partition: gpu}\n",
            "spec.yaml:5: executor.partition: 'partition' applies to kind: slurm only (set kind: slurm, or remove it)",
        ),
        (
            "executor: {kind: slurm, time: soon}\n",
            'spec.yaml:5: executor.time: expected a positive duration like 90s, 8m or 1h, got "soon"',
        ),
        (
            "executor: {kind: slurm, partiton: gpu}\n",
            "spec.yaml:5: executor.partiton: unknown key 'partiton' (did you mean 'partition'?)",
        ),
    ],
)
def test_executor_mistakes_name_their_place(tmp_path: Path, text: str, message: str) -> None:
    """Found before anything runs (the kind's plugin reads its keys), naming file:line and field."""
    with pytest.raises(SpecError) as caught:
        requested(load_spec(spec_with(tmp_path, text)), ExecutorSpec(), None)
    assert str(caught.value).endswith(message)


def test_the_command_line_wins_and_its_sbatch_options_come_last(tmp_path: Path) -> None:
    spec = load_spec(
        spec_with(
            tmp_path, "executor: {kind: slurm, partition: cpu, args: [--qos=low], time: 10m, setup: module load x}\n"
        )
    )
    merged = requested(spec, command_line_executor(None, "gpu", ["--qos=high"], "2h"), None)
    assert typed(merged) == slurm("gpu", ("--qos=low", "--qos=high"), 7200.0, ("module load x",))
    assert requested(spec, command_line_executor("local", None, None, None), None).resolved_kind == LOCAL
    with pytest.raises(UserError, match=r"^--slurm-time: expected a positive duration like 90s, 8m or 1h, got 'x'$"):
        requested(spec, command_line_executor("slurm", None, None, "x"), None)


def test_a_job_asks_for_the_walltime_the_gpus_and_the_users_options_last(tmp_path: Path) -> None:
    server = load_spec(spec_with(tmp_path, "")).server  # timeout 5m, grace 10s
    given = command_line_executor("slurm", "gpu", ["--time=1:00:00"], None)
    settings = SlurmSettings.of(given, server)
    assert settings.walltime_s == 300 + 10 + 120
    assert settings.sbatch_options() == ["--time=00:08:00", "--partition=gpu", "--no-requeue", "--time=1:00:00"]
    with_gpus = SlurmSettings(walltime_s=60, gpus=2)
    assert "--gres=gpu:2" in with_gpus.sbatch_options()
    assert "--gres=gpu:2" not in with_gpus.sbatch_options(with_gpus=False)
    assert [walltime(s) for s in (1, 60, 61, 3600, 86400 + 90)] == [
        "00:01:00",
        "00:01:00",
        "00:02:00",
        "01:00:00",
        "1-00:02:00",
    ]


def test_the_job_script_runs_the_setup_then_execs_the_worker(tmp_path: Path) -> None:
    settings = SlurmSettings(
        walltime_s=60, setup=("module load cuda", "source /opt/venv/bin/activate"), python="python3"
    )
    script = job_script(settings, Path("/shared/runs/r 1"), "001-a-1-r1").splitlines()
    assert script[0] == "#!/bin/sh"
    assert script[2:] == [
        "module load cuda",
        "source /opt/venv/bin/activate",
        "exec python3 -m diagbench worker --kind slurm '/shared/runs/r 1' 001-a-1-r1",
    ]


def test_squeue_lines_become_job_states() -> None:
    text = "12|PENDING|Priority||diagbench-001|5:00|/runs/r\n13|RUNNING|None|node7|diagbench-002|1:00:00|/runs/a|b\nnoise\n"
    assert parse_queue(text) == [
        JobState("12", "PENDING", "Priority", "", "diagbench-001", "/runs/r", "5:00"),
        JobState("13", "RUNNING", "", "node7", "diagbench-002", "/runs/a|b", "1:00:00"),
    ]
    limits = ["1:00", "5:00", "1:30:00", "2-00:01:00", "UNLIMITED", "NOT_SET", "", "1:x"]
    assert [limit_seconds(w) for w in limits] == [60, 300, 5400, 172860, None, None, None, None]
    assert JobState("14", "TIMEOUT", "TimeLimit").describe() == "TIMEOUT (TimeLimit)"
    sacct = "15|CANCELLED by 1000|None|node3\n15.batch|CANCELLED||node3\n16|NODE_FAIL|NodeDown|node4\n"
    assert parse_sacct(sacct, "15") == JobState("15", "CANCELLED", "", "node3")
    assert parse_sacct(sacct, "16") == JobState("16", "NODE_FAIL", "NodeDown", "node4")
    assert parse_sacct(sacct, "17") is None
    assert not JobState("14", "TIMEOUT").active and JobState("12", "PENDING").active
    assert JobState("13", "RUNNING").running and not JobState("12", "PENDING").running


def test_slurm_options_without_slurm_are_exit_2(tmp_path: Path) -> None:
    spec = write_spec(tmp_path, {"command": fake_command(f"out={READY}", "hang")})
    out = run_cli("run", str(spec), "--runs-dir", str(tmp_path / "runs"), "--slurm-partition", "gpu")
    assert out.returncode == 2
    assert (
        out.stderr.strip()
        == "diagbench: --slurm-partition applies to --executor slurm (add it, or set executor: slurm in the spec)"
    )
    no_slurm = run_cli(
        "run", str(spec), "--runs-dir", str(tmp_path / "runs"), "--executor", "slurm", env={"PATH": str(tmp_path)}
    )
    assert no_slurm.returncode == 2
    last = no_slurm.stderr.strip().splitlines()[-1]  # (a busy host's leftovers may be swept first)
    assert last == "diagbench: 'sbatch' not found: run diagbench on a Slurm login node (or --executor local)"
    assert not (tmp_path / "runs").exists() or not any((tmp_path / "runs").iterdir())


def prepare_attempt(tmp_path: Path, actions: list[str]) -> tuple[Path, str]:
    """A run directory laid out as the Slurm executor leaves it for a job's worker."""
    spec_path = write_spec(tmp_path, {"command": fake_command(*actions), "grace": "3s"})
    spec = load_spec(spec_path)
    run_dir = tmp_path / "runs" / unique_id()  # its own: another worker's test sweeps its own
    cell = spec.cells[0]
    attempt = f"{cell.index:03d}-{cell.slug}-r1"
    folder = run_dir / "cells" / attempt
    folder.mkdir(parents=True)
    job = JobFile(attempt, cell.id, 1, dict(cell.params), str(spec_path.resolve()), spec.sha256, time.time(), "77")
    job.write(folder)
    return run_dir, attempt


def test_the_worker_runs_its_attempt_and_records_where(tmp_path: Path) -> None:
    run_dir, attempt = prepare_attempt(tmp_path, [f"out={READY}", "hang"])
    env = {"SLURM_JOB_ID": "77", "SLURMD_NODENAME": "node7", "CUDA_VISIBLE_DEVICES": "2,3"}
    out = run_cli("worker", "--kind", "slurm", str(run_dir), attempt, env=env)
    assert out.returncode == 0, out.stderr
    record = json.loads((run_dir / "cells" / attempt / "result.json").read_text())
    assert record["outcome"] == "ready"
    assert record["executor"]["kind"] == "slurm" and record["executor"]["job_id"] == "77"
    assert record["executor"]["node"] == "node7" and record["executor"]["gpus"] == ["2", "3"]
    assert record["executor"]["queued_s"] >= 0
    environment = json.loads((run_dir / "cells" / attempt / "environment.json").read_text())
    assert environment["python"]["executable"]  # the server's interpreter, asked on the node
    progress = json.loads((run_dir / "cells" / attempt / "progress.json").read_text())
    assert progress["job_id"] == "77" and progress["node"] == "node7"
    assert sweep_tagged(run_dir) == []


def test_sigterm_to_the_worker_tears_its_server_down_and_records_cancelled(tmp_path: Path) -> None:
    # "loading" is printed once SIGTERM is ignored: the signal below always finds it so
    run_dir, attempt = prepare_attempt(tmp_path, ["ignore-term", "out=loading", "hang"])
    worker = subprocess.Popen(
        [sys.executable, "-m", "diagbench", "worker", "--kind", "slurm", str(run_dir), attempt],
        env={**os.environ, "SLURM_JOB_ID": "78"},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    log = run_dir / "cells" / attempt / "server.log"
    wait_until(lambda: log.exists() and b"loading" in log.read_bytes(), timeout=60, what="the server to be loading")
    worker.send_signal(signal.SIGTERM)
    assert worker.wait(timeout=60) == 0
    record = json.loads((run_dir / "cells" / attempt / "result.json").read_text())
    assert record["outcome"] == "cancelled"
    assert record["reason"] == "stopped by SIGTERM from Slurm (scancel, preemption or the job's time limit)"
    assert [k["signal"] for k in record["killed"]] == ["SIGKILL"]  # it ignored SIGTERM: the worker's grace ran out
    assert sweep_tagged(run_dir) == []


def test_a_worker_that_cannot_read_the_spec_records_a_launch_error(tmp_path: Path) -> None:
    run_dir, attempt = prepare_attempt(tmp_path, [f"out={READY}"])
    (tmp_path / "spec.yaml").write_text((tmp_path / "spec.yaml").read_text() + "\n# edited\n")
    out = run_cli("worker", "--kind", "slurm", str(run_dir), attempt)
    assert out.returncode == 0, out.stderr
    record = json.loads((run_dir / "cells" / attempt / "result.json").read_text())
    assert record["outcome"] == "launch_error"
    assert record["reason"].startswith("the node could not start the attempt: ")
    assert record["reason"].endswith("spec.yaml changed since the run started (its sha256 differs)")


def test_jobs_enter_the_queue_in_plan_order_and_a_missing_one_holds_nobody_for_long() -> None:
    turns = Turnstile(["a", "b", "c", "d"], wait_s=30.0)
    entered: list[str] = []

    def attempt(name: str) -> None:
        turns.wait(name)
        entered.append(name)
        turns.passed(name)

    threads = [threading.Thread(target=attempt, args=(n,)) for n in ("d", "c", "b", "a")]  # started backwards
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert entered == ["a", "b", "c", "d"]

    skipped = Turnstile(["a", "b", "c"], wait_s=0.2)  # "a" was skipped by the gate: it never comes
    assert skipped.wait("b") is True  # gave up on "a"
    skipped.passed("b")
    assert skipped.wait("c") is False  # "b" passed and "a" was given up on: no second wait


def test_gpus_with_slurm_is_exit_2_before_anything_is_submitted(tmp_path: Path) -> None:
    spec = write_spec(tmp_path, {"command": fake_command(f"out={READY}", "hang")})
    runs = tmp_path / "runs"
    # no sbatch on PATH: had it got as far as Slurm, it would say that instead
    out = run_cli("run", str(spec), "--runs-dir", str(runs), "--executor", "slurm", "--gpus", "0,1", env={"PATH": ""})
    assert out.returncode == 2
    assert out.stderr.strip().splitlines()[-1] == (
        "diagbench: --gpus applies to local runs; on Slurm the cluster hands out GPUs: set server.gpus (GPUs per attempt)"
    )
    assert not runs.exists() or not any(runs.iterdir())


def test_a_fixed_port_holds_slurm_jobs_to_one_at_a_time_as_here(tmp_path: Path) -> None:
    fixed = load_spec(write_spec(tmp_path, {"command": fake_command("hang"), "port": 18555}))
    auto = load_spec(write_spec(tmp_path, {"command": fake_command("hang")}))
    from diagbench.execute.slurm.plugin import SlurmPlugin

    def slots(spec: Any, parallel: int | None) -> Any:
        return SlurmPlugin().slots(spec, None, None, parallel, 6)

    assert len(slots(fixed, None).slots) == 1
    assert slots(fixed, None).notes == (
        "server.port is fixed (18555): one attempt at a time "
        "(Slurm may put jobs on one node; port: auto submits them all at once)",
    )
    assert len(slots(auto, None).slots) == 6 and not slots(auto, None).notes
    assert len(slots(auto, 2).slots) == 2
    assert queue_notes(fixed.server, 1, "Slurm") == []  # asked for one at a time: nothing to tell
    with pytest.raises(UserError, match=r"^--parallel 2 needs server.port: auto \(cells cannot share port 18555\)$"):
        queue_notes(fixed.server, 2, "Slurm")


def test_a_slurm_time_shorter_than_timeout_and_grace_is_noted(tmp_path: Path) -> None:
    spec = load_spec(spec_with(tmp_path, "executor: {kind: slurm, time: 2m}\n"))  # timeout 5m, grace 10s
    given = command_line_executor(None, None, None, "1m")
    notes = executor_notes(spec, requested(spec, given, None), given, None, gpus=False)
    assert notes == [
        "--slurm-time 1m is shorter than server.timeout + grace (5m10s): an attempt still starting when "
        "Slurm's time limit ends its job is recorded as a timeout"
    ]
    alone = requested(spec, ExecutorSpec(), None)
    assert executor_notes(spec, alone, ExecutorSpec(), None, gpus=False)[0].startswith("executor.time: 2m is ")
    enough = command_line_executor(None, None, None, "6m")
    assert executor_notes(spec, requested(spec, enough, None), enough, None, gpus=False) == []
    assert [write_duration(s) for s in (0.5, 45, 60, 310, 5400, 7200)] == ["0.5s", "45s", "1m", "5m10s", "90m", "2h"]


def test_the_probe_job_leaves_off_only_the_options_that_hold_a_job_back() -> None:
    attempts = SlurmSettings(walltime_s=60, partition="gpu", args=("--account=ml", "--dependency=afterok:5"))
    options = [
        *attempts.sbatch_options(with_gpus=False),
        *["-d", "afterok:6", "--begin", "now+1h", "-bnow+2h", "--hold", "-H", "--qos=high", "-dafterany:7"],
        *["--begin=now+3h", "--uid=nobody", "--constraint=h100", "-D", "/shared"],
    ]
    assert probe_options(options) == [
        "--time=00:01:00",
        "--partition=gpu",
        "--no-requeue",
        "--account=ml",
        "--qos=high",
        "--uid=nobody",
        "--constraint=h100",
        "-D",
        "/shared",
    ]


def recorded_run(tmp_path: Path, executor: dict[str, object]) -> Path:
    run = tmp_path / "runs" / "r1"
    run.mkdir(parents=True)
    (run / "manifest.json").write_text(json.dumps({"options": {"executor": executor}}))
    return run


def test_resume_takes_the_specs_secrets_from_the_spec_never_the_redacted_copy(tmp_path: Path) -> None:
    token = "hf_" + "s3cr3tTokenValue0123456789"
    spec = load_spec(
        spec_with(tmp_path, f"executor: {{kind: slurm, args: [--qos=high], setup: ['export HF_TOKEN={token}']}}\n")
    )
    recorded = {
        "kind": "slurm",
        "partition": "gpu",  # from the first command line, as the rest below the spec's args
        "args": ["--qos=high", "--account=ml"],
        "time_s": 600.0,
        "setup": ["export HF_TOKEN=<redacted>"],
        "python": None,
    }
    again = requested(spec, ExecutorSpec(), recorded_run(tmp_path / "a", recorded))
    assert typed(again) == slurm("gpu", ("--qos=high", "--account=ml"), 600.0, (f"export HF_TOKEN={token}",))
    # a secret the first command line gave is blanked in the manifest: given again, it takes its place
    run = recorded_run(tmp_path / "b", {**recorded, "args": ["--qos=high", "--export=ALL,HF_TOKEN=<redacted>"]})
    with pytest.raises(UserError) as caught:
        requested(spec, ExecutorSpec(), run)
    assert str(caught.value) == (
        f"{run}: the recorded executor settings hold redacted secrets (--slurm-arg=--export=ALL,HF_TOKEN=<redacted>): "
        "give the spec again, with those --slurm-arg options in full"
    )
    given = command_line_executor(None, None, [f"--export=ALL,HF_TOKEN={token}"], None)
    assert typed(requested(spec, given, run))[1]["args"] == ("--qos=high", f"--export=ALL,HF_TOKEN={token}")
    # resumed where it ran: a run started with --executor local keeps running here
    local = recorded_run(tmp_path / "c", {"kind": "local", "args": [], "setup": []})
    assert typed(requested(spec, ExecutorSpec(), local)) == (LOCAL, {})


def test_isolate_says_it_launches_here_when_the_spec_names_slurm(tmp_path: Path) -> None:
    spec = tmp_path / "spec.yaml"
    spec.write_text(
        "name: x\nserver: {command: foo, timeout: 5m}\nmatrix:\n  a: {env: A, values: [1, 2]}\nexecutor: slurm\n"
    )
    out = run_cli("isolate", str(spec), "--good", "a=1", "--bad", "a=2", "--dry-run")
    assert out.returncode == 0, out.stderr
    assert out.stderr.strip() == (
        "diagbench: note: isolate launches on this host (the spec's executor: slurm applies to diagbench run)"
    )


class EndedBoard:
    """What Slurm says of one job that has ended (the rest of Follow is the real thing)."""

    def __init__(self, state: JobState):
        self.ended = state

    def state(self, job_id: str) -> JobState:
        return self.ended


@pytest.mark.parametrize("worker_started", [True, False], ids=["worker-started", "never-started"])
def test_a_time_limit_without_a_record_is_a_timeout_only_if_the_worker_started(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, worker_started: bool
) -> None:
    monkeypatch.setattr(follow, "RECORD_LAG_S", 0.2)  # no record is coming: the worker was killed
    spec = load_spec(write_spec(tmp_path, {"command": fake_command("hang")}))
    item = plan_attempts(spec.cells, 1)[0]
    folder = tmp_path / "cells" / item.name
    folder.mkdir(parents=True)
    if worker_started:
        Progress("31", "node7", [], "capture bs=32", time.time()).write(folder)
    ended = JobState("31", "TIMEOUT", "TimeLimit", "node7", limit="1:30:00")  # a --slurm-arg=--time wins
    cancel = Cancel()
    try:
        board: Any = EndedBoard(ended)  # answers state() as a JobBoard does
        queue = SlurmQueue(board)
        watch = follow.Follow(item, "31", folder, queue, 3.0, cancel, QuietEvents(), lambda _: None, 600.0)
        record = watch.until_record()
    finally:
        cancel.close()
    if worker_started:
        assert record.outcome is Outcome.TIMEOUT
        assert record.reason == "the Slurm job's time limit (90m) ended it in phase capture bs=32 (job 31)"
        assert record.phase == "capture bs=32"
    else:
        assert record.outcome is Outcome.LAUNCH_ERROR
        assert record.reason == "Slurm job 31 ended TIMEOUT (TimeLimit) without a record"
    assert record.executor == Placement("slurm", "31", "node7")
