"""A process of the tree says what rank it is in its own environment (issue 31's sweep): a RANK
that is no plain number never ends the attempt as diagbench's own failure."""

from __future__ import annotations

import sys

import pytest

from conftest import Runs
from diagbench.launch.ranks import rank_from_env
from diagbench.vocab import Outcome


@pytest.mark.parametrize("value", ["²", "9" * 5000], ids=["superscript", "5000-digits"])
def test_a_rank_that_is_no_plain_number_leaves_the_hang_recorded(runs: Runs, value: str) -> None:
    server = {
        "command": [sys.executable, "-c", "import time; print('up', flush=True); time.sleep(300)"],
        "env": {"RANK": value},
        "ready": {"log": "never"},
        "timeout": "2s",
        "grace": "1s",
    }
    record = runs.one(server)
    assert record.outcome is Outcome.TIMEOUT, record.reason
    assert record.hang is not None and record.hang.ranks == ()
    assert rank_from_env({"RANK": value, "LOCAL_RANK": "1"}) is not None  # the next variable says it
