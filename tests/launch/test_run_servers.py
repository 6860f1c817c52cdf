"""Integration: real fake-server processes, each misbehaving as real servers do."""

from __future__ import annotations

import os
import socket
import sys
import time

import psutil
import pytest

from conftest import fake_command, wait_until
from diagbench.vocab import Evidence

READY = "The server is fired up and ready to roll!"
FAST = 2.0  # decided long before the 20 s timeout


def test_ready_line_on_stdout(runs):
    r = runs.one({"command": fake_command("out=Load weight begin. avail mem=10 GB", f"out={READY}", "hang")})
    assert r.outcome == "ready"
    assert r.evidence == Evidence(2, READY)
    assert r.signature == "sglang.ready"
    assert r.phase == "load"
    assert r.time_to_outcome_s < FAST


def test_the_read_that_decided_is_in_server_log_before_what_the_sigterm_made_the_server_say(runs):
    """The deciding read goes to server.log only after the SIGTERM (the file never delays it),
    and still in its place: before the lines the server printed as it stopped."""
    command = fake_command("out=Load weight begin.", "term-out=stopping on SIGTERM", f"out={READY}", "hang")
    r = runs.one({"command": command})
    assert r.outcome == "ready"
    log = (runs.last.run_dir.cells / r.attempt / "server.log").read_text().splitlines()
    assert log == ["Load weight begin.", READY, "stopping on SIGTERM"]


def test_ready_only_on_stderr(runs):
    r = runs.one({"command": fake_command(f"err={READY}", "hang")})
    assert r.outcome == "ready"
    assert r.evidence.text == READY


def test_ready_line_split_across_writes(runs):
    r = runs.one({"command": fake_command("out=starting", f"split={READY}", "hang")})
    assert r.outcome == "ready"
    assert r.evidence == Evidence(2, READY)


def test_error_then_hang_fails_at_once(runs):
    r = runs.one(
        {
            "command": fake_command(
                "out=Capture cuda graph begin. This can take up to several minutes. avail mem=60 GB",
                "err=torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 224.00 MiB.",
                "hang",
            )
        }
    )
    assert (r.outcome, r.failure_class) == ("failed", "oom")
    assert r.phase == "capture"
    assert r.time_to_outcome_s < FAST


def test_progress_bar_then_wrapped_capture_failure(runs):
    traceback = (
        "err=Scheduler hit an exception: Traceback (most recent call last):\\n"
        "RuntimeError: CUDA error: operation not permitted when stream is capturing\\n"
        "Exception: Capture cuda graph failed: CUDA error: operation not permitted when stream is capturing\\n"
        "Possible solutions:"
    )
    r = runs.one(
        {"command": fake_command("out=Capture cuda graph begin. avail mem=60 GB", "progress=20", traceback, "hang")}
    )
    assert (r.outcome, r.failure_class) == ("failed", "cuda_graph_capture")
    assert r.signature == "sglang.capture_failed"
    assert r.secondary_classes == []  # the root cause is a capture error too
    assert r.phase == "capture bs=141"
    assert r.evidence.text.startswith("Exception: Capture cuda graph failed")
    assert r.time_to_outcome_s < FAST


def test_wrapper_keeps_the_root_cause_as_secondary_class(runs):
    r = runs.one(
        {"command": fake_command("err=Exception: Capture cuda graph failed: CUDA error: out of memory", "exit=1")}
    )
    assert (r.failure_class, r.secondary_classes) == ("cuda_graph_capture", ["oom"])


def test_double_forked_daemon_ignoring_sigterm_is_killed(runs, tmp_path):
    pidfile = tmp_path / "daemon.pid"
    r = runs.one(
        {"command": fake_command("ignore-term", "child", f"daemon={pidfile}", f"out={READY}", "hang"), "grace": "0.5s"}
    )
    assert r.outcome == "ready"
    daemon_pid = int(pidfile.read_text())
    assert not psutil.pid_exists(daemon_pid) or psutil.Process(daemon_pid).status() == psutil.STATUS_ZOMBIE
    killed = {k.pid: k.signal for k in r.killed}
    assert killed.get(daemon_pid) == "SIGKILL"
    assert r.left_behind == []
    assert r.teardown_s < 0.5 + 2


def test_self_sigkill_is_a_crash(runs):
    r = runs.one({"command": fake_command("out=Load weight begin.", "signal=9")})
    assert (r.outcome, r.signal, r.exit_code) == ("crashed", 9, None)
    assert "SIGKILL" in r.reason


def test_exit_code_without_signature_is_a_crash(runs):
    r = runs.one({"command": fake_command("out=nothing to see", "exit=3")})
    assert (r.outcome, r.exit_code, r.failure_class) == ("crashed", 3, None)


def test_import_error_and_exit(runs):
    r = runs.one(
        {
            "command": fake_command(
                "err=Traceback (most recent call last):",
                "err=ModuleNotFoundError: No module named 'sgl_kernel'",
                "exit=1",
            )
        }
    )
    assert (r.outcome, r.failure_class) == ("failed", "import_error")


def test_vllm_warning_about_import_is_not_a_failure(runs):
    warning = "out=WARNING 05-01 10:00:00 [_custom_ops.py:20] Failed to import from vllm._C with ImportError('libcuda.so.1: cannot open shared object file: No such file or directory')"
    r = runs.one({"command": fake_command(warning, f"out={READY}", "hang")})
    assert r.outcome == "ready"


def test_oom_and_exit(runs):
    r = runs.one(
        {
            "command": fake_command(
                "err=RuntimeError: Not enough memory. Please try to increase --mem-fraction-static.", "exit=1"
            )
        }
    )
    assert (r.outcome, r.failure_class) == ("failed", "oom")


def test_flood_with_junk_and_a_long_line_then_ready(runs):
    r = runs.one({"command": fake_command("flood=60", "junk", "longline=4", f"out={READY}", "hang"), "timeout": "120s"})
    assert r.outcome == "ready"
    assert r.log_bytes > 60 * (1 << 20)
    log = runs.last.run_dir.cells / r.attempt / "server.log"
    assert log.stat().st_size == r.log_bytes  # raw bytes, all of them


def test_ready_only_over_http(runs):
    r = runs.one(
        {
            "command": fake_command("out=serving soon", "sleep=0.3", "http=/health", "hang"),
            "env": {"PORT": "{port}"},
            "ready": {"http": "/health"},
        }
    )
    assert (r.outcome, r.signature) == ("ready", "http")
    assert r.time_to_outcome_s < FAST


def test_log_and_http_both_required(runs):
    r = runs.one(
        {
            "command": fake_command("http=/health", "sleep=0.5", "out=ready now", "hang"),
            "env": {"PORT": "{port}"},
            "ready": {"http": "/health", "log": "ready now"},
        }
    )
    assert r.outcome == "ready"
    assert r.time_to_outcome_s >= 0.5


def test_plain_hang_times_out_with_its_phase(runs):
    r = runs.one(
        {
            "command": fake_command("err=Waiting for shard to be ready... rank=0", "hang"),
            "timeout": "1s",
            "ready": {"http": "/health"},
        }
    )
    assert (r.outcome, r.phase) == ("timeout", "load")
    assert 1.0 <= r.time_to_outcome_s < 1.5


def test_uvicorn_startup_is_not_ready_for_sglang(runs):
    r = runs.one(
        {
            "command": fake_command(
                "err=INFO:     Application startup complete.",
                "sleep=0.2",
                "err=Initialization failed. warmup error: Traceback",
                "err=Killed",
                "exit=0",
            )
        }
    )
    assert (r.outcome, r.failure_class, r.signature) == ("failed", "other", "sglang.warmup_failed")


def test_missing_executable_is_a_launch_error(runs):
    r = runs.one({"command": ["no-such-server-binary", "--port", "{port}"]})
    assert r.outcome == "launch_error"
    assert "no-such-server-binary" in r.reason and "not found" in r.reason


def test_bad_cwd_is_a_launch_error(runs):
    r = runs.one({"command": fake_command("hang"), "cwd": "does/not/exist"})
    assert r.outcome == "launch_error"
    assert "does/not/exist" in r.reason


def test_taken_port_names_its_holder(runs):
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        port = holder.getsockname()[1]
        r = runs.one({"command": fake_command("hang"), "port": port})
    assert r.outcome == "launch_error"
    assert f"port {port} is already in use by pid {os.getpid()}" in r.reason


def test_shell_only_when_asked(runs):
    r = runs.one(
        {"command": "echo $((40+2)) && echo 'The server is fired up and ready to roll!' && sleep 30", "shell": True}
    )
    assert r.outcome == "ready"
    log = (runs.last.run_dir.cells / r.attempt / "server.log").read_text()
    assert log.startswith("42\n")


def test_without_shell_nothing_is_expanded(runs):
    r = runs.one({"command": fake_command("out=$HOME", "exit=0")})
    log = (runs.last.run_dir.cells / r.attempt / "server.log").read_text()
    assert log == "$HOME\n"


def test_secret_values_are_not_recorded(runs):
    r = runs.one(
        {
            "command": fake_command(f"out={READY}", "hang"),
            "env": {"HF_TOKEN": "hf_abcdefghijklmnop", "MY_API_KEY": "x", "PLAIN": "visible"},
        }
    )
    assert r.env_changes["HF_TOKEN"] == "<redacted>"
    assert r.env_changes["MY_API_KEY"] == "<redacted>"
    assert r.env_changes["PLAIN"] == "visible"
    manifest = (runs.last.run_dir.path / "manifest.json").read_text()
    assert "hf_abcdefghijklmnop" not in manifest


def test_matrix_env_unset_and_flags_reach_the_server(runs, tmp_path, monkeypatch):
    from conftest import write_spec

    monkeypatch.setenv("TO_REMOVE", "present")
    spec = write_spec(
        tmp_path,
        {"command": [*fake_command(), "out=$ready"], "shell": False, "ready": {"log": "never"}, "timeout": "3s"},
        matrix={"var": {"env": "TO_REMOVE", "values": ["unset", "kept"]}},
    )
    result = runs.run(spec)
    assert [r.env_changes["TO_REMOVE"] for r in result.records] == [None, "kept"]


def test_records_written_before_the_next_attempt(runs, tmp_path):
    from conftest import write_spec

    spec = write_spec(
        tmp_path,
        {"command": fake_command(f"out={READY}", "hang")},
        matrix={"n": {"env": "N", "values": ["1", "2", "3"]}},
    )
    seen: list[int] = []

    def count_records(kind, name, payload):
        if kind == "start":
            seen.append(len(list((runs.folder / "runs").glob("2*/cells/*/result.json"))))

    runs.hook = count_records
    result = runs.run(spec)
    assert [r.outcome for r in result.records] == ["ready"] * 3
    assert seen == [0, 1, 2]
    assert (runs.folder / "runs" / "latest").resolve() == result.run_dir.path.resolve()


def test_parallel_cells_each_get_a_free_port(runs, tmp_path):
    from conftest import write_spec

    spec = write_spec(
        tmp_path,
        {
            "command": fake_command("sleep=0.5", "http=/health", "hang"),
            "env": {"PORT": "{port}"},
            "ready": {"http": "/health"},
        },
        matrix={"n": {"env": "N", "values": ["1", "2", "3", "4"]}},
    )
    started = time.monotonic()
    result = runs.run(spec, parallel=4)
    assert [r.outcome for r in result.records] == ["ready"] * 4
    assert time.monotonic() - started < 4 * 0.5 + 3


@pytest.mark.parametrize("sig", ["SIGINT", "SIGTERM"])
def test_interrupting_diagbench_records_and_cleans_up(tmp_path, sig):
    import signal
    import subprocess
    import sys

    from conftest import write_spec

    spec = write_spec(
        tmp_path,
        {
            "command": fake_command("ignore-term", "out=Load weight begin.", "hang"),
            "grace": "0.3s",
            "ready": {"log": "never"},
        },
        matrix={"n": {"env": "N", "values": ["1", "2", "3"]}},
    )
    proc = subprocess.Popen(
        [sys.executable, "-m", "diagbench", "run", str(spec), "--runs-dir", str(tmp_path / "runs")],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    wait_until(  # its first line: it ignores SIGTERM from here on
        lambda: any(
            "Load weight begin." in p.read_text() for p in (tmp_path / "runs").glob("*/cells/001-*/server.log")
        ),
        timeout=20,
        what="the first server's first line",
    )
    proc.send_signal(getattr(signal, sig))
    output, _ = proc.communicate(timeout=30)
    assert proc.returncode == 130, output.decode()
    run_dir = next((tmp_path / "runs").glob("2*"))
    import json

    outcomes = [json.loads(p.read_text())["outcome"] for p in sorted(run_dir.glob("cells/*/result.json"))]
    assert outcomes == ["cancelled", "cancelled", "cancelled"]
    # every process was SIGKILLed by the teardown; on a loaded machine the kernel may take a
    # moment to finish one that is exiting (seen in CI once in about ten runs): 3 s, no more
    from conftest import wait_gone

    wait_gone(run_dir.name)
    assert b"Traceback" not in output


def test_ready_line_without_a_line_ending_then_silence(runs):
    r = runs.one({"command": fake_command("out=Load weight begin.", f"raw={READY}", "hang")})
    assert r.outcome == "ready"
    assert r.evidence == Evidence(2, READY)
    assert r.time_to_outcome_s < FAST


def test_settle_window_is_configurable(runs):
    r = runs.one({"command": fake_command("err=torch.OutOfMemoryError: CUDA out of memory.", "hang"), "settle": "1s"})
    assert (r.outcome, r.failure_class) == ("failed", "oom")
    assert 1.0 <= r.time_to_outcome_s < FAST


def test_parallel_with_a_fixed_port_is_refused(runs, tmp_path):
    from conftest import write_spec
    from diagbench.errors import UserError

    spec = write_spec(
        tmp_path, {"command": fake_command("hang"), "port": 8000}, matrix={"n": {"env": "N", "values": ["1", "2"]}}
    )
    with pytest.raises(UserError, match=r"--parallel 2 needs server\.port: auto"):
        runs.run(spec, parallel=2)


def test_shell_command_not_found_is_a_launch_error(runs):
    r = runs.one({"command": "no-such-server-xyz --port {port}", "shell": True})
    assert (r.outcome, r.exit_code) == ("launch_error", 127)
    assert r.reason == "/bin/sh could not start the command: command not found (exit 127)"


def test_non_executable_server_is_a_launch_error(runs, tmp_path):
    script = tmp_path / "server.sh"
    script.write_text("#!/bin/sh\necho hi\n")
    r = runs.one({"command": [str(script)]})
    assert r.outcome == "launch_error"
    assert "is not executable" in r.reason


def test_fresh_caches_give_each_attempt_its_own_empty_folders(runs, tmp_path):
    from conftest import write_spec

    show = "import os; print('caches', os.environ['TORCHINDUCTOR_CACHE_DIR'], os.environ['TRITON_CACHE_DIR'])"
    spec = write_spec(
        tmp_path,
        {
            "command": [
                sys.executable,
                "-c",
                show + "; print('The server is fired up and ready to roll!'); import time; time.sleep(30)",
            ],
            "fresh_caches": True,
        },
        matrix={"n": {"env": "N", "values": ["1", "2"]}},
    )
    result = runs.run(spec)
    folders = []
    for r in result.records:
        assert r.outcome == "ready"
        line = (result.run_dir.cells / r.attempt / "server.log").read_text().splitlines()[0]
        _, inductor, triton = line.split()
        assert r.env_changes["TORCHINDUCTOR_CACHE_DIR"] == inductor
        assert r.env_changes["TRITON_CACHE_DIR"] == triton and triton != inductor
        folders.append(inductor)
        assert not os.path.exists(inductor.rsplit("/", 1)[0])  # removed after the attempt
    assert folders[0] != folders[1]


def test_ready_over_http_at_a_full_url(runs):
    r = runs.one(
        {
            "command": fake_command("http=/ping", "hang"),
            "env": {"PORT": "{port}"},
            "ready": {"http": "http://localhost:{port}/ping"},
        }
    )
    assert (r.outcome, r.signature) == ("ready", "http")


def test_an_http_readiness_timeout_says_what_the_server_answered(runs):
    r = runs.one(
        {
            "command": fake_command("http=/elsewhere", "hang"),
            "env": {"PORT": "{port}"},
            "ready": {"http": "/health"},
            "timeout": "2s",
        }
    )
    assert r.outcome == "timeout"
    assert r.reason.endswith("; GET /health last got HTTP 404"), r.reason


def test_a_server_that_exits_0_right_after_its_ready_line_records_its_exit_code(runs):
    """Decided on the ready line, then the process ended on its own (the teardown's SIGTERM,
    ignored, cannot race it): the record says how."""
    r = runs.one({"command": fake_command("ignore-term", f"out={READY}", "exit=0")})
    assert r.outcome == "ready"
    assert (r.exit_code, r.signal) == (0, None)


def test_a_server_that_exits_3_after_ready_records_3(runs):
    r = runs.one({"command": fake_command(f"out={READY}", "sleep=0.05", "exit=3")})
    assert r.outcome == "ready"
    assert r.exit_code in (3, None)  # 3 if it ended before the teardown's SIGTERM, else killed by it
    assert r.signal in (None, 15)
