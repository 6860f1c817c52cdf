"""A worker of the server ended by a signal, while the server lives on: seen by its pidfd,
named by its wait status. Real processes: the fake server forks the worker and kills it."""

from __future__ import annotations

import signal

from conftest import fake_command, unique_id
from diagbench.render.report import deciding_line
from diagbench.vocab import Outcome


def test_a_worker_killed_by_sigkill_is_failed_killed_with_the_death_as_evidence(runs):
    record = runs.one(
        {"command": fake_command("worker", "sleep=1", "kill-workers=9", "hang"), "ready": {"log": "never"}},
        run_id=unique_id(),
    )
    assert (record.outcome, record.failure_class, record.signature) == (Outcome.FAILED, "killed", "tree.killed")
    assert record.evidence is not None and record.evidence.line_no == 0  # an event, not a log line
    assert record.evidence.text.endswith("was killed by SIGKILL")
    assert record.reason == "a process of its tree died (tree.killed)"
    assert deciding_line(record) == record.evidence.text  # no "L0:" before an event


def test_a_worker_segfault_is_segfault(runs):
    record = runs.one(
        {
            "command": fake_command("worker", "sleep=1", f"kill-workers={int(signal.SIGSEGV)}", "hang"),
            "ready": {"log": "never"},
        },
        run_id=unique_id(),
    )
    assert (record.outcome, record.failure_class) == (Outcome.FAILED, "segfault")


def test_an_orderly_stop_of_a_worker_is_no_failure(runs):
    record = runs.one(
        {
            "command": fake_command("worker", "sleep=1", "kill-workers=15", "sleep=1", "out=up", "hang"),
            "ready": {"log": "up"},
        },
        run_id=unique_id(),
    )
    assert record.outcome is Outcome.READY, (record.reason, record.evidence)


def test_a_death_after_a_failure_line_is_its_fallout_and_does_not_take_over(runs):
    # the server's own cleanup SIGKILLs its workers after the error it printed (vLLM does)
    record = runs.one(
        {
            "command": fake_command("worker", "sleep=1", "out=Fatal Python error: Aborted", "kill-workers=9", "hang"),
            "ready": {"log": "never"},
            "settle": "2s",
        },
        run_id=unique_id(),
    )
    assert (record.outcome, record.failure_class, record.signature) == (Outcome.FAILED, "other", "generic.aborted")


def test_a_worker_killed_after_ready_changes_nothing_and_its_zombie_is_not_left_behind(runs):
    # the server sits out SIGTERM (vLLM's API server does while its engine fails), so teardown
    # goes on to SIGKILL; its worker is a zombie it was never going to reap
    record = runs.one(
        {
            # it ignores SIGTERM before its ready line: a teardown that starts at once finds it so
            "command": fake_command("worker", "ignore-term", "out=up", "kill-workers=9", "hang"),
            "ready": {"log": "up"},
            "grace": "1s",
        },
        run_id=unique_id(),
    )
    assert record.outcome is Outcome.READY
    # a zombie runs nothing and holds nothing: it is neither signalled nor reported left
    assert record.left_behind == []
    signals = [k.signal for k in record.killed]
    # the server goes on to SIGKILL; the worker is usually a zombie by then and not signalled,
    # but on a loaded machine teardown may start before the kill-workers step: then it was
    # alive, and is stopped like any member (never reported left behind either way)
    assert signals in (["SIGKILL"], ["SIGTERM", "SIGKILL"]), record.killed


def test_a_worker_is_named_as_it_was_when_it_died(runs):
    """vLLM's workers start as `python3` and set their title (`VLLM::Worker`) later."""
    record = runs.one(
        {
            "command": fake_command("worker=VLLM::Worker", "sleep=2", "kill-workers=9", "hang"),
            "ready": {"log": "never"},
        },
        run_id=unique_id(),
    )
    assert record.signature == "tree.killed"
    assert record.evidence is not None and record.evidence.text.startswith("VLLM::Worker (pid ")
