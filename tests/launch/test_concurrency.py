"""Many attempts and many diagbench processes at once: none harms another.

Per-attempt scanner state, a tag unique to each invocation, a lock on the run directory,
port leases across processes, and the teardown's `killed` list. Every server is a real
process; where the point is two diagbench processes, two real ones run at once."""

from __future__ import annotations

import json
import os
import signal
import socket
import stat
import subprocess
import sys
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from conftest import diagbench_argv, fake_command, run_cli, wait_until, write_spec
from diagbench.errors import UserError
from diagbench.launch import ports
from diagbench.launch.proctable import process_name, sweep_tagged, tree_names
from diagbench.logs import scan
from diagbench.logs.signatures import builtin_packs, load_packs
from diagbench.records.store import check_run_id

READY = "The server is fired up and ready to roll!"


def _records(run: Path) -> list[dict]:
    return [json.loads(p.read_text()) for p in sorted(run.glob("cells/*/result.json"))]


# -- 1. each attempt scans with its own state ---------------------------------------------


@pytest.mark.parametrize("parallel", [4, 16])
@pytest.mark.parametrize("engine", ["hyperscan", "re"])
def test_chatty_servers_in_parallel_all_decide(runs, tmp_path, monkeypatch, engine, parallel):
    if engine == "re":
        monkeypatch.setattr(scan, "hyperscan", None)  # the fallback engine, as where no wheel exists
    elif scan.hyperscan is None:
        pytest.skip("hyperscan is not installed")
    assert scan.Scanner(load_packs(builtin_packs(), Path("."))).engine_name.startswith(engine)
    spec = write_spec(
        tmp_path,
        {"command": fake_command("flood=2", f"out={READY}", "hang"), "timeout": "90s"},
        matrix={"n": {"env": "N", "values": [str(i) for i in range(parallel)]}},
    )
    result = runs.run(spec, parallel=parallel)
    assert result.harness_errors == []
    assert [r.label for r in result.records] == ["ready"] * parallel
    assert len({r.evidence.line_no for r in result.records}) == 1  # every one read its whole log


def test_forked_scanners_scan_in_threads_at_once():
    if scan.hyperscan is None:
        pytest.skip("hyperscan is not installed")
    scanner = scan.Scanner(load_packs(builtin_packs(), Path(".")))
    buf = b"[2025-05-01 10:00:00 TP0] Decode batch. #running-req: 1\n" * 100_000 + READY.encode() + b"\n"
    expected = [(h.signature.id, h.line_no) for h in scanner.scan(buf, 1)]
    assert expected == [("sglang.ready", 100_001)]

    def scan_often(forked: scan.Scanner) -> set[tuple[tuple[str, int], ...]]:
        return {tuple((h.signature.id, h.line_no) for h in forked.scan(buf, 1)) for _ in range(5)}

    with ThreadPoolExecutor(8) as pool:
        seen = set().union(*pool.map(scan_often, [scanner.fork() for _ in range(8)]))
    assert seen == {tuple(expected)}


# -- 2. a tag of each invocation's own, and the run directory's lock -----------------------


def _spec(folder: Path, *actions: str, **server: object) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    return write_spec(folder, {"command": fake_command(*actions), **server})


def test_same_run_id_in_two_runs_dirs_never_touch_each_other(tmp_path):
    # the quick run tears its server down while the slow one's (same run id, same
    # attempt name) is still starting: once, that teardown killed the other run's server
    quick = _spec(tmp_path / "a", "sleep=2", f"out={READY}", "hang")
    slow = _spec(tmp_path / "b", "sleep=6", f"out={READY}", "hang")
    procs = [
        subprocess.Popen(
            diagbench_argv("run", str(spec), "--runs-dir", str(spec.parent / "runs"), "--run-id", "nightly"),
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
        )
        for spec in (quick, slow)
    ]
    outputs = [p.communicate(timeout=120)[0].decode() for p in procs]
    assert [p.returncode for p in procs] == [0, 0], outputs
    for folder in ("a", "b"):
        run = tmp_path / folder / "runs" / "nightly"
        assert [r["outcome"] for r in _records(run)] == ["ready"]
        assert sweep_tagged(run) == []


def test_a_busy_run_dir_is_refused_naming_its_holder(tmp_path):
    spec = _spec(tmp_path, "out=Load weight begin.", "hang", ready={"log": "never"}, timeout="90s")
    runs_dir = tmp_path / "runs"
    holder = subprocess.Popen(
        diagbench_argv("run", str(spec), "--runs-dir", str(runs_dir), "--run-id", "busy"),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        wait_until(lambda: list(runs_dir.glob("busy/cells/*/server.log")), what="the first run's launch")
        again = run_cli("run", str(spec), "--runs-dir", str(runs_dir), "--run-id", "busy", timeout=60)
        resumed = run_cli("run", str(spec), "--resume", str(runs_dir / "busy"), timeout=60)
    finally:
        holder.send_signal(signal.SIGINT)
        holder.communicate(timeout=60)
    assert again.returncode == 2
    assert f"already exists, in use by diagbench pid {holder.pid} (choose another --run-id)" in again.stderr
    assert resumed.returncode == 2
    assert f"run directory {runs_dir / 'busy'} is in use by diagbench pid {holder.pid}" in resumed.stderr
    assert "Traceback" not in again.stderr + resumed.stderr
    assert holder.returncode == 130
    assert [r["outcome"] for r in _records(runs_dir / "busy")] == ["cancelled"]  # only the holder wrote it
    assert sweep_tagged(runs_dir / "busy") == []


@pytest.mark.parametrize("run_id", ["../x", "/abs", "a/b", "latest", ".hidden", "sp ace", ""])
def test_run_ids_are_plain_names(run_id):
    with pytest.raises(UserError) as raised:
        check_run_id(run_id)
    assert "use letters, digits, '.', '_' and '-', not starting with '.'" in str(raised.value)


@pytest.mark.parametrize("run_id", ["../x", "latest"])
def test_a_bad_run_id_exits_2_before_anything(tmp_path, run_id):
    spec = _spec(tmp_path, f"out={READY}", "hang")
    proc = run_cli("run", str(spec), "--runs-dir", str(tmp_path / "runs"), "--run-id", run_id, timeout=60)
    assert proc.returncode == 2
    assert proc.stderr.startswith(f"diagbench: --run-id {run_id!r} ")
    assert not (tmp_path / "runs").exists() and not (tmp_path / "x").exists()


# -- 3. ports ---------------------------------------------------------------------------


def test_two_diagbench_processes_never_share_an_auto_port(tmp_path):
    server = {
        "command": fake_command("http=/health", "hang"),
        "env": {"PORT": "{port}"},
        "ready": {"http": "/health"},
    }
    specs = []
    for name in ("a", "b"):
        (tmp_path / name).mkdir()
        specs.append(write_spec(tmp_path / name, server, matrix={"n": {"env": "N", "values": ["1", "2", "3", "4"]}}))
    procs = [
        subprocess.Popen(
            diagbench_argv("run", str(s), "--runs-dir", str(s.parent / "runs"), "--parallel", "4", "--repeat", "2"),
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
        )
        for s in specs
    ]
    outputs = [p.communicate(timeout=180)[0].decode() for p in procs]
    assert [p.returncode for p in procs] == [0, 0], outputs
    records = [r for s in specs for r in _records((s.parent / "runs" / "latest").resolve())]
    assert [r["outcome"] for r in records] == ["ready"] * 16


@pytest.fixture
def other_diagbench_lease():
    """A second process holding the lease of a port, as another diagbench's attempt would."""
    code = (
        "import sys, time\n"
        "from diagbench.launch.ports import lease_port\n"
        "with lease_port(None, 'attempt 001 of /elsewhere') as lease:\n"
        "    print(lease.port, flush=True)\n"
        "    time.sleep(120)\n"
    )
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    port = int(proc.stdout.readline())
    yield proc, port
    proc.kill()
    proc.wait()


def test_a_leased_port_is_never_handed_out_again(other_diagbench_lease, monkeypatch):
    holder, port = other_diagbench_lease
    with ports.lease_port(port, "a fixed port") as fixed:
        assert fixed.holder == f"diagbench pid {holder.pid} (attempt 001 of /elsewhere)"
    offered = iter([port, port])
    real = ports.free_port
    monkeypatch.setattr(ports, "free_port", lambda: next(offered, None) or real())
    with ports.lease_port(None, "auto") as auto, ports.lease_port(None, "auto too") as other:
        assert auto.holder is None and auto.port != port
        assert other.holder is None and other.port not in (port, auto.port)  # the in-process registry
    holder.kill()
    holder.wait()  # the kernel drops a dead holder's lock
    with ports.lease_port(port, "after") as after:
        assert after.holder is None


def test_a_port_taken_between_check_and_bind_names_its_holder(runs, monkeypatch):
    import contextlib

    from diagbench.launch import attempt

    squatters: list[socket.socket] = []
    leased = attempt.lease_port

    @contextlib.contextmanager
    def lease_then_squat(port, label):
        with leased(port, label) as lease:
            sock = socket.socket()  # a foreign program binds it before the server does
            sock.bind(("127.0.0.1", lease.port))
            sock.listen()
            squatters.append(sock)
            yield lease

    monkeypatch.setattr(attempt, "lease_port", lease_then_squat)
    try:
        r = runs.one(
            {"command": fake_command("http=/health", "hang"), "env": {"PORT": "{port}"}, "ready": {"http": "/health"}}
        )
    finally:
        for sock in squatters:
            sock.close()
    assert r.label == "failed:port_in_use"
    assert f"is held by pid {os.getpid()}" in r.reason


# -- teardown's record, and the files' modes ---------------------------------------------


def test_killed_names_what_died_of_the_first_sigterm(runs):
    r = runs.one({"command": fake_command("child", f"out={READY}", "hang")})
    assert r.outcome == "ready"
    assert len(r.killed) == 2  # the server and its child, both gone at the first SIGTERM
    assert {k.signal for k in r.killed} == {"SIGTERM"}


def test_the_tree_named_before_the_first_sigterm_has_psutil_names(tmp_path):
    """The raw /proc walk that names the tree before the signal gives psutil's names: a
    name the kernel cut at 15 bytes is completed, a zombie (it died before) is left out."""
    import psutil

    long_name = tmp_path / "a-worker-name-longer-than-15"
    long_name.symlink_to(sys.executable)
    code = (
        "import os, sys, time\n"
        "if os.fork() == 0: os._exit(0)\n"  # a zombie: never reaped
        "if os.fork() == 0: os.execv(sys.argv[1], [sys.argv[1], '-c', 'import time; time.sleep(60)'])\n"
        "time.sleep(60)\n"
    )
    proc = subprocess.Popen([sys.executable, "-c", code, str(long_name)])
    main = psutil.Process(proc.pid)

    def live() -> list[psutil.Process]:
        """The main process and its worker, once the other child is a zombie and the worker
        runs under its long name (one look at the children: they change meanwhile)."""
        try:
            states = [(c, c.status(), c.name()) for c in main.children()]
        except psutil.Error:
            return []
        zombies = [c for c, status, _ in states if status == psutil.STATUS_ZOMBIE]
        workers = [c for c, status, name in states if status != psutil.STATUS_ZOMBIE and name == long_name.name]
        return [main, *workers] if len(states) == 2 and len(zombies) == 1 and len(workers) == 1 else []

    try:
        procs = wait_until(live, what="a zombie and a worker with a long name")
        assert tree_names(proc.pid) == {p.pid: process_name(p) for p in procs}
    finally:
        for child in main.children():
            child.kill()
        proc.kill()
        proc.wait()


def test_records_and_logs_are_written_alike(runs):
    r = runs.one({"command": fake_command(f"out={READY}", "hang")})
    folder = runs.last.run_dir.cells / r.attempt
    modes = {stat.S_IMODE((folder / name).stat().st_mode) for name in ("server.log", "result.json")}
    modes.add(stat.S_IMODE((runs.last.run_dir.path / "manifest.json").stat().st_mode))
    umask = os.umask(0)
    os.umask(umask)
    assert modes == {0o644 & ~umask}


def test_a_lock_is_released_when_its_run_ends(runs, tmp_path):
    from diagbench.records.store import lock_holder

    r = runs.one({"command": fake_command(f"out={READY}", "hang")})
    assert r.outcome == "ready"
    assert lock_holder(runs.last.run_dir.path) is None


def test_scheduler_keeps_no_thread_after_the_run(runs):
    before = threading.active_count()
    runs.one({"command": fake_command(f"out={READY}", "hang")})
    assert threading.active_count() == before


def test_two_runs_of_one_spec_in_the_same_second_get_their_own_folders(tmp_path):
    from diagbench.records.store import new_run_id, open_new_run

    first, second = open_new_run(tmp_path, "same"), open_new_run(tmp_path, "same")
    try:
        assert first.path != second.path
        assert second.path.name.startswith(new_run_id("same")[:8])  # the date, then the name
        assert {p.name.endswith("-same") or p.name.endswith("-same-2") for p in (first.path, second.path)} == {True}
    finally:
        first.release()
        second.release()


def test_a_fixed_port_lease_holds_whatever_each_run_s_tmpdir(tmp_path):
    """The lease folder is the host's, not TMPDIR's: a second diagbench with another TMPDIR
    (another shell, CI job or Slurm job) is told who holds the port instead of launching onto it."""
    port = ports.free_port()
    server = {"command": fake_command("out=Load weight begin.", "hang"), "port": port, "ready": {"log": "never"}}
    specs, tmpdirs = [], []
    for name in ("a", "b"):
        (tmp_path / name / "tmp").mkdir(parents=True)
        tmpdirs.append(tmp_path / name / "tmp")
        specs.append(write_spec(tmp_path / name, {**server, "timeout": "90s" if name == "a" else "5s"}))

    def run(index: int, **kw: object) -> subprocess.Popen[bytes]:
        spec = specs[index]
        env = {**os.environ, "TMPDIR": str(tmpdirs[index])}
        argv = diagbench_argv("run", str(spec), "--runs-dir", str(spec.parent / "runs"))
        return subprocess.Popen(argv, env=env, **kw)  # type: ignore[call-overload]

    holder = run(0, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_until(lambda: list(tmp_path.glob("a/runs/2*/cells/*/server.log")), what="the holder's launch")
        second = run(1, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        output = b"".join(second.communicate(timeout=120)).decode()
    finally:
        holder.send_signal(signal.SIGINT)
        holder.communicate(timeout=60)
    (record,) = _records((tmp_path / "b" / "runs" / "latest").resolve())
    assert record["outcome"] == "launch_error", output
    assert record["reason"].startswith(f"port {port} is already in use by diagbench pid {holder.pid} (")
    assert second.returncode == 2 and holder.returncode == 130


def test_leaked_caches_are_looked_for_in_tmp_whatever_this_tmpdir(tmp_path, monkeypatch):
    """A diagbench that died with another TMPDIR (or none) left its caches folder in /tmp: a
    sweep from here finds it. (Listed, not removed by a `cleanup` process: any sweep on this
    host, another test session's too, may remove it first.)"""
    import shutil
    import tempfile

    from diagbench.launch.reaper import leaked_folders
    from diagbench.launch.tags import Owner, caches_prefix, current_scope, me

    ended = subprocess.Popen([sys.executable, "-c", "pass"])  # a diagbench that has ended
    ended.wait()
    leaked = Path("/tmp") / (caches_prefix(Owner(ended.pid, "1", me().namespace), current_scope()) + "t3st")
    elsewhere = tmp_path / "tmp"
    elsewhere.mkdir()
    mine = elsewhere / leaked.name
    monkeypatch.setattr(tempfile, "tempdir", str(elsewhere))
    try:
        leaked.mkdir()
        mine.mkdir()
        found = leaked_folders()
        assert leaked in found and mine in found
    finally:
        shutil.rmtree(leaked, ignore_errors=True)
