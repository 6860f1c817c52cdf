"""The folders every diagbench of a host shares under /tmp (port and GPU leases): a name there
is anyone's to choose, so a planted link, a regular file, a mode-000 folder or another user's
folder is never followed, never chmod'ed, and said: for GPU leases `run` exits 2 unless
`--no-gpu-leases` accepts running without them.

Real diagbench processes; the /tmp cases run in a private mount namespace with a fresh tmpfs
on /tmp (`unshare -m`), the other user is a real one (`useradd`, `runuser`): root only."""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from conftest import diagbench_argv, fake_command, write_spec
from diagbench.launch.gpulease import LOCKS_VAR

READY = "The server is fired up and ready to roll!"
OTHER = "dbtrustother"
ROOT_ONLY = pytest.mark.skipif(
    os.geteuid() != 0 or shutil.which("unshare") is None or shutil.which("runuser") is None,
    reason="needs root, unshare and runuser (a private /tmp and a second user)",
)


@pytest.fixture(scope="module")
def other_user() -> str:
    if subprocess.run(["id", OTHER], capture_output=True).returncode != 0:
        subprocess.run(["useradd", "--no-create-home", "--shell", "/bin/sh", OTHER], check=True, capture_output=True)
    return OTHER


def run_gpus(tmp_path: Path, locks: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    spec = write_spec(tmp_path, {"command": fake_command(f"out={READY}", "hang")})
    argv = diagbench_argv("run", str(spec), "--runs-dir", str(tmp_path / "runs"), "--gpus", "0", *extra)
    env = {**os.environ, LOCKS_VAR: str(locks)}
    return subprocess.run(argv, capture_output=True, text=True, env=env, timeout=120)


def planted_link(tmp_path: Path) -> tuple[Path, Path]:
    target = tmp_path / "private"
    target.mkdir(mode=0o700)
    target.chmod(0o700)
    link = tmp_path / "locks"
    link.symlink_to(target)
    return link, target


def test_a_planted_link_as_the_gpu_lock_folder_stops_the_run_and_is_never_chmodded(tmp_path):
    link, target = planted_link(tmp_path)
    done = run_gpus(tmp_path, link)
    assert done.returncode == 2, done.stderr
    assert "symbolic link" in done.stderr and "--no-gpu-leases" in done.stderr
    assert "Traceback" not in done.stderr
    assert stat.S_IMODE(target.stat().st_mode) == 0o700
    assert not any(target.iterdir())  # no lock file made through the link


def test_no_gpu_leases_runs_with_a_warning(tmp_path):
    link, target = planted_link(tmp_path)
    done = run_gpus(tmp_path, link, "--no-gpu-leases")
    assert done.returncode == 0, done.stderr
    assert "warning: GPU leases" in done.stderr and "symbolic link" in done.stderr
    assert stat.S_IMODE(target.stat().st_mode) == 0o700
    assert not any(target.iterdir())


def test_a_regular_file_as_the_lock_folder_is_said(tmp_path):
    plain = tmp_path / "locks"
    plain.write_text("not a folder\n")
    done = run_gpus(tmp_path, plain)
    assert done.returncode == 2
    assert "is not a folder" in done.stderr


def test_a_mode_000_lock_folder_is_said_not_chmodded(tmp_path):
    shut = tmp_path / "locks"
    shut.mkdir()
    shut.chmod(0)
    done = run_gpus(tmp_path, shut)
    assert done.returncode == 2
    assert "mode 0000" in done.stderr
    assert stat.S_IMODE(shut.stat().st_mode) == 0


def test_a_planted_lock_file_link_is_said(tmp_path):
    locks = tmp_path / "locks"
    locks.mkdir()
    (tmp_path / "elsewhere").write_text("")
    (locks / "0.lock").symlink_to(tmp_path / "elsewhere")
    done = run_gpus(tmp_path, locks)
    assert done.returncode == 2
    assert "0.lock" in done.stderr


@ROOT_ONLY
def test_another_users_0755_lock_folder_is_said(tmp_path, other_user):
    theirs = tmp_path / "locks"
    theirs.mkdir(mode=0o755)
    theirs.chmod(0o755)
    shutil.chown(theirs, other_user)
    done = run_gpus(tmp_path, theirs)
    assert done.returncode == 2
    assert "belongs to another user" in done.stderr and other_user in done.stderr


def in_private_tmp(script: str, other_user: str) -> subprocess.CompletedProcess[str]:
    """`script` (Python, run as root) in a mount namespace whose /tmp is a fresh tmpfs, after
    `other_user` planted `/tmp/diagbench-ports -> /tmp/secret` and `/tmp/diagbench-gpus ->
    /tmp/secret` (a 0700 folder of theirs)."""
    plant = (
        "mkdir -m 700 /tmp/secret && ln -s /tmp/secret /tmp/diagbench-ports && ln -s /tmp/secret /tmp/diagbench-gpus"
    )
    shell = (
        "mount -t tmpfs tmpfs /tmp && chmod 1777 /tmp && "
        f"runuser -u {other_user} -- sh -c '{plant}' && "
        f'{sys.executable} -c "$0"; echo "mode $(stat -c %a /tmp/secret)"'
    )
    env = {k: v for k, v in os.environ.items() if k != LOCKS_VAR}
    return subprocess.run(
        ["unshare", "-m", "sh", "-c", shell, textwrap.dedent(script)], capture_output=True, text=True, env=env
    )


@ROOT_ONLY
def test_a_link_planted_by_another_user_in_tmp_is_never_chmodded(other_user):
    done = in_private_tmp(
        """
        from diagbench.launch.ports import lease_port, remove_stale_leases
        from diagbench.launch.gpulease import check_leases
        with lease_port(None, "probe") as lease:
            print("port", lease.port, lease.holder)
        remove_stale_leases()
        print("gpu", check_leases(["0"], {}))
        """,
        other_user,
    )
    assert done.returncode == 0, done.stderr
    assert "mode 700" in done.stdout  # the link's target was left alone
    assert "port leases off" in done.stderr and "symbolic link" in done.stderr
    assert done.stderr.count("port leases off") == 1  # said once
    assert "gpu GPU leases: /tmp/diagbench-gpus is a symbolic link" in done.stdout
    assert "port " in done.stdout and "None" in done.stdout  # a port is still handed out


@ROOT_ONLY
def test_leases_made_fresh_in_tmp_are_shared_with_other_users(other_user):
    done = in_private_tmp(
        """
        import os, stat
        os.unlink("/tmp/diagbench-ports")
        from diagbench.launch.ports import lease_port
        with lease_port(None, "probe") as lease:
            print("folder", oct(stat.S_IMODE(os.lstat("/tmp/diagbench-ports").st_mode)))
        """,
        other_user,
    )
    assert done.returncode == 0, done.stderr
    assert "folder 0o1777" in done.stdout
    assert "warning" not in done.stderr
