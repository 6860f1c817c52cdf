"""DIAGBENCH_SCOPE: a diagbench cleans up only after dead diagbenches of its own scope (test
sessions and pytest-xdist workers each have one; unset is the users' scope). Real processes,
real folders."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from conftest import unique_id, wait_until
from diagbench.launch.process import sweep_tagged
from diagbench.launch.reaper import find_strays, leaked_folders
from diagbench.launch.tags import SCOPE_VAR, Owner, Tag, caches_owner, caches_prefix, current_scope, me, scope_mark


@pytest.fixture
def ended() -> Owner:
    """A diagbench that has ended."""
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return Owner(proc.pid, "1", me().namespace)


@pytest.fixture
def sleepers(tmp_path: Path, ended: Owner) -> Iterator[dict[str, subprocess.Popen[bytes]]]:
    """Two leftovers of that diagbench: one of scope `a`, one of scope `b`."""
    procs = {
        scope: subprocess.Popen(
            [sys.executable, "-c", "import time; time.sleep(120)"],
            env={**os.environ, **Tag("n0nce", scope, ended, tmp_path, scope).env()},
        )
        for scope in ("a", "b")
    }
    try:
        wait_until(lambda: len(sweep_tagged(tmp_path)) == 2, what="the two tagged sleepers")
        yield procs
    finally:
        for proc in procs.values():
            proc.kill()
            proc.wait()


def strays_of(run_dir: Path) -> list[str]:
    return sorted(s.tag.attempt for s in find_strays() if s.tag.run_dir == run_dir)


def test_a_scoped_sweep_finds_only_its_own_scope(tmp_path, sleepers, monkeypatch):
    monkeypatch.setenv(SCOPE_VAR, "a")
    assert strays_of(tmp_path) == ["a"]
    monkeypatch.setenv(SCOPE_VAR, "b")
    assert strays_of(tmp_path) == ["b"]


def test_without_a_scope_the_sweep_finds_only_the_unscoped(tmp_path, sleepers, monkeypatch):
    monkeypatch.delenv(SCOPE_VAR)  # a user's diagbench: the leftovers of a test session are not its own
    assert strays_of(tmp_path) == []


def test_caches_folders_carry_their_scope(tmp_path, ended, monkeypatch):
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    folders = {scope: tmp_path / (caches_prefix(ended, scope) + "x1") for scope in ("a", "b", "")}
    for folder in folders.values():
        folder.mkdir()
    marks = {(ended, scope_mark("a")), (ended, scope_mark("b")), (ended, "")}
    assert {caches_owner(f.name) for f in folders.values()} == marks
    assert [f for f in leaked_folders() if f.parent == tmp_path] == []  # the session's own scope: none
    monkeypatch.setenv(SCOPE_VAR, "a")
    assert [f for f in leaked_folders() if f.parent == tmp_path] == [folders["a"]]
    monkeypatch.delenv(SCOPE_VAR)
    assert [f for f in leaked_folders() if f.parent == tmp_path] == [folders[""]]


def test_this_session_has_a_scope_and_a_word_is_made_of_any_value(monkeypatch):
    assert current_scope().startswith("pytest-")  # conftest's: workers never sweep each other
    monkeypatch.setenv(SCOPE_VAR, "a b/c+d")
    assert current_scope() == "a_b_c_d"


def test_a_run_sweeps_only_its_scope(tmp_path, ended):
    """End to end: `diagbench cleanup` of scope `a` leaves scope `b`'s folder alone."""
    theirs = Path("/tmp") / (caches_prefix(ended, "b" + unique_id()) + "x1")
    mine_scope = "a" + unique_id()
    mine = Path("/tmp") / (caches_prefix(ended, mine_scope) + "x1")
    try:
        theirs.mkdir()
        mine.mkdir()
        env = {**os.environ, SCOPE_VAR: mine_scope}
        proc = subprocess.run(
            [sys.executable, "-m", "diagbench", "cleanup", "--runs-dir", str(tmp_path)],
            capture_output=True,
            text=True,
            env=env,
            timeout=120,
        )
        assert proc.returncode == 0, proc.stderr
        assert f"removed {mine}" in proc.stdout + proc.stderr
        assert not mine.exists() and theirs.is_dir()
    finally:
        shutil.rmtree(theirs, ignore_errors=True)
        shutil.rmtree(mine, ignore_errors=True)


def test_a_scoped_caches_folder_leaves_room_for_a_servers_socket(ended):
    """vLLM binds `ipc://$TMPDIR/<uuid4>`: under a scoped caches folder that path must stay
    within the 107 bytes a Unix socket path may have (a whole scope word pushed it to 121)."""
    import uuid

    folder = Path("/tmp") / (caches_prefix(me(), "pytest-master-1a2b3c4d") + "abcdefgh") / "tmpdir"
    assert len(f"{folder}/{uuid.uuid4()}") <= 107
