"""The Ray executor against a real Ray cluster of two nodes on this host (.ci/ray.sh: a head
and a second raylet, 2 fake GPUs each). Skipped where no Ray answers at $RAY_ADDRESS, never
in CI. Each test checks that nothing is left: no tagged process (the nodes of both raylets
are this host's processes) and no Ray job of the run still running."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path

import httpx
import pytest

from conftest import Runs, diagbench_argv, fake_command, run_cli, wait_gone, wait_until, write_spec
from diagbench.execute.ray.client import RayClient
from diagbench.records.record import AttemptRecord
from diagbench.spec.executor import ExecutorSpec, Setting

pytestmark = pytest.mark.ray

ROOT = Path(__file__).resolve().parents[2]
NODESERVER = Path(__file__).with_name("nodeserver.py")
RAY = ExecutorSpec(kind="ray")


def address() -> str:
    return os.environ.get("RAY_ADDRESS", "")


def active_jobs(run_dir: Path) -> list[str]:
    """The Ray jobs of this run that still run (none may, once the run has returned)."""
    client = RayClient(address())
    try:
        jobs = client.jobs() or []
    finally:
        client.close()
    where = str(run_dir.resolve())
    return [j.job_id for j in jobs if j.active and (j.metadata or {}).get("diagbench_run") == where]


def live_placement_groups() -> list[str]:
    """Placement groups not removed (the tests' cluster runs nothing else)."""
    answer = httpx.get(f"{address().rstrip('/')}/api/v0/placement_groups?limit=1000", timeout=15, trust_env=False)
    groups = answer.json()["data"]["result"]["result"]
    return [g["placement_group_id"] for g in groups if g["state"] != "REMOVED"]


def nothing_left(run_dir: Path) -> None:
    wait_gone(run_dir, timeout=15)
    wait_until(lambda: not active_jobs(run_dir), 30, lambda: f"no job of the run active: {active_jobs(run_dir)}")
    wait_until(lambda: not live_placement_groups(), 30, lambda: f"no placement group left: {live_placement_groups()}")


@pytest.fixture
def ray_runs(tmp_path: Path) -> Iterator[Runs]:
    runner = Runs(tmp_path)
    yield runner
    if getattr(runner, "last", None) is not None:
        nothing_left(runner.last.run_dir.path)


def test_the_demo_matrix_through_ray_gives_the_local_outcomes_and_verdicts(ray_runs: Runs) -> None:
    demo = ROOT / "experiments" / "demo.yaml"
    local = ray_runs.run(demo, run_id="local")
    ray = ray_runs.run(demo, run_id="ray", executor=RAY)

    def decided(r: AttemptRecord) -> tuple[object, ...]:  # the deciding line's text has the time in it
        return (r.attempt, r.label, r.signature, r.evidence.line_no if r.evidence else None, r.phase)

    assert [decided(r) for r in ray.records] == [decided(r) for r in local.records]
    assert [(v.id, v.verdict) for v in ray.verdicts] == [(v.id, v.verdict) for v in local.verdicts]
    assert all(r.executor is not None and r.executor.kind == "ray" for r in ray.records)


def when(stamp: str) -> float:
    return datetime.fromisoformat(stamp).timestamp()


def test_four_one_gpu_cells_on_two_nodes_of_two_gpus_run_four_at_once(ray_runs: Runs) -> None:
    journal = ray_runs.folder / "journal"
    command = fake_command(f"journal={journal}", f"await={journal}:4", "out=READY", "hang")
    spec = write_spec(
        ray_runs.folder,
        {"command": command, "gpus": 1, "ready": {"log": "^READY"}, "timeout": "60s"},
        {"cell": {"env": "CELL", "values": ["a", "b", "c", "d"]}},
    )
    result = ray_runs.run(spec, executor=RAY)
    assert [r.label for r in result.records] == ["ready"] * 4  # each waited until all four ran
    starts, ends = [when(r.started_at or "") for r in result.records], [when(r.ended_at or "") for r in result.records]
    assert max(starts) < min(ends), "the four attempts ran at once"
    places = [r.executor.node if r.executor else None for r in result.records]
    assert len(set(places)) == 2 and all(places.count(p) == 2 for p in places)  # 2 nodes x 2 GPUs
    given = [
        (p, tuple(r.executor.gpus or ()) if r.executor else ()) for p, r in zip(places, result.records, strict=True)
    ]
    assert all(len(gpus) == 1 for _, gpus in given) and len(set(given)) == 4  # Ray's GPU ids, one each
    lines = [json.loads(line) for line in journal.read_text().splitlines()]
    seen = {(line["gpus"]) for line in lines if line["event"] == "start"}
    assert seen == {gpus[0] for _, gpus in given}  # what the server saw as CUDA_VISIBLE_DEVICES


def node_spec(folder: Path, mode: str | list[str], timeout: str = "60s", gpus: int = 1) -> Path:
    return write_spec(
        folder,
        {
            "command": [sys.executable, str(NODESERVER)],
            "nodes": 2,
            "gpus": gpus,
            "ready": {"log": "READY"},
            "failures": {"nic": "FATAL: node lost"},
            "timeout": timeout,
            "grace": "6s",  # the span stops each node (Ray calls) within it, on a busy host too
            "env": {"NODESERVER_PIDS": str(folder / "pids")},
        },
        {"mode": {"args": ["{value}"], "values": mode if isinstance(mode, list) else [mode]}},
    )


def node_pids(folder: Path) -> list[int]:
    return [int(p) for f in (folder / "pids").glob("node*") for p in f.read_text().split()]


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return Path(f"/proc/{pid}/stat").is_file() and Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z"


@pytest.mark.parametrize(
    ("mode", "label", "timeout"),
    [
        ("up", "ready", "60s"),
        ("fail=1", "failed:other", "60s"),
        ("die=1", "crashed", "60s"),
        ("hang", "timeout", "25s"),
    ],
)
def test_a_two_node_attempt_is_decided_when_it_comes_up_fails_or_hangs(
    ray_runs: Runs, mode: str, label: str, timeout: str
) -> None:
    (ray_runs.folder / "pids").mkdir()
    result = ray_runs.run(node_spec(ray_runs.folder, mode, timeout), executor=RAY)
    record = result.records[0]
    assert record.label == label, record.reason
    nodes = record.nodes or ()
    assert [n.node for n in nodes] == [0, 1] and nodes[0].node_id != nodes[1].node_id
    assert record.command[-2:] == [str(NODESERVER), mode]  # as the spec wrote it, not the span
    log = (result.run_dir.cells / record.attempt / "server.log").read_text()
    assert "[node 0] node 0 of 2 up" in log and "[node 1] node 1 of 2 up" in log
    if mode == "up":
        assert record.evidence is not None and record.evidence.text.endswith("READY")
        assert record.time_to_outcome_s is not None and record.time_to_outcome_s < 30
    if mode == "fail=1":
        assert record.evidence is not None and record.evidence.text == "[node 1] FATAL: node lost its NIC"
    if mode == "die=1":  # no line says it: the exit order does
        assert nodes[1].exit_code == 5 and record.reason.startswith("node 1's process ended first (exit code 5)")
    pids = node_pids(ray_runs.folder)
    assert len(pids) == 4  # each node's server and its child in a session of its own
    wait_until(lambda: not any(alive(p) for p in pids), 15, lambda: f"gone: {[p for p in pids if alive(p)]}")


def test_two_nodes_meet_in_a_torchrun_style_rendezvous_over_gloo(ray_runs: Runs) -> None:
    if os.environ.get("DIAGBENCH_RAY_TESTS") != "1":
        pytest.importorskip("torch")
    (ray_runs.folder / "pids").mkdir()
    result = ray_runs.run(node_spec(ray_runs.folder, "gloo", "120s", gpus=0), executor=RAY)
    record = result.records[0]
    assert record.label == "ready", record.reason
    assert record.evidence is not None and record.evidence.text == "[node 0] READY sum=3"  # 1 + 2: both joined


def test_ctrl_c_stops_every_job_and_records_each_attempt_cancelled(tmp_path: Path) -> None:
    spec = write_spec(
        tmp_path,
        {"command": fake_command("out=loading", "hang"), "ready": {"log": "^READY"}},
        {"c": {"env": "C", "values": ["a", "b"]}},
    )
    runs = tmp_path / "runs"
    proc = subprocess.Popen(
        diagbench_argv("run", str(spec), "--runs-dir", str(runs), "--run-id", "r", "--executor", "ray"),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    logs = lambda: [p for p in runs.glob("r/cells/*/server.log") if b"loading" in p.read_bytes()]  # noqa: E731
    wait_until(lambda: len(logs()) == 2, 90, "both servers loading on their nodes")
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=90)
    assert proc.returncode == 130, err
    records = [json.loads(p.read_text()) for p in sorted(runs.glob("r/cells/*/result.json"))]
    assert [r["outcome"] for r in records] == ["cancelled", "cancelled"]
    nothing_left(runs / "r")


def test_an_address_that_never_answers_is_exit_2_within_seconds(tmp_path: Path) -> None:
    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen(8)  # takes connections, never answers
    spec = write_spec(tmp_path, {"command": fake_command("out=READY", "hang")})
    try:
        out = run_cli(
            "run",
            str(spec),
            "--runs-dir",
            str(tmp_path / "runs"),
            "--executor",
            "ray",
            "--ray-address",
            f"127.0.0.1:{silent.getsockname()[1]}",
            timeout=60,
        )
    finally:
        silent.close()
    assert out.returncode == 2
    assert "did not answer within 15s (to ask the Ray version)" in out.stderr
    assert not (tmp_path / "runs").exists() or not any((tmp_path / "runs").glob("*/manifest.json"))


def test_a_cluster_too_small_for_an_attempt_is_exit_2_before_any_job(tmp_path: Path) -> None:
    spec = write_spec(tmp_path, {"command": fake_command("out=READY", "hang"), "gpus": 3})
    out = run_cli("run", str(spec), "--runs-dir", str(tmp_path / "runs"), "--executor", "ray", timeout=120)
    assert out.returncode == 2
    assert "is too small: an attempt needs a node with 3 GPU(s); the cluster's 2 node(s) have 2, 2 GPU(s)" in out.stderr


def test_secrets_given_to_the_jobs_are_neither_printed_nor_recorded(tmp_path: Path) -> None:
    token = "hf_" + "rAyS3cretValue0123456789abcd"
    spec = write_spec(
        tmp_path, {"command": fake_command("env=HF_TOKEN", "out=READY", "hang"), "ready": {"log": "^READY"}}
    )
    runs = tmp_path / "runs"
    out = run_cli(
        "run",
        str(spec),
        "--runs-dir",
        str(runs),
        "--run-id",
        "r",
        "--executor",
        "ray",
        "--ray-env",
        "HF_TOKEN",
        env={"HF_TOKEN": token},
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    log = next((runs / "r").glob("cells/*/server.log"))
    assert "HF_TOKEN=" in log.read_text() and "HF_TOKEN unset" not in log.read_text()  # the job had it
    # what diagbench writes (server.log holds the server's own words: its redaction is the log's door)
    written = "".join(p.read_text(errors="replace") for p in (runs / "r").rglob("*") if p.is_file() and p != log)
    assert token not in written and token not in out.stdout + out.stderr
    manifest = json.loads((runs / "r" / "manifest.json").read_text())
    assert manifest["options"]["executor"]["env"] == ["HF_TOKEN"]


def test_resume_adopts_the_jobs_a_killed_controller_left_running(tmp_path: Path) -> None:
    spec = write_spec(
        tmp_path,
        {
            "command": fake_command("out=loading", f"wait-for={tmp_path / 'go'}", "out=READY", "hang"),
            "ready": {"log": "^READY"},
        },
    )
    runs = tmp_path / "runs"
    proc = subprocess.Popen(
        diagbench_argv("run", str(spec), "--runs-dir", str(runs), "--run-id", "r", "--executor", "ray"),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    log = runs / "r" / "cells"
    wait_until(lambda: any(b"loading" in p.read_bytes() for p in log.glob("*/server.log")), 90, "the server loading")
    proc.kill()  # the controller dies; the job runs on
    proc.wait()
    jobs = active_jobs(runs / "r")
    assert len(jobs) == 1
    (tmp_path / "go").touch()
    out = run_cli("run", "--resume", str(runs / "r"), timeout=120)
    assert out.returncode == 0, out.stderr
    record = json.loads(next(log.glob("*/result.json")).read_text())
    assert record["outcome"] == "ready" and record["executor"]["job_id"] == jobs[0]  # adopted, not launched again
    nothing_left(runs / "r")


def test_the_address_comes_from_the_option_the_spec_or_ray_address(tmp_path: Path) -> None:
    from diagbench.execute.choice import requested
    from diagbench.execute.ray.keys import ADDRESS
    from diagbench.spec.load import load_spec

    spec = load_spec(write_spec(tmp_path, {"command": fake_command()}, executor={"kind": "ray", "address": "h:1"}))
    given = ExecutorSpec(None, {"address": Setting("h:2", "--ray-address")})
    assert requested(spec, given, None).read(ADDRESS) == "h:2"
    assert requested(spec, ExecutorSpec(), None).read(ADDRESS) == "h:1"


def test_ctrl_c_while_an_attempt_waits_for_its_nodes_leaves_nothing(tmp_path: Path) -> None:
    """Two attempts of 2 nodes x 2 GPUs on a cluster of 2 x 2: the second waits for Ray to place
    its nodes when Ctrl-C comes; both are recorded cancelled, no group, job or process is left."""
    (tmp_path / "pids").mkdir()
    spec = node_spec(tmp_path, ["hang", "wait"], "120s", gpus=2)  # neither comes up: both hold their nodes
    runs = tmp_path / "runs"
    proc = subprocess.Popen(
        diagbench_argv("run", str(spec), "--runs-dir", str(runs), "--run-id", "r", "--executor", "ray"),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    placed = lambda: [p for p in runs.glob("r/cells/*/server.log") if b"[node 1]" in p.read_bytes()]  # noqa: E731
    wait_until(lambda: len(placed()) == 1, 120, "one attempt's nodes up")
    waiting = lambda: [j for j in active_jobs(runs / "r") if (job := RayClient(address()).job(j)) and job.running]  # noqa: E731
    wait_until(lambda: len(waiting()) == 2, 60, "the second attempt's worker waiting for its nodes")
    assert len(live_placement_groups()) == 2  # one placed, one pending
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err
    records = [json.loads(p.read_text()) for p in sorted(runs.glob("r/cells/*/result.json"))]
    assert [r["outcome"] for r in records] == ["cancelled", "cancelled"]
    nothing_left(runs / "r")
    pids = node_pids(tmp_path)
    wait_until(lambda: not any(alive(p) for p in pids), 15, lambda: f"gone: {[p for p in pids if alive(p)]}")
