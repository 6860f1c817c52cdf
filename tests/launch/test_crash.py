"""diagbench killed, interrupted, or out of disk: nothing is left running, nothing
recorded is lost, and the next diagbench cleans up after the one that died.

Every diagbench here is a real process, and so is every server."""

from __future__ import annotations

import json
import os
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import psutil
import pytest

from conftest import diagbench_argv, fake_command, run_cli, unique_id, wait_until, write_spec
from diagbench.errors import SpecError
from diagbench.launch.logfile import CappedLog, tail_size
from diagbench.launch.ports import free_port
from diagbench.launch.process import sweep_tagged
from diagbench.launch.tags import CACHES_PREFIX, SCOPE_VAR, current_scope, scope_mark
from diagbench.spec.load import load_spec
from diagbench.vocab import Evidence

READY = "The server is fired up and ready to roll!"


def _records(run: Path) -> dict[str, dict]:
    return {p.parent.name: json.loads(p.read_text()) for p in sorted(run.glob("cells/*/result.json"))}


def _diagbench(*args: str, **kw: Any) -> subprocess.CompletedProcess[str]:
    return run_cli(*args, **kw)


def _start(*args: str, **kw: object) -> subprocess.Popen[bytes]:
    return subprocess.Popen(diagbench_argv(*args), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, **kw)  # type: ignore[call-overload]


def _stop(proc: subprocess.Popen[bytes]) -> None:
    """A background diagbench a failed test leaves running: stopped as a user would (no orphans)."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGINT)
        proc.send_signal(signal.SIGINT)
        proc.communicate(timeout=60)


def _alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


# -- kill -9 of diagbench ------------------------------------------------------------------


def test_kill_9_leaves_nothing_after_the_next_cleanup(tmp_path):
    pidfile = tmp_path / "daemon.pid"
    spec = write_spec(
        tmp_path,
        {
            "command": fake_command("ignore-term", "child", f"daemon={pidfile}", "out=Load weight begin.", "hang"),
            "ready": {"log": "never"},
            "timeout": "90s",
            "grace": "1s",
            "fresh_caches": True,
        },
        matrix={"n": {"env": "N", "values": ["1", "2", "3"]}},
    )
    runs_dir = tmp_path / "runs"
    proc = _start("run", str(spec), "--runs-dir", str(runs_dir), "--parallel", "2")
    try:
        wait_until(lambda: pidfile.exists() and pidfile.read_text().strip(), what="the daemon")
        run = (runs_dir / "latest").resolve()
        wait_until(lambda: len(sweep_tagged(run)) >= 6, what="both trees")
        main_pids = [c.pid for c in psutil.Process(proc.pid).children()]
        caches = list(Path(tempfile.gettempdir()).glob(f"{CACHES_PREFIX}{scope_mark(current_scope())}+{proc.pid}@*"))
        assert len(main_pids) == 2 and len(caches) == 2
    finally:
        proc.kill()
    proc.wait()
    # the servers' main processes die with diagbench (parent-death signal) ...
    wait_until(lambda: not any(_alive(p) for p in main_pids), timeout=10, what="the main processes to die")
    # ... what they forked lives on, until the next diagbench command
    strays = sweep_tagged(run)
    assert len(strays) == 4
    cleanup = _diagbench("cleanup")
    assert cleanup.returncode == 0, cleanup.stderr
    assert sweep_tagged(run) == []
    assert not any(c.exists() for c in caches)
    for attempt in ("001-n-1-r1", "002-n-2-r1"):
        line = next(x for x in cleanup.stdout.splitlines() if f"attempt {attempt} of {run}" in x)
        assert line.startswith(f"stopped what diagbench pid {proc.pid} (ended) left of attempt {attempt}")
        assert f"recorded as cancelled in {run / 'cells' / attempt / 'result.json'}" in line
    records = _records(run)
    assert sorted(records) == ["001-n-1-r1", "002-n-2-r1"]  # the third never started
    for record in records.values():
        assert record["outcome"] == "cancelled"
        assert record["reason"].startswith(f"diagbench pid {proc.pid} ended during this attempt; at ")
        assert "diagbench cleanup" in record["reason"]
        assert len(record["killed"]) == 2 and record["left_behind"] == []
    assert {e["attempt"] for e in json.loads((run / "cleanup.json").read_text())} == set(records)
    again = _diagbench("cleanup")
    assert again.returncode == 0 and str(run) not in again.stdout
    report = _diagbench("report", str(run))
    assert report.returncode == 0 and "partial" in report.stdout


SERVER_HOLDING_ITS_PORT = """
import os, socket, sys, time
sock = socket.socket()
sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
sock.bind(("127.0.0.1", int(os.environ["PORT"])))
sock.listen()
if os.fork() == 0:  # a worker sharing the listening socket, as multi-process servers have
    time.sleep(3600)
first = not os.path.exists(sys.argv[1])
open(sys.argv[1], "a").close()
print("Load weight begin." if first else "The server is fired up and ready to roll!", flush=True)
time.sleep(3600)
"""


def test_resume_after_kill_9_sweeps_before_it_relaunches(tmp_path):
    server = tmp_path / "server.py"
    server.write_text(SERVER_HOLDING_ITS_PORT)
    spec = write_spec(
        tmp_path,
        {
            "command": [sys.executable, str(server), str(tmp_path / "launched-once")],
            "port": free_port(),
            "env": {"PORT": "{port}"},
            "timeout": "90s",
            "grace": "1s",
        },
    )
    proc = _start("run", str(spec), "--runs-dir", str(tmp_path / "runs"))
    run_link = tmp_path / "runs" / "latest"
    try:
        wait_until(lambda: run_link.exists() and len(sweep_tagged(run_link.resolve())) == 2, what="the worker")
    finally:
        proc.kill()
    proc.wait()
    run = run_link.resolve()
    resumed = _diagbench("run", str(spec), "--resume", str(run))
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert f"diagbench: stopped what diagbench pid {proc.pid} (ended) left of attempt" in resumed.stderr
    assert [r["outcome"] for r in _records(run).values()] == ["ready"]  # its port was freed, not 'launch_error'
    assert sweep_tagged(run) == []


def test_cleanup_leaves_a_live_diagbench_alone(tmp_path):
    (tmp_path / "live").mkdir()
    spec = write_spec(
        tmp_path / "live",
        {
            "command": fake_command("child", "out=Load weight begin.", "hang"),
            "ready": {"log": "never"},
            "timeout": "90s",
        },
    )
    proc = _start("run", str(spec), "--runs-dir", str(tmp_path / "runs"))
    try:
        run_link = tmp_path / "runs" / "latest"
        wait_until(lambda: run_link.exists() and len(sweep_tagged(run_link.resolve())) == 2, what="the live run")
        live = sorted(sweep_tagged(run_link.resolve()))
        cleanup = _diagbench("cleanup")
        (tmp_path / "other").mkdir()
        other = write_spec(tmp_path / "other", {"command": fake_command(f"out={READY}", "hang")})
        second = _diagbench("run", str(other), "--runs-dir", str(tmp_path / "other-runs"))
        assert sorted(sweep_tagged(run_link.resolve())) == live
    finally:
        proc.send_signal(signal.SIGINT)
        output = proc.communicate(timeout=60)[0].decode()
    assert cleanup.returncode == 0 and str(run_link.resolve()) not in cleanup.stdout
    assert second.returncode == 0, second.stderr
    assert proc.returncode == 130, output
    assert sweep_tagged(run_link.resolve()) == []


# -- signals -----------------------------------------------------------------------------


@pytest.mark.parametrize("signals", [("SIGINT", "SIGINT", "SIGINT"), ("SIGTERM", "SIGHUP")])
def test_further_signals_hurry_but_everything_is_written(tmp_path, signals):
    spec = write_spec(
        tmp_path,
        {
            "command": fake_command("ignore-term", "child", "out=Load weight begin.", "hang"),
            "ready": {"log": "never"},
            "timeout": "120s",
            "grace": "90s",  # far longer than this test waits: only hurrying ends it in time
        },
        matrix={"n": {"env": "N", "values": ["1", "2", "3"]}},
        hypotheses=[{"id": "h", "claim": "c", "when": {"n": "1"}, "supported_if": "ready", "refuted_if": "crashed"}],
    )
    runs_dir = tmp_path / "runs"
    proc = _start("run", str(spec), "--runs-dir", str(runs_dir), "--parallel", "2")
    try:
        wait_until(lambda: len(list(runs_dir.glob("2*/cells/*/server.log"))) == 2, what="two launches")
        run = next(runs_dir.glob("2*"))
        wait_until(lambda: len(sweep_tagged(run)) == 4, what="both trees")
        first, *further = signals
        proc.send_signal(getattr(signal, first))
        time.sleep(0.5)  # the orderly stop has begun: the servers ignore its SIGTERM
        for name in further:
            proc.send_signal(getattr(signal, name))
        output = proc.communicate(timeout=60)[0].decode()
    finally:
        _stop(proc)
    assert proc.returncode == 130, output
    assert "Traceback" not in output
    assert "outcomes" in output and "hypotheses" in output  # the tables were printed
    records = _records(run)
    assert [r["outcome"] for r in records.values()] == ["cancelled"] * 3
    assert all({k["signal"] for k in r["killed"]} == {"SIGKILL"} for r in list(records.values())[:2])
    assert json.loads((run / "verdicts.json").read_text())[0]["verdict"] == "inconclusive"
    assert sweep_tagged(run) == []


# -- a full disk, an unwritable record ------------------------------------------------------


def _flooding_spec(folder: Path) -> Path:
    return write_spec(
        folder,
        {"command": fake_command("flood=2", f"out={READY}", "hang")},
        matrix={"n": {"env": "N", "values": ["1", "2", "3"]}},
    )


def _one_clear_line(proc: subprocess.CompletedProcess[str], file: str, error: str) -> None:
    assert proc.returncode == 2, proc.stdout + proc.stderr
    lines = [x for x in proc.stderr.splitlines() if x.startswith("diagbench:")]
    assert len(lines) == 1, proc.stderr
    assert f"cannot write {file}: {error}; the run stopped" in lines[0]
    assert "Traceback" not in proc.stdout + proc.stderr
    assert proc.stdout.count(": launching") == 1  # nothing launched after the failed write


@pytest.fixture
def tiny_tmpfs(tmp_path):
    """A command prefix that runs in a mount namespace with a 256 KiB tmpfs at tmp_path/disk."""
    disk = tmp_path / "disk"
    disk.mkdir()
    probe = ["unshare", "-m", "sh", "-c", f"mount -t tmpfs -o size=256k tmpfs {disk}"]
    if shutil.which("unshare") is None or subprocess.run(probe, capture_output=True).returncode != 0:
        pytest.skip("needs unshare and mount (root) for a tiny tmpfs")
    return disk


def test_a_full_disk_stops_the_run_with_one_line(tmp_path, tiny_tmpfs):
    spec = _flooding_spec(tmp_path)
    copy = tmp_path / "kept"
    script = (
        f"mount -t tmpfs -o size=256k tmpfs {tiny_tmpfs} && "
        f'"$@" > {tmp_path}/out 2> {tmp_path}/err; echo $? > {tmp_path}/rc; cp -a {tiny_tmpfs} {copy}'
    )
    argv = diagbench_argv("run", str(spec), "--runs-dir", str(tiny_tmpfs / "runs"))
    subprocess.run(["unshare", "-m", "sh", "-c", script, "sh", *argv], timeout=120, check=True)
    proc = subprocess.CompletedProcess(
        argv, int((tmp_path / "rc").read_text()), (tmp_path / "out").read_text(), (tmp_path / "err").read_text()
    )
    run = tiny_tmpfs / "runs" / next((copy / "runs").glob("2*")).name  # the tmpfs went with its namespace
    _one_clear_line(proc, str(run / "cells" / "001-n-1-r1" / "server.log"), "No space left on device")
    kept = copy / "runs" / run.name
    assert json.loads((kept / "manifest.json").read_text())["run_id"] == run.name  # what was written is whole
    assert (kept / "cells" / "001-n-1-r1" / "server.log").stat().st_size > 100_000
    assert not list(kept.rglob("*.tmp"))


def test_a_file_size_limit_stops_the_run_with_one_line(tmp_path):
    spec = _flooding_spec(tmp_path)

    def limit_file_size() -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (300_000, 300_000))
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # an over-limit write fails with EFBIG instead

    proc = _diagbench("run", str(spec), "--runs-dir", str(tmp_path / "runs"), preexec_fn=limit_file_size)
    run = next((tmp_path / "runs").glob("2*"))
    _one_clear_line(proc, str(run / "cells" / "001-n-1-r1" / "server.log"), "File too large")
    assert sweep_tagged(run) == []
    report = _diagbench("report", str(run))
    assert report.returncode == 0 and run.name in report.stdout


def test_an_unwritable_record_stops_the_run_and_keeps_the_rest(tmp_path):
    spec = write_spec(
        tmp_path,
        {"command": fake_command(f"out={READY}", "hang")},
        matrix={"n": {"env": "N", "values": ["1", "2", "3"]}},
    )
    assert _diagbench("run", str(spec), "--runs-dir", str(tmp_path / "runs")).returncode == 0
    run = (tmp_path / "runs" / "latest").resolve()
    first = (run / "cells" / "001-n-1-r1" / "result.json").read_text()
    second = run / "cells" / "002-n-2-r1" / "result.json"
    second.write_text(json.dumps(json.loads(second.read_text()) | {"outcome": "cancelled"}))
    (run / "cells" / "003-n-3-r1" / "result.json").unlink()
    if subprocess.run(["chattr", "+i", str(second)], capture_output=True).returncode != 0:
        pytest.skip("needs chattr +i (root, a file system with attributes) for a record that cannot be replaced")
    try:
        proc = _diagbench("run", str(spec), "--resume", str(run))
    finally:
        subprocess.run(["chattr", "-i", str(second)], check=True)
    _one_clear_line(proc, str(second), "Operation not permitted")
    assert (run / "cells" / "001-n-1-r1" / "result.json").read_text() == first
    assert json.loads(second.read_text())["outcome"] == "cancelled"  # the old record, whole
    third = json.loads((run / "cells" / "003-n-3-r1" / "result.json").read_text())
    assert third["outcome"] == "cancelled"
    assert third["reason"].startswith("not started: the run stopped: cannot write")
    assert not list(run.rglob("*.tmp"))
    assert sweep_tagged(run) == []


# -- the log cap ---------------------------------------------------------------------------


def test_a_flooding_server_keeps_the_head_and_the_last_part(runs):
    oom = "torch.OutOfMemoryError: CUDA out of memory."
    r = runs.one({"command": fake_command("flood=3", f"err={oom}", "flood=2", "hang"), "max_log": "256KiB"})
    assert r.label == "failed:oom"
    log = (runs.last.run_dir.cells / r.attempt / "server.log").read_bytes()
    assert r.log_truncated is True
    assert r.log_kept_bytes == len(log) <= 256 * 1024 + 1024
    assert r.log_bytes > 3 << 20
    assert 0 < r.log_kept_bytes + r.log_dropped_bytes - r.log_bytes < 1024  # the marker lines
    assert oom.encode() in log
    assert log.startswith(b"[2025-05-01 10:00:00 TP0] Decode batch.")
    assert b"dropped here" not in log[: 127 * 1024]  # the head is whole
    assert log.index(b"dropped here") < log.index(oom.encode())


def test_below_the_cap_the_log_is_whole(runs):
    r = runs.one({"command": fake_command("flood=1", f"out={READY}", "hang")})
    log = (runs.last.run_dir.cells / r.attempt / "server.log").read_bytes()
    assert r.log_truncated is False and r.log_dropped_bytes == 0
    assert r.log_bytes == r.log_kept_bytes == len(log)


def test_the_deciding_line_survives_a_dropped_stretch(tmp_path):
    line = b"RuntimeError: CUDA error: an illegal memory access was encountered"
    log = CappedLog(tmp_path / "server.log", 256 << 10)
    log.write(b"loading\n" * 20_000)  # past the head
    log.write(line + b"\n")  # the deciding line, then more than the kept tail before the decision
    for _ in range(2_000):
        log.write(b"x" * 99 + b"\n")
    log.pin(Evidence(20_001, line.decode()))
    log.write(b"dying words\n")
    stats = log.close()
    text = (tmp_path / "server.log").read_bytes()
    assert stats.truncated and stats.kept == len(text)
    assert b"\n[diagbench: the deciding line, line 20001 of the stream]\n" + line + b"\n" in text
    assert text.endswith(b"dying words\n")


def test_at_least_a_megabyte_before_the_decision():
    assert tail_size(1 << 30) == 8 << 20
    assert all(tail_size(m) >= 1 << 20 for m in (4 << 20, 100 << 20, 1 << 30, 1 << 40))


def test_max_log_in_the_spec(tmp_path):
    spec = write_spec(tmp_path, {"command": fake_command("hang"), "max_log": "1GiB"})
    assert load_spec(spec).server.max_log == 1 << 30
    spec = write_spec(tmp_path, {"command": fake_command("hang"), "max_log": "10"})
    with pytest.raises(SpecError) as raised:
        load_spec(spec)
    assert "server.max_log: expected a size of at least 64KiB, like 1GiB, 500MB or 64KiB, got" in str(raised.value)


def test_only_a_gone_owner_s_processes_are_strays(tmp_path):
    from diagbench.launch.reaper import find_strays, stop_stray
    from diagbench.launch.tags import Owner, Tag, me

    ended = subprocess.Popen([sys.executable, "-c", "pass"])
    ended.wait()
    owners = {
        "ended": Owner(ended.pid, "1", me().namespace),
        "reused pid": Owner(os.getpid(), "1", me().namespace),  # this pid, another start: not us
        "live": me(),
        "other namespace": Owner(ended.pid, "1", "4026531999"),  # nothing can be known about it
    }
    procs = {
        name: subprocess.Popen(
            [sys.executable, "-c", "import time; time.sleep(120)"],
            env={**os.environ, **Tag("n0nce", name, owner, tmp_path).env()},
        )
        for name, owner in owners.items()
    }
    try:
        wait_until(lambda: len(sweep_tagged(tmp_path)) == 4, what="the tagged sleepers")
        strays = {s.tag.attempt: s for s in find_strays() if s.tag.run_dir == tmp_path}
        assert sorted(strays) == ["ended", "reused pid"]
        assert strays["ended"].pids == (procs["ended"].pid,)
        teardown = stop_stray(strays["ended"], grace=5)
        assert [(k.pid, k.signal) for k in teardown.killed] == [(procs["ended"].pid, "SIGTERM")]
        assert procs["ended"].wait(timeout=10) == -signal.SIGTERM
        assert all(procs[name].poll() is None for name in ("reused pid", "live", "other namespace"))
    finally:
        for proc in procs.values():
            proc.kill()
            proc.wait()


def test_a_diagbench_bug_in_one_attempt_is_recorded_with_its_traceback_and_no_secret(runs, tmp_path, monkeypatch):
    """A bug inside one attempt is `internal_error` (never `cancelled`), the other attempts
    still run, and the traceback a bug report needs is kept in the attempt's folder, blanked."""
    import diagbench.execute.local as local

    secret = "hf_" + "q" * 30
    real = local.run_attempt

    def buggy(planned, *args, **kw):  # diagbench's own code failing for one cell only
        if planned.cell.params["mode"] == "bad":
            raise RuntimeError(f"bug while handling {secret}")
        return real(planned, *args, **kw)

    monkeypatch.setattr(local, "run_attempt", buggy)
    ready = fake_command("out=The server is fired up and ready to roll!", "hang")
    spec = write_spec(
        tmp_path, {"command": ready, "env": {"HF_TOKEN": secret}}, {"mode": {"env": "M", "values": ["bad", "good"]}}
    )
    result = runs.run(spec)
    outcomes = {r.params["mode"]: r.outcome.value for r in result.records}
    assert outcomes == {"bad": "internal_error", "good": "ready"}
    bad = next(r for r in result.records if r.params["mode"] == "bad")
    trace = (result.run_dir.cells / bad.attempt / "diagbench-error.txt").read_text()
    assert "Traceback (most recent call last)" in trace and "RuntimeError: bug while handling" in trace
    assert secret not in trace and secret not in bad.reason and "<redacted>" in trace
    (error,) = result.harness_errors
    assert "diagbench-error.txt" in error and secret not in error


# -- a dead diagbench whose server left nothing running ---------------------------------------


def test_kill_9_with_a_childless_server_is_recorded_and_report_is_not_fooled(tmp_path):
    """The server has no children: the parent-death signal kills it with diagbench, so no
    process is left for a sweep to find. Its attempt still gets a record, and until the run is
    finished, `report` says the expect is unchecked (exit 1), never "all held" (exit 0)."""
    go = tmp_path / "go"
    spec = write_spec(
        tmp_path,
        {"command": fake_command(f"wait-for={go}", f"out={READY}", "hang"), "timeout": "90s"},
        matrix={"n": {"env": "N", "values": ["1", "2"]}},
        expect=[{"when": {"n": "1"}, "outcome": "ready"}],
    )
    runs_dir = tmp_path / "runs"
    proc = _start("run", str(spec), "--runs-dir", str(runs_dir))
    try:
        wait_until(lambda: (runs_dir / "latest").exists() and sweep_tagged(runs_dir / "latest"), what="the server")
        run = (runs_dir / "latest").resolve()
        (server,) = sweep_tagged(run)
    finally:
        proc.kill()
    proc.wait()
    wait_until(lambda: not _alive(server), timeout=10, what="the server to die with diagbench")
    before = _diagbench("report", str(run))
    assert before.returncode == 1, before.stdout + before.stderr
    unchecked = "diagbench: expect #1 not checked: the run is partial (001-n-1-r1 never ended with a result); "
    assert unchecked + f"finish it with: diagbench run --resume {run}" in before.stderr

    cleanup = _diagbench("cleanup", "--runs-dir", str(runs_dir))
    assert cleanup.returncode == 0, cleanup.stderr
    record = run / "cells" / "001-n-1-r1" / "result.json"
    assert cleanup.stdout.splitlines() == [
        f"diagbench pid {proc.pid} died while attempt 001-n-1-r1 of {run} ran (no process left, no record); "
        f"recorded as cancelled in {record}"
    ]
    (only,) = _records(run).values()  # the second attempt never launched: nothing to record
    assert only["outcome"] == "cancelled" and only["attempt"] == "001-n-1-r1"
    assert only["reason"].startswith(f"diagbench (pid {proc.pid}) died while it ran; ")
    assert "diagbench cleanup" in only["reason"]
    (entry,) = json.loads((run / "cleanup.json").read_text())
    assert entry["attempt"] == "001-n-1-r1" and entry["owner_pid"] == proc.pid
    assert _diagbench("cleanup", "--runs-dir", str(runs_dir)).stdout.startswith("nothing to clean up")
    after = _diagbench("report", str(run))
    assert after.returncode == 1 and unchecked in after.stderr and "cancelled" in after.stdout

    go.touch()
    resumed = _diagbench("run", "--resume", str(run))
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert [r["outcome"] for r in _records(run).values()] == ["ready", "ready"]
    assert _diagbench("report", str(run)).returncode == 0
    assert sweep_tagged(run) == []


def test_the_sweep_says_what_it_waits_for_and_ctrl_c_opens_no_run(tmp_path):
    """A new run finds a dead run's server still in its grace period: it says so before
    waiting, and a Ctrl-C meanwhile ends it (130) once that server is stopped, with no new
    run directory and nothing launched."""
    (tmp_path / "dead").mkdir()
    dead_spec = write_spec(
        tmp_path / "dead",
        {
            "command": fake_command("ignore-term", "child", "out=Load weight begin.", "hang"),
            "ready": {"log": "never"},
            "timeout": "90s",
            "grace": "4s",
        },
    )
    dead_runs = tmp_path / "dead" / "runs"
    dead = _start("run", str(dead_spec), "--runs-dir", str(dead_runs))
    try:
        wait_until(
            lambda: (dead_runs / "latest").exists() and len(sweep_tagged(dead_runs / "latest")) == 2, what="a tree"
        )
    finally:
        dead.kill()
    dead.wait()
    run = (dead_runs / "latest").resolve()
    wait_until(lambda: len(sweep_tagged(run)) == 1, timeout=10, what="the main process to die with diagbench")

    (tmp_path / "new").mkdir()
    new_spec = write_spec(tmp_path / "new", {"command": fake_command(f"out={READY}", "hang")})
    new_runs = tmp_path / "new" / "runs"
    proc = subprocess.Popen(
        diagbench_argv("run", str(new_spec), "--runs-dir", str(new_runs)),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stderr is not None
        line = proc.stderr.readline()
        proc.send_signal(signal.SIGINT)  # while the sweep waits out the dead run's grace
        rest = proc.communicate(timeout=60)
    finally:
        _stop(proc)
    assert line == f"diagbench: stopping what diagbench pid {dead.pid} left running in {run} (up to 4s)\n"
    assert proc.returncode == 130, rest
    assert "interrupted before the run began: nothing was opened or launched" in rest[1]
    assert "Resume:" not in rest[1] and "Traceback" not in rest[1]
    assert not new_runs.exists() or not any(new_runs.iterdir())
    assert _records(run)["001-only-x-r1"]["outcome"] == "cancelled"  # the dead run's attempt, recorded
    assert sweep_tagged(run) == []


# -- a temporary folder that cannot be used ----------------------------------------------------


def test_an_unusable_temporary_folder_stops_the_run_as_a_full_disk_does(tmp_path):
    """fresh_caches needs a folder per attempt in the temporary folder; where none can be
    made (full, unwritable) the run stops with one line and exit 2, not `internal_error` x N."""
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    tmp = blocker / "tmp"  # nothing can be made under a file, even by root
    spec = write_spec(
        tmp_path,
        {"command": fake_command(f"out={READY}", "hang"), "fresh_caches": True},
        matrix={"n": {"env": "N", "values": ["1", "2", "3"]}},
    )
    # tempfile, not TMPDIR: Python quietly falls back to /tmp from an unusable TMPDIR
    code = f"import sys, tempfile; tempfile.tempdir = {str(tmp)!r}; from diagbench.cli.app import app; app()"
    runs_dir = tmp_path / "runs"
    proc = subprocess.run(
        [sys.executable, "-c", code, "run", str(spec), "--runs-dir", str(runs_dir)],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, SCOPE_VAR: unique_id()},  # a scope of its own: no leftover of the host is swept (said)
    )
    assert proc.returncode == 2, proc.stdout + proc.stderr
    (line,) = [x for x in proc.stderr.splitlines() if x.startswith("diagbench:")]
    assert line.startswith(f"diagbench: cannot write {tmp}: Not a directory (server.fresh_caches makes a folder")
    assert "set TMPDIR to a writable folder); the run stopped" in line
    assert "Traceback" not in proc.stdout + proc.stderr
    run = (runs_dir / "latest").resolve()
    assert [r["outcome"] for r in _records(run).values()] == ["cancelled"] * 3  # never internal_error
    assert sweep_tagged(run) == []


def test_a_caches_folder_half_made_is_removed(tmp_path, monkeypatch):
    from diagbench.errors import WriteError
    from diagbench.launch.caches import compile_caches
    from diagbench.launch.tags import me

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    real = Path.mkdir

    def full_at_the_second(self: Path, *args: object, **kw: object) -> None:
        if self.name == "triton_cache_dir":  # as a tmpfs out of inodes would, after the first folders
            raise OSError(28, "No space left on device", str(self))
        real(self, *args, **kw)

    monkeypatch.setattr(Path, "mkdir", full_at_the_second)
    with pytest.raises(WriteError) as raised, compile_caches(("TORCHINDUCTOR_CACHE_DIR", "TRITON_CACHE_DIR"), me()):
        pass
    assert str(raised.value).startswith(f"cannot write {tmp_path}: No space left on device (")
    assert list(tmp_path.iterdir()) == []


def test_a_dead_run_that_cannot_be_locked_is_left_as_it_is(tmp_path):
    """A run directory the sweep cannot lock (another user's, a read-only one) is neither
    written nor a reason for `cleanup` or `run` to fail."""
    spec = write_spec(tmp_path, {"command": fake_command("out=Load weight begin.", "hang"), "ready": {"log": "never"}})
    runs_dir = tmp_path / "runs"
    proc = _start("run", str(spec), "--runs-dir", str(runs_dir))
    try:
        wait_until(lambda: (runs_dir / "latest").exists() and sweep_tagged(runs_dir / "latest"), what="the server")
    finally:
        proc.kill()
    proc.wait()
    run = (runs_dir / "latest").resolve()
    wait_until(lambda: sweep_tagged(run) == [], timeout=10, what="the server to die with diagbench")
    if subprocess.run(["chattr", "+i", str(run / ".lock")], capture_output=True).returncode != 0:
        pytest.skip("needs chattr +i (root, a file system with attributes) for a lock file that cannot be opened")
    try:
        locked_out = _diagbench("cleanup", "--runs-dir", str(runs_dir))
    finally:
        subprocess.run(["chattr", "-i", str(run / ".lock")], check=True)
    assert locked_out.returncode == 0, locked_out.stderr
    assert str(run) not in locked_out.stdout and _records(run) == {}
    cleanup = _diagbench("cleanup", "--runs-dir", str(runs_dir))
    assert f"diagbench pid {proc.pid} died while attempt 001-only-x-r1 of {run} ran" in cleanup.stdout
    assert _records(run)["001-only-x-r1"]["outcome"] == "cancelled"
