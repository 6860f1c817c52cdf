"""Against a real Slurm (slurmctld + slurmd + munged, .ci/slurm.sh): attempts as batch jobs
give the records and verdicts a local run gives, and every way a job can end is recorded."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from conftest import wait_gone, wait_until
from diagbench.spec.executor import ExecutorSpec

pytestmark = pytest.mark.slurm

ROOT = Path(__file__).resolve().parents[2]
SLURM = ExecutorSpec(kind="slurm")
ACTIVE = ("PENDING", "RUNNING", "COMPLETING", "CONFIGURING")
WAIT_S = 120.0  # a shared CI host and a busy queue can be slow; the waits end as soon as things happen


Start = Callable[..., "subprocess.Popen[str]"]


@pytest.fixture
def diagbench(tmp_path: Path) -> Iterator[Start]:
    """Starts `diagbench ...`; afterwards, even after a failed assert, kills what is left of
    it and cancels every job whose run directory is under this test's folder."""
    started: list[subprocess.Popen[str]] = []

    def start(*args: str) -> subprocess.Popen[str]:
        proc = subprocess.Popen(
            [sys.executable, "-m", "diagbench", *args],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env={**os.environ, "COLUMNS": "200"},
        )
        started.append(proc)
        return proc

    yield start
    for proc in started:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    left = [job for job, state in jobs_in(tmp_path, under=True).items() if state in ACTIVE]
    if left:
        subprocess.run(["scancel", *left], check=False)


def finish(proc: subprocess.Popen[str]) -> tuple[int, str, str]:
    out, err = proc.communicate(timeout=WAIT_S * 2)
    return proc.returncode, out, err


def last_line(err: str) -> str:
    """diagbench's own message (a sweep of another run's leftovers may come first on a busy host)."""
    return err.strip().splitlines()[-1] if err.strip() else ""


def wait_for(what: str, check: Callable[[], Any]) -> Any:
    return wait_until(check, WAIT_S, what)


def jobs_in(run_dir: Path, under: bool = False) -> dict[str, str]:
    """Every job Slurm still knows whose working directory is this run (or under this
    folder): id -> state."""
    command = ["squeue", "-h", "-t", "all", "-o", "%i|%T|%Z"]
    out = subprocess.run(command, capture_output=True, text=True, timeout=60).stdout  # a controller gone: no hang
    rows = [line.split("|") for line in out.splitlines()]
    where = str(run_dir.resolve())
    return {r[0]: r[1] for r in rows if len(r) == 3 and (r[2] == where or (under and r[2].startswith(where + "/")))}


def progress_of(run_dir: Path) -> dict[str, dict[str, Any]]:
    """attempt -> the worker's progress.json, for every worker that has started."""
    found = {}
    for path in run_dir.glob("cells/*/progress.json"):
        found[path.parent.name] = json.loads(path.read_text())
    return found


def result_of(run_dir: Path, attempt: str) -> dict[str, Any]:
    return json.loads((run_dir / "cells" / attempt / "result.json").read_text())


def only_run(runs_dir: Path) -> Path:
    def find() -> Path | None:
        found = [p for p in runs_dir.glob("*") if p.name != "latest" and not p.name.startswith(".")]
        return found[0] if found and (found[0] / "manifest.json").is_file() else None

    return wait_for("the run directory", find)


def no_tagged_left(run_dir: Path) -> None:
    wait_gone(run_dir.name, timeout=10)


def spec_file(
    folder: Path, command: list[str], values: list[str], top: dict[str, Any] | None = None, **server: Any
) -> Path:
    data = {
        "name": "slurm-test",
        "server": {
            "command": command,
            "ready": {"log": "^READY"},
            "failures": {"boom": "^BOOM"},
            "timeout": "90s",
            "grace": "3s",
            **server,
        },
        "matrix": {"case": {"args": ["{value}"], "values": values}},
        **(top or {}),
    }
    path = folder / "spec.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


# A server for these tests: `hang...` never becomes ready; `quick` is ready at once; `slow`
# after 12 s; `fail` prints a failure line; `meet` prints its CUDA_VISIBLE_DEVICES, then waits until every `meet`
# server of the run has started (so they provably ran at the same time), then is ready; `listen...` holds
# the port its command line names (before the case) for 3 s, then is ready; `go` is ready once a file `go`
# is in the folder, and says whether HF_TOKEN is set; `compiling` enters the phase `compile`, never ready.
SERVER = """
import os, socket, sys, time
folder, case = sys.argv[1], sys.argv[-1]
print("gpus=" + os.environ.get("CUDA_VISIBLE_DEVICES", ""), flush=True)
if case.startswith("meet"):
    open(os.path.join(folder, "met-" + case), "w").close()
    while len([n for n in os.listdir(folder) if n.startswith("met-")]) < 2:
        time.sleep(0.1)
if case.startswith("listen"):
    held = socket.socket()
    held.bind(("127.0.0.1", int(sys.argv[2])))
    held.listen()
    time.sleep(3)
if case == "go":
    print("token=" + ("set" if os.environ.get("HF_TOKEN", "").startswith("hf_") else "unset"), flush=True)
    while not os.path.exists(os.path.join(folder, "go")):
        time.sleep(0.1)
if case == "compiling":
    print("refserver: torch.compile enabled", flush=True)
if case == "slow":
    time.sleep(12)
if case == "fail":
    print("BOOM", flush=True)
if not case.startswith("hang") and case != "compiling":
    print("READY", flush=True)
time.sleep(3600)
"""


@pytest.fixture
def server(tmp_path: Path) -> list[str]:
    script = tmp_path / "server.py"
    script.write_text(SERVER)
    meet = tmp_path / "meet"
    meet.mkdir()
    return [sys.executable, str(script), str(meet)]  # the case comes last, from the matrix


# That attempts as Slurm jobs give the records and verdicts a local run gives is the executor
# contract, tests/execute/test_executor_contract.py, which runs against this Slurm too.


def test_two_jobs_at_once_get_disjoint_gpus(tmp_path: Path, server: list[str], diagbench: Start) -> None:
    spec = spec_file(tmp_path, server, ["meet-a", "meet-b"], gpus=2)
    runs_dir = tmp_path / "runs"
    code, out, err = finish(diagbench("run", str(spec), "--runs-dir", str(runs_dir), "--executor", "slurm"))
    assert code == 0, out + err
    run_dir = only_run(runs_dir)
    gpus = []
    for attempt in sorted(p.name for p in run_dir.glob("cells/*")):
        record = result_of(run_dir, attempt)
        assert record["outcome"] == "ready", record
        given = record["executor"]["gpus"]
        log = (run_dir / "cells" / attempt / "server.log").read_text()
        assert f"gpus={','.join(given)}" in log  # what Slurm gave the job is what the server saw
        gpus.append(set(given))
    assert len(gpus[0]) == len(gpus[1]) == 2
    assert not gpus[0] & gpus[1], gpus
    no_tagged_left(run_dir)


def test_ctrl_c_cancels_every_job_and_records_them_cancelled(
    tmp_path: Path, server: list[str], diagbench: Start
) -> None:
    spec = spec_file(tmp_path, server, ["hang", "hang2"])
    runs_dir = tmp_path / "runs"
    proc = diagbench("run", str(spec), "--runs-dir", str(runs_dir), "--executor", "slurm")
    run_dir = only_run(runs_dir)
    wait_for("both workers to start", lambda: len(progress_of(run_dir)) == 2)
    proc.send_signal(signal.SIGINT)
    code, out, err = finish(proc)
    assert code == 130, out + err
    for attempt in progress_of(run_dir):
        record = result_of(run_dir, attempt)
        assert record["outcome"] == "cancelled", record
        assert record["reason"].startswith("the run was interrupted (diagbench stopped Slurm job "), record
        assert record["killed"], "the worker tore its server down itself"
    wait_for(
        "the jobs to leave the queue",
        lambda: all(s not in ("RUNNING", "PENDING", "COMPLETING") for s in jobs_in(run_dir).values()),
    )
    no_tagged_left(run_dir)


def test_a_job_cancelled_behind_diagbenchs_back_is_recorded_with_slurms_word(
    tmp_path: Path, server: list[str], diagbench: Start
) -> None:
    spec = spec_file(tmp_path, server, ["hang"])
    runs_dir = tmp_path / "runs"
    proc = diagbench("run", str(spec), "--runs-dir", str(runs_dir), "--executor", "slurm")
    run_dir = only_run(runs_dir)
    (progress,) = wait_for("the worker to start", lambda: list(progress_of(run_dir).values()))
    subprocess.run(["scancel", progress["job_id"]], check=True)
    code, out, err = finish(proc)
    assert code == 0, out + err  # diagbench was not interrupted: one of its jobs was
    (attempt,) = progress_of(run_dir)
    record = result_of(run_dir, attempt)
    assert record["outcome"] == "cancelled", record
    assert f"Slurm job {progress['job_id']} ended CANCELLED" in record["reason"]
    assert "cancelled outside diagbench" in record["reason"]
    assert "cancelled" in out
    no_tagged_left(run_dir)


def test_a_job_that_ends_without_a_record_says_how_in_slurms_words(
    tmp_path: Path, server: list[str], diagbench: Start
) -> None:
    spec = spec_file(tmp_path, server, ["quick"])
    data = yaml.safe_load(spec.read_text())
    data["executor"] = {"kind": "slurm", "python": "/nonexistent/python3"}  # the worker cannot start
    spec.write_text(yaml.safe_dump(data))
    runs_dir = tmp_path / "runs"
    code, out, err = finish(diagbench("run", str(spec), "--runs-dir", str(runs_dir)))
    assert code == 2, out + err  # no attempt could start: one line saying why, the run recorded
    assert last_line(err).startswith("diagbench: no attempt could start: Slurm job "), err
    run_dir = only_run(runs_dir)
    (attempt,) = [p.name for p in run_dir.glob("cells/*")]
    record = result_of(run_dir, attempt)
    assert record["outcome"] == "launch_error", record
    assert "ended FAILED" in record["reason"] and "without a record" in record["reason"]
    assert "/nonexistent/python3" in record["reason"]  # the job's own output says why


@pytest.mark.parametrize(
    ("server_keys", "option", "words"),
    [
        ({}, "--slurm-partition=nope", "Invalid partition name specified"),
        ({"gpus": 9}, "--slurm-arg=--comment=nine-gpus", "Requested node configuration is not available"),
    ],
    ids=["partition", "gres"],
)
def test_a_job_slurm_refuses_is_exit_2_with_slurms_words_and_no_run(
    tmp_path: Path, server: list[str], diagbench: Start, server_keys: dict[str, Any], option: str, words: str
) -> None:
    spec = spec_file(tmp_path, server, ["quick"], **server_keys)
    runs_dir = tmp_path / "runs"
    code, out, err = finish(diagbench("run", str(spec), "--runs-dir", str(runs_dir), "--executor", "slurm", option))
    assert code == 2, out + err
    assert last_line(err).startswith("diagbench: Slurm would not take the attempts' jobs: "), err
    assert words in err and "Traceback" not in err
    assert not [p for p in runs_dir.iterdir() if not p.name.startswith(".")]


def test_resume_after_kill_9_adopts_running_jobs_and_reads_finished_ones(
    tmp_path: Path, server: list[str], diagbench: Start
) -> None:
    spec = spec_file(tmp_path, server, ["quick", "slow"])
    runs_dir = tmp_path / "runs"
    proc = diagbench("run", str(spec), "--runs-dir", str(runs_dir), "--executor", "slurm")
    run_dir = only_run(runs_dir)

    def both_submitted() -> list[str] | None:
        names = sorted(p.parent.name for p in run_dir.glob("cells/*/job.json"))
        return names if len(names) == 2 else None

    quick, slow = wait_for("both jobs", both_submitted)
    wait_for("the quick record", lambda: (run_dir / "cells" / quick / "result.json").is_file())
    wait_for("the slow worker", lambda: slow in progress_of(run_dir))
    proc.send_signal(signal.SIGKILL)
    proc.communicate()
    slow_job = progress_of(run_dir)[slow]["job_id"]
    assert jobs_in(run_dir)[slow_job] == "RUNNING"  # the job outlives its controller
    before = set(jobs_in(run_dir))
    quick_record = result_of(run_dir, quick)

    code, out, err = finish(diagbench("run", "--resume", str(run_dir)))  # the manifest holds the spec and: slurm
    assert code == 0, out + err
    assert result_of(run_dir, quick) == quick_record  # read, not run again
    record = result_of(run_dir, slow)
    assert record["outcome"] == "ready" and record["executor"]["job_id"] == slow_job  # adopted
    assert set(jobs_in(run_dir)) == before, "nothing was submitted again"
    no_tagged_left(run_dir)


def test_a_node_failure_under_a_running_job_is_a_launch_error_in_slurms_words(
    tmp_path: Path, server: list[str], diagbench: Start
) -> None:
    spec = spec_file(tmp_path, server, ["hang"])
    runs_dir = tmp_path / "runs"
    proc = diagbench("run", str(spec), "--runs-dir", str(runs_dir), "--executor", "slurm")
    run_dir = only_run(runs_dir)
    (progress,) = wait_for("the worker to start", lambda: list(progress_of(run_dir).values()))
    node = progress["node"]
    log = run_dir / "cells" / next(iter(progress_of(run_dir))) / "server.log"
    wait_for("the server's first line", lambda: log.is_file() and log.read_text().startswith("gpus="))
    try:
        subprocess.run(["scontrol", "update", f"NodeName={node}", "State=DOWN", "Reason=diagbench-test"], check=True)
        code, out, err = finish(proc)
    finally:  # the single node comes back by itself (ReturnToService=2); make sure of it
        subprocess.run(["scontrol", "update", f"NodeName={node}", "State=RESUME"], capture_output=True)
    assert code == 2, out + err  # its only attempt could not run: exit 2 with Slurm's words
    assert f"no attempt could start: Slurm job {progress['job_id']} ended NODE_FAIL (NodeDown)" in err
    (attempt,) = progress_of(run_dir)
    record = result_of(run_dir, attempt)
    assert record["outcome"] == "launch_error", record
    assert record["reason"] == f"Slurm job {progress['job_id']} ended NODE_FAIL (NodeDown)", record
    assert (
        (run_dir / "cells" / attempt / "server.log").read_text().startswith("gpus=")
    )  # the log up to the failure is kept
    wait_for(
        "the node to be back",
        lambda: (
            subprocess.run(["sinfo", "-h", "-n", node, "-o", "%T"], capture_output=True, text=True).stdout.strip()
            in ("idle", "mixed")
        ),
    )
    no_tagged_left(run_dir)


def test_stop_when_decided_cancels_a_running_job_that_can_no_longer_matter(
    tmp_path: Path, server: list[str], diagbench: Start
) -> None:
    hypothesis = {
        "id": "all-up",
        "claim": "every case comes up",
        "when": {},
        "supported_if": "ready",
        "refuted_if": "failed",
    }
    spec = spec_file(tmp_path, server, ["fail", "hang"], top={"hypotheses": [hypothesis]})
    runs_dir = tmp_path / "runs"
    proc = diagbench("run", str(spec), "--runs-dir", str(runs_dir), "--executor", "slurm", "--stop-when-decided")
    code, out, err = finish(proc)
    assert code == 0, out + err
    run_dir = only_run(runs_dir)
    failed, hung = (result_of(run_dir, a) for a in sorted(p.name for p in run_dir.glob("cells/*")))
    assert failed["outcome"] == "failed"
    assert hung["outcome"] == "skipped", hung
    assert hung["reason"].startswith("hypothesis all-up already refuted by case=fail (failed:other)"), hung
    assert hung["reason"].endswith(f"(diagbench stopped Slurm job {hung['executor']['job_id']})")
    wait_for("the job to leave the queue", lambda: all(s not in ACTIVE for s in jobs_in(run_dir).values()))
    no_tagged_left(run_dir)


def test_a_run_directory_the_node_cannot_write_is_exit_2_before_any_job(
    tmp_path: Path, server: list[str], diagbench: Start
) -> None:
    spec = spec_file(tmp_path, server, ["quick"])
    private = tmp_path / "private"
    private.mkdir(mode=0o700)  # the job runs as nobody: like a node that does not mount it
    args = ["--executor", "slurm", "--slurm-arg=--uid=nobody", "--runs-dir", str(private / "runs")]
    code, out, err = finish(diagbench("run", str(spec), *args))
    assert code == 2, out + err
    assert last_line(err).startswith("diagbench: Slurm node "), err
    assert f"could not write into {private / 'runs'} (job FAILED (NonZeroExitCode))" in err
    assert "pass --runs-dir on shared storage" in err
    assert list((private / "runs").iterdir()) == []  # no run, no probe left behind


def test_no_secret_of_the_spec_or_the_sbatch_options_is_written_down(
    tmp_path: Path, server: list[str], diagbench: Start
) -> None:
    token, key = "hf_" + "s3cr3tTokenValue0123456789", "api-" + "k3yValue0123456789abcd"
    spec = spec_file(
        tmp_path, server, ["quick"], env={"API_KEY": key}, top={"executor": {"setup": [f"export HF_TOKEN={token}"]}}
    )
    runs_dir = tmp_path / "runs"
    proc = diagbench("run", str(spec), "--runs-dir", str(runs_dir), f"--slurm-arg=--export=ALL,HF_TOKEN={token}")
    code, out, err = finish(proc)
    assert code == 0, out + err
    run_dir = only_run(runs_dir)
    assert result_of(run_dir, next(iter(progress_of(run_dir))))["outcome"] == "ready"  # the job got what it needed
    written = {
        p.name: p.read_text(errors="replace") for p in run_dir.rglob("*") if p.is_file() and p.name != "server.log"
    }
    assert {"job.sh", "job.json", "result.json", "manifest.json", "slurm.out"} <= set(written)
    assert [name for name, text in written.items() if token in text or key in text] == []
    assert token not in out + err and key not in out + err
    assert "export HF_TOKEN=<redacted>" in written["job.sh"]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_a_fixed_port_runs_one_job_at_a_time_as_a_local_run_does(
    tmp_path: Path, server: list[str], diagbench: Start
) -> None:
    port = free_port()
    spec = spec_file(tmp_path, [*server, "{port}"], ["listen-a", "listen-b"], port=port)
    runs_dir = tmp_path / "runs"
    code, out, err = finish(diagbench("run", str(spec), "--runs-dir", str(runs_dir), "--executor", "slurm"))
    assert code == 0, out + err
    run_dir = only_run(runs_dir)
    first, second = (result_of(run_dir, a) for a in sorted(p.name for p in run_dir.glob("cells/*")))
    assert first["outcome"] == second["outcome"] == "ready", (first, second)  # at once, one would find it taken
    assert f"diagbench: note: server.port is fixed ({port}): one attempt at a time" in err
    submitted = json.loads((run_dir / "cells" / second["attempt"] / "job.json").read_text())["submitted_at"]
    first_done = (run_dir / "cells" / first["attempt"] / "result.json").stat().st_mtime
    assert submitted >= first_done  # the second job entered the queue once the first had its record
    no_tagged_left(run_dir)


def test_resume_gives_the_job_the_specs_secrets_not_the_manifests_blanks(
    tmp_path: Path, server: list[str], diagbench: Start
) -> None:
    token = "hf_" + "s3cr3tTokenValue0123456789"
    spec = spec_file(
        tmp_path, server, ["go"], top={"executor": {"kind": "slurm", "setup": [f"export HF_TOKEN={token}"]}}
    )
    runs_dir = tmp_path / "runs"
    proc = diagbench("run", str(spec), "--runs-dir", str(runs_dir))
    run_dir = only_run(runs_dir)
    (attempt,) = wait_for("the worker to start", lambda: list(progress_of(run_dir)))
    log = run_dir / "cells" / attempt / "server.log"
    wait_for("the server's token line", lambda: log.is_file() and "token=" in log.read_text())
    proc.send_signal(signal.SIGINT)
    code, out, err = finish(proc)
    assert code == 130, out + err
    assert result_of(run_dir, attempt)["outcome"] == "cancelled"

    code, out, err = finish(diagbench("run", "--resume", str(run_dir)))  # the manifest's spec has it blanked
    assert code == 2, out + err
    assert "give the spec again" in last_line(err) and "Traceback" not in err
    (Path(server[-1]) / "go").touch()  # from now on the server comes up
    code, out, err = finish(diagbench("run", str(spec), "--resume", str(run_dir)))
    assert code == 0, out + err  # was: the job ran `export HF_TOKEN=<redacted>`: sh's syntax error, exit 2
    record = result_of(run_dir, attempt)
    assert record["outcome"] == "ready", record
    assert "token=set" in log.read_text()  # the server got the spec's token, not the manifest's blank
    written = [p for p in run_dir.rglob("*") if p.is_file() and token in p.read_text(errors="replace")]
    assert written == []
    assert "export HF_TOKEN=<redacted>" in (run_dir / "cells" / attempt / "job.sh").read_text()
    no_tagged_left(run_dir)


def test_a_job_resubmitted_leaves_no_server_log_of_the_earlier_try(
    tmp_path: Path, server: list[str], diagbench: Start
) -> None:
    spec = spec_file(tmp_path, server, ["hang"])
    runs_dir = tmp_path / "runs"
    proc = diagbench("run", str(spec), "--runs-dir", str(runs_dir), "--executor", "slurm")
    run_dir = only_run(runs_dir)
    (attempt,) = wait_for("the worker to start", lambda: list(progress_of(run_dir)))
    log = run_dir / "cells" / attempt / "server.log"
    wait_for("the server's first line", lambda: log.is_file() and log.read_text().startswith("gpus="))
    proc.send_signal(signal.SIGINT)
    assert finish(proc)[0] == 130
    # resubmitted with an output file Slurm cannot open: the job fails before its worker runs
    args = ["--resume", str(run_dir), "--slurm-arg=--output=/nonexistent/slurm.out"]
    code, out, err = finish(diagbench("run", *args))
    assert code == 2, out + err
    record = result_of(run_dir, attempt)
    assert record["outcome"] == "launch_error" and "without a record" in record["reason"], record
    assert not log.exists()  # the first try's log is not left beside the second try's record
    no_tagged_left(run_dir)


def test_a_job_that_runs_into_its_time_limit_is_a_timeout_in_its_phase(
    tmp_path: Path, server: list[str], diagbench: Start
) -> None:
    spec = spec_file(tmp_path, server, ["compiling"])  # timeout 90s, grace 3s
    runs_dir = tmp_path / "runs"
    args = ["--runs-dir", str(runs_dir), "--executor", "slurm", "--slurm-time", "1m"]  # Slurm's least
    code, out, err = finish(diagbench("run", str(spec), *args))
    assert code == 0, out + err  # it started: not "no attempt could start"
    assert "diagbench: note: --slurm-time 1m is shorter than server.timeout + grace (1m33s)" in err
    run_dir = only_run(runs_dir)
    (attempt,) = [p.name for p in run_dir.glob("cells/*")]
    record = result_of(run_dir, attempt)
    assert record["outcome"] == "timeout", record
    job = record["executor"]["job_id"]
    assert record["reason"] == f"the Slurm job's time limit (1m) ended it in phase compile (job {job})", record
    assert (run_dir / "cells" / attempt / "server.log").read_text().startswith("gpus=")  # its log is kept
    assert "no attempt could start" not in err
    no_tagged_left(run_dir)
