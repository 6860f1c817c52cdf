"""A descendant that double-forks, leaves the group (setsid) AND starts afresh without
diagbench's tag variables: neither the group nor the tag finds it. The server's main process
is a child subreaper (prctl PR_SET_CHILD_SUBREAPER, kept across exec), so the orphan is
reparented to it, not to init: still a descendant, found, killed and recorded. Real
processes: the fake server, its grandchild, diagbench."""

from __future__ import annotations

import os
import time

import psutil
import pytest

from conftest import fake_command

READY = "The server is fired up and ready to roll!"


def gone(pid: int) -> bool:
    return not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE


@pytest.mark.skipif(not os.path.exists("/proc/self/environ"), reason="Linux: tags are read from /proc")
def test_a_descendant_that_drops_its_group_and_its_tags_is_still_torn_down(runs, tmp_path):
    pidfile = tmp_path / "vanished.pid"
    r = runs.one({"command": fake_command(f"vanish={pidfile}", f"out={READY}", "hang"), "grace": "0.5s"})
    assert r.outcome == "ready"
    pid = int(pidfile.read_text())
    try:
        raw = psutil.Process(pid).environ() if not gone(pid) else {}
        assert not any(k.startswith("DIAGBENCH_") for k in raw)  # the test's premise: no tag to find it by
        deadline = time.monotonic() + 3
        while not gone(pid) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert gone(pid), "the vanished grandchild survived teardown"
        assert pid in {k.pid for k in r.killed}  # recorded as killed, not silently missing
        assert r.left_behind == []
    finally:
        if not gone(pid):
            os.kill(pid, 9)
