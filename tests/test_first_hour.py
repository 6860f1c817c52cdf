"""Small things a new user meets in the first hour (issue: the first hour of a new user)."""

from __future__ import annotations

from conftest import fake_command

OOM = "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB"


def test_a_server_that_exits_by_itself_after_its_failure_line_keeps_its_exit_code(runs) -> None:
    # a long settle window: the decision waits for the exit (how fast a loaded machine reaps it
    # is not the point here; a server gone before the teardown is)
    r = runs.one({"command": fake_command(f"err={OOM}", "exit=3"), "settle": "5s"})
    assert (r.outcome, r.failure_class) == ("failed", "oom")
    assert (r.exit_code, r.signal) == (3, None)  # was null: decided on the line, gone before the SIGTERM


def test_a_server_the_teardown_stopped_has_no_exit_code_of_its_own(runs) -> None:
    r = runs.one({"command": fake_command(f"err={OOM}", "hang")})
    assert r.outcome == "failed" and r.exit_code is None and r.signal is None
    assert [k.signal for k in r.killed if k.pid] and r.killed[0].signal == "SIGTERM"
