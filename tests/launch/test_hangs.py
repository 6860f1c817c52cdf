"""Hangs with real processes: a stall decided early, and every process's stack taken before teardown."""

from __future__ import annotations

import fnmatch
import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest
import yaml

from conftest import Runs, diagbench_argv, fake_command, write_spec
from diagbench.errors import SpecError
from diagbench.launch import hang as hang_module
from diagbench.launch import stacks
from diagbench.launch.hangsite import thread_site
from diagbench.launch.stall import StallWatch
from diagbench.schemas import load_schema
from diagbench.spec.load import load_spec
from diagbench.vocab import Outcome

STALL_S = 1.5
NEVER = {"log": "never ready"}


def _server(*actions: str, **extra: object) -> dict[str, object]:
    return {"command": fake_command(*actions), "ready": NEVER, "timeout": "60s", "stall": f"{STALL_S}s", **extra}


def _stack_files(runs: Runs, attempt: str) -> dict[int, str]:
    folder = runs.last.run_dir.cells / attempt / "stacks"
    return {int(p.stem): p.read_text() for p in folder.glob("*.txt")}


def test_a_deadlocked_server_is_stalled_within_the_window_and_its_stack_names_the_lock(runs: Runs) -> None:
    record = runs.one(_server("out=Loading weights", "deadlock"))
    assert record.outcome is Outcome.TIMEOUT
    assert record.stalled is True
    assert record.stalled_after_s is not None and STALL_S <= record.stalled_after_s <= STALL_S + 1
    assert record.time_to_outcome_s is not None and record.time_to_outcome_s < STALL_S + 3  # not the 60 s timeout
    assert record.reason.startswith(f"stalled {STALL_S:.0f}s") or record.reason.startswith("stalled 2s")
    assert record.hang is not None
    assert record.hang.site == "threading.Lock.acquire in fakeserver.py:load_weights"
    files = _stack_files(runs, record.attempt)
    assert record.hang.pid in files
    assert "load_weights (fakeserver.py" in files[record.hang.pid]
    result = json.loads((runs.last.run_dir.cells / record.attempt / "result.json").read_text())
    assert result["stalled"] is True and result["hang"]["files"] == [f"stacks/{record.hang.pid}.txt"]


def test_a_read_on_a_pipe_nobody_writes_is_named_with_its_kernel_wait(runs: Runs) -> None:
    record = runs.one(_server("out=waiting for the tokenizer", "pipe-read"))
    assert record.stalled and record.hang is not None
    assert record.hang.site == "os.read in fakeserver.py:pipe_read"
    text = _stack_files(runs, record.attempt)[record.hang.pid]
    if os.geteuid() == 0:  # /proc/N/task/T/stack is root's to read
        assert "pipe_read" in text


def test_a_child_that_hangs_while_its_parent_sleeps_gives_both_stacks_and_the_child_is_the_site(runs: Runs) -> None:
    record = runs.one(_server("child-deadlock"))
    assert record.stalled and record.hang is not None
    files = _stack_files(runs, record.attempt)
    assert len(files) == 2
    parent = min(files)
    assert record.hang.pid != parent
    assert record.hang.site == "threading.Lock.acquire in fakeserver.py:load_weights"
    assert "sleep_forever (fakeserver.py" in files[parent]


def test_a_busy_silent_compile_is_never_stalled(runs: Runs) -> None:
    record = runs.one(
        _server(
            "out=compiling", f"busy={2 * STALL_S}", "out=startup complete", "hang", ready={"log": "startup complete"}
        ),
    )
    assert record.outcome is Outcome.READY
    assert record.stalled is False and record.hang is None


def test_a_slow_starter_with_a_line_every_half_window_is_never_stalled(runs: Runs) -> None:
    record = runs.one(
        _server(f"tick={STALL_S / 2}:6", "out=startup complete", "hang", ready={"log": "startup complete"})
    )
    assert record.outcome is Outcome.READY
    assert record.stalled is False


def test_a_plain_timeout_takes_stacks_too(runs: Runs) -> None:
    record = runs.one({"command": fake_command("out=Loading", "deadlock"), "ready": NEVER, "timeout": "1s"})
    assert record.outcome is Outcome.TIMEOUT and record.stalled is False and record.stalled_after_s is None
    assert record.hang is not None and "load_weights" in (record.hang.site or "")


def test_stacks_never_takes_none(runs: Runs) -> None:
    record = runs.one(_server("out=Loading", "deadlock", stacks="never"))
    assert record.stalled and record.hang is None
    assert not (runs.last.run_dir.cells / record.attempt / "stacks").exists()


def _refusing_pyspy(folder: Path) -> str:
    """A py-spy that answers as it does where ptrace is refused (a container without SYS_PTRACE)."""
    path = folder / "py-spy"
    path.write_text("#!/bin/sh\necho 'Error: Operation not permitted (os error 1)' >&2\nexit 1\n")
    path.chmod(path.stat().st_mode | stat.S_IEXEC)
    return str(path)


def test_ptrace_refused_is_a_note_and_the_kernel_view_remains(
    runs: Runs, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    refusing = _refusing_pyspy(tmp_path)
    monkeypatch.setattr(stacks, "pyspy_path", lambda: refusing)
    record = runs.one(_server("out=Loading", "deadlock"))
    assert record.stalled and record.hang is not None
    note = record.hang.notes[0]
    assert (
        "py-spy could not read this process (Error: Operation not permitted (os error 1)); ptrace refused? using what is readable"
        in note
    )
    text = _stack_files(runs, record.attempt)[record.hang.pid]
    assert "Traceback" not in text and "note: py-spy could not read" in text
    assert "state S" in text  # the kernel's view of its thread


def test_py_spy_missing_is_said(runs: Runs, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(stacks, "pyspy_path", lambda: None)
    record = runs.one(_server("out=Loading", "deadlock"))
    assert record.hang is not None
    assert any("py-spy is not installed" in n for n in record.hang.notes)


def test_faulthandler_gives_python_frames_where_py_spy_cannot_attach(
    runs: Runs, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    refusing = _refusing_pyspy(tmp_path)
    monkeypatch.setattr(stacks, "pyspy_path", lambda: refusing)
    record = runs.one(_server("out=Loading", "deadlock", stacks="faulthandler"))
    assert record.env_changes["PYTHONFAULTHANDLER"] == "1"
    assert (record.env_changes["DIAGBENCH_FAULTHANDLER_DIR"] or "").endswith("/stacks/faulthandler")
    assert record.hang is not None
    assert record.hang.frames[0].startswith("load_weights (fakeserver.py:")
    text = _stack_files(runs, record.attempt)[record.hang.pid]
    assert "Python stacks (faulthandler)" in text


def test_secrets_in_argv_and_env_are_redacted_in_stacks_and_summary(runs: Runs) -> None:
    token = "hf_abcdefghijklmnopqrstuvwxyz012345"
    key = "sk-live-0123456789abcdefghij"
    record = runs.one(
        _server(f"--api-key={key}", "child-deadlock=HF_TOKEN", env={"HF_TOKEN": token}),
    )
    assert record.hang is not None
    files = _stack_files(runs, record.attempt)
    assert len(files) == 2
    everything = "".join(files.values()) + json.dumps(record.hang.to_json())
    assert token not in everything and key not in everything
    assert "--api-key=<redacted>" in everything and "--token=<redacted>" in everything


def test_run_takes_stall_and_stacks_on_the_command_line_and_plan_shows_the_rule(tmp_path: Path) -> None:
    spec = write_spec(tmp_path, {"command": fake_command("out=Loading", "deadlock"), "ready": NEVER, "timeout": "60s"})
    plan = subprocess.run(diagbench_argv("plan", str(spec)), capture_output=True, text=True, check=True).stdout
    assert "stall: off (server.stall or --stall D ends a silent, idle attempt early)" in plan
    done = subprocess.run(
        diagbench_argv("run", str(spec), "--runs-dir", str(tmp_path / "runs"), "--stall", "1s", "--stacks", "always"),
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr
    result = json.loads(next((tmp_path / "runs").glob("*/cells/*/result.json")).read_text())
    assert result["stalled"] is True and result["hang"]["site"].endswith("fakeserver.py:load_weights")
    jsonschema.validate(result, load_schema("result"))


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--stall", "soon"], "diagbench: --stall soon: expected a duration like 45s, 2m or 1h (fix: --stall 60s)"),
        (["--stacks", "sometimes"], "diagbench: --stacks sometimes: expected one of on-timeout, always, never"),
    ],
)
def test_bad_hang_options_are_one_message(tmp_path: Path, args: list[str], message: str) -> None:
    spec = write_spec(tmp_path, {"command": fake_command("hang"), "ready": NEVER})
    done = subprocess.run(diagbench_argv("run", str(spec), *args), capture_output=True, text=True)
    assert done.returncode == 2
    assert done.stderr.strip().startswith(message) and "Traceback" not in done.stderr


def test_a_misspelt_stacks_word_in_the_spec_names_its_place(tmp_path: Path) -> None:
    spec = write_spec(tmp_path, {"command": fake_command("hang"), "ready": NEVER, "stacks": "alwyas"})
    with pytest.raises(SpecError) as caught:
        load_spec(spec)
    words = "on-timeout, always, never, faulthandler, flight-recorder"
    assert f"server.stacks: expected one of {words}, got 'alwyas'" in str(caught.value)
    assert "did you mean 'always'?" in str(caught.value)


def test_flight_recorder_and_spin_are_read_from_the_spec(tmp_path: Path) -> None:
    server = {"command": fake_command("hang"), "ready": NEVER, "stacks": "flight-recorder", "spin": "45s"}
    spec = load_spec(write_spec(tmp_path, server))
    assert spec.server.flight_recorder and not spec.server.faulthandler and spec.server.spin == 45.0
    assert spec.server.stacks == "on-timeout" and spec.server.stacks_word == "flight-recorder"
    shown = subprocess.run(
        diagbench_argv("plan", str(write_spec(tmp_path, server))), capture_output=True, text=True, env=_wide()
    )
    assert "spin: stacks sampled every second; every rank at the same waiting frame" in shown.stdout
    assert "PyTorch's flight recorder armed" in shown.stdout
    spec_path = write_spec(tmp_path, {**server, "spin": "soon"})
    with pytest.raises(SpecError, match=r"server\.spin"):
        load_spec(spec_path)


def test_a_hypothesis_can_name_the_hang_site(runs: Runs) -> None:
    hypotheses = [
        {
            "id": "lock",
            "when": {},
            "supported_if": "ready",
            "refuted_if": "timeout@threading.Lock.acquire in *:load_weights",
        },
        {"id": "nccl", "when": {}, "supported_if": "ready", "refuted_if": "timeout@nccl*"},
    ]
    spec = write_spec(runs.folder, _server("out=Loading", "deadlock"), hypotheses=hypotheses)
    result = runs.run(spec)
    verdicts = {v.id: v.verdict.value for v in result.verdicts}
    assert verdicts == {"lock": "refuted", "nccl": "inconclusive"}
    manifest = json.loads((result.run_dir.path / "manifest.json").read_text())
    assert manifest["hypotheses"][0]["refuted_if"] == ["timeout@threading.Lock.acquire in *:load_weights"]
    jsonschema.validate(yaml.safe_load(spec.read_text()), load_schema("spec"))


def test_an_empty_hang_site_is_one_message(tmp_path: Path) -> None:
    hypotheses = [{"id": "h", "when": {}, "supported_if": "ready", "refuted_if": "timeout@"}]
    spec = write_spec(tmp_path, {"command": fake_command("hang"), "ready": NEVER}, hypotheses=hypotheses)
    with pytest.raises(SpecError) as caught:
        load_spec(spec)
    assert "'timeout@' names no hang site" in str(caught.value)


def test_reports_and_diff_show_the_stall_and_the_site(tmp_path: Path) -> None:
    lock = Runs(tmp_path / "a")
    lock.folder.mkdir()
    first = lock.run(write_spec(lock.folder, _server("out=Loading", "deadlock")), run_id="lock").run_dir.path
    pipe = Runs(tmp_path / "b")
    pipe.folder.mkdir()
    second = pipe.run(write_spec(pipe.folder, _server("out=Loading", "pipe-read")), run_id="pipe").run_dir.path
    words = "timeout (stalled 2s) at threading.Lock.acquire in fakeserver.py:load_weights"
    md = subprocess.run(diagbench_argv("report", str(first), "--format", "md"), capture_output=True, text=True).stdout
    assert words in md and "### Hung attempts" in md
    assert "=>     lock_PyThread_acquire_lock (libpython" in md  # the frame that names the wait
    assert "1 stalled attempt ended 5" in md and "s in all before the 60s timeout" in md
    table = subprocess.run(diagbench_argv("report", str(first)), capture_output=True, text=True, env=_wide()).stdout
    assert "timeout (stalled 2s) at threading.Lock.acquire" in table
    html = subprocess.run(
        diagbench_argv("report", str(first), "--format", "html"), capture_output=True, text=True
    ).stdout
    assert '<section id="hangs">' in html and "<details open>" in html
    assert '<span class="hit">    lock_PyThread_acquire_lock (libpython' in html
    diff = subprocess.run(diagbench_argv("diff", str(first), str(second)), capture_output=True, text=True).stdout
    assert (
        "cell only=x: hung at threading.Lock.acquire in fakeserver.py:load_weights "
        "-> hung at os.read in fakeserver.py:pipe_read" in diff
    )


def _wide() -> dict[str, str]:
    return {**os.environ, "COLUMNS": "250"}


@pytest.mark.parametrize(
    ("mode", "site"),
    [("queue", "queue.Queue.get in *hang.py:wait_for_metadata"), ("join", "os.read")],
)
def test_the_refservers_capture_hangs_are_stalled_and_named_on_the_cpu(runs: Runs, mode: str, site: str) -> None:
    """The very waits `--hang-in-capture` blocks on inside a capture (no torch needed)."""
    command = [sys.executable, "-m", "diagbench.refserver.hang", mode]
    record = runs.one({"command": command, "ready": NEVER, "timeout": "60s", "stall": f"{STALL_S}s"})
    assert record.stalled and record.hang is not None
    assert fnmatch.fnmatchcase(record.hang.site or "", site), record.hang.site
    files = _stack_files(runs, record.attempt)
    if mode == "join":  # the helper is the site; the capture's wait on it is in the parent's stacks
        assert len(files) == 2
        parent = min(files)
        assert record.hang.pid != parent
        assert "wait (subprocess.py" in files[parent] and "wait_for_helper (" in files[parent]
    else:
        assert "_metadata_worker (" in files[record.hang.pid]  # the worker thread's stack too


@pytest.mark.parametrize(
    ("frames", "site"),
    [
        (  # a rank stuck in NCCL's init: the NCCL symbol, then the first frame of the program's own code
            [
                "0x7f12 (libc.so.6)",
                "ncclCommInitRank (libnccl.so.2)",
                "c10d::ProcessGroupNCCL::getNCCLComm (libtorch_cuda.so)",
                "_new_process_group_helper (torch/distributed/distributed_c10d.py:1840)",
                "init_process_group (torch/distributed/distributed_c10d.py:1500)",
            ],
            "ncclCommInitRank in torch/distributed/distributed_c10d.py:_new_process_group_helper",
        ),
        (
            [
                "cudaStreamSynchronize (libcudart.so.12)",
                "THPStream_synchronize (libtorch_python.so)",
                "CUDAGraph.capture_end (torch/cuda/graphs.py:90)",
            ],
            "cudaStreamSynchronize in torch/cuda/graphs.py:CUDAGraph.capture_end",
        ),
        (["wchan: pipe_read", "pipe_read+0x3c/0x400", "vfs_read+0x2a/0x300"], "read on a pipe (kernel: pipe_read)"),
        (["time_sleep (libpython3.11.so.1.0)", "main (server.py:12)"], "time.sleep in server.py:main"),
    ],
)
def test_the_site_is_the_innermost_frame_that_names_the_wait(frames: list[str], site: str) -> None:
    assert thread_site(frames)[1] == site


def test_stacks_always_also_takes_a_failure_no_line_decided(runs: Runs) -> None:
    """The server exits 1 with nothing to say; its worker is still there to be read."""
    record = runs.one({"command": fake_command("child", "exit=1"), "ready": NEVER, "stacks": "always"})
    assert record.outcome is Outcome.CRASHED and record.signature is None
    assert record.hang is not None and (record.hang.site or "").startswith("time.sleep in fakeserver.py:sleep_forever")


def test_isolate_takes_stall_and_says_a_bad_one(tmp_path: Path) -> None:
    done = subprocess.run(
        diagbench_argv("isolate", "--good", "true", "--bad", "false", "--stall", "later", "--dry-run"),
        capture_output=True,
        text=True,
        cwd=tmp_path,
    )
    assert done.returncode == 2
    assert done.stderr.strip() == "diagbench: --stall later: expected a duration like 45s, 2m or 1h (fix: --stall 60s)"


@pytest.mark.parametrize(
    ("readings", "stalled"), [([(0, 100)] * 20, True), ([(i % 2 * 90, 100) for i in range(20)], False)]
)
def test_gpu_activity_counts_as_work_only_when_it_moves(readings: list[tuple[int, int]], stalled: bool) -> None:
    """An idle host process whose GPU is flat (a kernel that never ends) stalls; one whose GPU
    utilisation keeps moving does not. The GPU readings are given; the process is real."""
    sleeper = subprocess.Popen(
        [sys.executable, "-c", "import time; print(flush=True); time.sleep(30)"], stdout=subprocess.PIPE
    )
    try:
        assert sleeper.stdout is not None
        sleeper.stdout.readline()  # started: its start-up's CPU time is behind it
        feed = iter(readings)
        watch = StallWatch(sleeper.pid, 1.0, [0], 0.0, read_gpus=lambda _: [next(feed)])
        quiet = [watch.quiet_for(t / 5, 0) for t in range(1, 8)]
    finally:
        sleeper.kill()
        sleeper.wait()
        if sleeper.stdout is not None:
            sleeper.stdout.close()
    assert (quiet[-1] is not None) is stalled
    assert all(q is None for q in quiet[:4])  # never before the window is over


def test_stacks_that_cannot_be_written_leave_the_outcome_and_a_note(
    runs: Runs, monkeypatch: pytest.MonkeyPatch
) -> None:
    def full_disk(*_: object) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(hang_module, "take_stacks", full_disk)
    record = runs.one(_server("out=Loading", "deadlock"))
    assert record.outcome is Outcome.TIMEOUT and record.stalled
    assert record.hang is not None
    assert record.hang.notes == ("stacks could not be written: [Errno 28] No space left on device",)


def test_a_stall_says_which_rule_ended_it_and_how_to_lengthen_or_drop_it(runs: Runs) -> None:
    """A healthy server silent for a download is a stall by this rule: the reason says so where it happens."""
    record = runs.one(_server("out=Downloading model.safetensors", "sleep=30"))
    assert record.stalled is True
    assert (
        f"; ended by the stall rule (server.stall or --stall {STALL_S:g}s), which a silent download trips too: "
        "give it more, or leave it out to wait the whole timeout;" in record.reason
    )


def test_a_process_that_names_itself_with_escapes_is_shown_escaped_in_its_stacks(tmp_path: Path) -> None:
    import psutil

    from diagbench.records.redact import Redactor

    renamed = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import ctypes, sys, time; ctypes.CDLL(None).prctl(15, b'\\x1b]0;owned\\x07\\x1b[2J', 0, 0, 0); "
            "print('named', flush=True); time.sleep(60)",
            "--token=\x1b[31mred",
        ],
        stdout=subprocess.PIPE,
    )
    try:
        assert renamed.stdout is not None and renamed.stdout.readline() == b"named\n"
        stacks.take_stacks([psutil.Process(renamed.pid)], tmp_path, Redactor.of())
    finally:
        renamed.kill()
        renamed.wait()
    text = (tmp_path / f"{renamed.pid}.txt").read_text()
    assert "\x1b" not in text and "\x07" not in text
    assert f"pid {renamed.pid} (\\x1b]0;owned\\x07\\x1b[2J), parent" in text.splitlines()[0]
