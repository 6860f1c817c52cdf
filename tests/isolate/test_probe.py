"""`diagbench probe`: one launch as an exit code, and `git bisect run` over a real repository."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import FAKE, write_spec
from diagbench.isolate.probe import ProbeTarget, parse_target

READY = "The server is fired up and ready to roll!"
OOM = "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB"


def probe(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    argv = [sys.executable, "-m", "diagbench", "probe", *args]
    return subprocess.run(argv, capture_output=True, text=True, timeout=120, cwd=cwd)


def fake(*actions: str) -> str:
    return " ".join([sys.executable, str(FAKE), *(f"'{a}'" for a in actions)])


def test_the_exit_code_says_ready_target_or_skip(tmp_path: Path) -> None:
    runs = ["--runs-dir", str(tmp_path / "runs"), "--timeout", "20s"]
    ready = probe(fake(f"out={READY}", "hang"), *runs)
    assert ready.returncode == 0, ready.stderr
    assert ready.stdout.startswith("probe: ready: it came up (exit 0)")
    oom = probe(fake(f"err={OOM}", "exit=1"), *runs, "--target", "failed:oom")
    assert (oom.returncode, oom.stdout.splitlines()[0]) == (
        1,
        "probe: failed:oom: the target failure (failed:oom) (exit 1)",
    )
    other = probe(fake("exit=3"), *runs, "--target", "failed:oom")
    assert other.returncode == 125
    assert "probe: crashed: not the target failure (failed:oom): git bisect skips it (exit 125)" in other.stdout
    assert probe(fake("exit=3"), *runs).returncode == 1  # by default any failure is the target


def test_a_spec_cell_is_probed_and_a_mistake_is_a_skip_not_a_bad_revision(tmp_path: Path) -> None:
    matrix = {"mode": {"args": ["{value}"], "values": {"up": f"out={READY}", "oom": f"err={OOM}"}}}
    spec = write_spec(tmp_path, {"command": [sys.executable, str(FAKE)]}, matrix)
    runs = ["--runs-dir", str(tmp_path / "runs")]
    assert probe(str(spec), "--only", "mode=oom", *runs).returncode == 1
    up = probe(str(spec), "--only", "mode=up", *runs)
    assert up.returncode == 0 and "probe: ready" in up.stdout
    both = probe(str(spec), *runs)
    assert both.returncode == 125
    assert (
        both.stderr.strip()
        == "diagbench: --only selects 2 cells (mode=up, mode=oom): a probe launches one; name every axis"
    )
    bogus = probe(str(spec), "--only", "mode=up", "--target", "ready")
    assert bogus.returncode == 125 and "--target ready: expected one of failed, crashed" in bogus.stderr


def test_targets_read_as_written() -> None:
    assert parse_target(None) == ProbeTarget()
    assert parse_target("failed:oom") == ProbeTarget("failed", "oom")
    assert parse_target("not_ready") == ProbeTarget("not_ready")
    for wrong in ("crashed:oom", "failed:nope", "cancelled"):
        with pytest.raises(Exception, match=f"--target {wrong}"):
            parse_target(wrong)


SERVER = """import sys, time
BATCH = {batch}
print("loading weights", flush=True)
if BATCH > 32:
    print("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB", file=sys.stderr, flush=True)
    sys.exit(1)
{extra}print("The server is fired up and ready to roll!", flush=True)
time.sleep(600)
"""


def git(repo: Path, *args: str) -> str:
    env = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@t"}
    done = subprocess.run(
        ["git", *args], cwd=repo, capture_output=True, text=True, timeout=600, env={**os.environ, **env}
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_git_bisect_run_names_the_commit_that_broke_the_launch(tmp_path: Path) -> None:
    """A tiny server whose history goes good -> bad (one revision in between cannot start at all)."""
    repo = tmp_path / "server"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    history = [(16, ""), (24, ""), (24, "raise SystemExit('half-done refactor')\n"), (32, ""), (64, ""), (128, "")]
    shas = []
    for n, (batch, extra) in enumerate(history):
        (repo / "server.py").write_text(SERVER.format(batch=batch, extra=extra))
        git(repo, "add", "server.py")
        git(repo, "commit", "-q", "-m", f"step {n}: batch {batch}")
        shas.append(git(repo, "rev-parse", "HEAD").strip())
    git(repo, "bisect", "start", shas[-1], shas[0])
    runs = tmp_path / "runs"  # outside the repository: the probes leave its work tree clean
    command = f"{sys.executable} server.py"
    probe_argv = [
        sys.executable,
        "-m",
        "diagbench",
        "probe",
        command,
        "--target",
        "failed:oom",
        "--runs-dir",
        str(runs),
    ]
    bisect = git(repo, "bisect", "run", *probe_argv, "--timeout", "20s")
    assert f"{shas[4]} is the first bad commit" in bisect
    assert "step 4: batch 64" in bisect
    assert git(repo, "status", "--porcelain") == ""
    launched = sorted(runs.iterdir())
    assert 2 <= len(launched) <= 4  # bisected, not walked
