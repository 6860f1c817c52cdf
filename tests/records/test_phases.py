"""The phase timeline in records: each phase change, with its time since launch."""

from __future__ import annotations

import json

import pytest

from conftest import fake_command
from diagbench.records.record import AttemptRecord, PhaseChange

READY = "The server is fired up and ready to roll!"


def test_each_phase_change_is_recorded_with_its_time_since_launch(runs):
    r = runs.one(
        {
            "command": fake_command(
                "out=Load weight begin. avail mem=10 GB",
                "sleep=0.3",
                "out=Capture cuda graph begin. avail mem=9 GB",
                "sleep=0.1",
                "out=Capturing batches (bs=16 avail_mem=9 GB):  50%|",
                "sleep=0.2",
                "out=Capture cuda graph end. Time elapsed: 1 s",
                f"out={READY}",
                "hang",
            )
        }
    )
    assert r.outcome == "ready", r.reason
    assert [p.name for p in r.phases] == ["load", "capture", "capture bs=16", "warm-up"]
    times = [p.at_s for p in r.phases]
    assert times == sorted(times)
    assert times[1] - times[0] >= 0.29  # the server slept 0.3 s between its load and capture lines (times are
    assert times[3] - times[2] >= 0.19  # rounded to the millisecond)
    assert times[-1] <= r.time_to_outcome_s
    # the live view got the same changes, in the same order
    assert [p for kind, _, p in runs.events if kind == "phase"] == [p.name for p in r.phases]
    on_disk = json.loads((runs.last.run_dir.cells / r.attempt / "result.json").read_text())
    assert [list(p) for p in on_disk["phases"]] == [["name", "at_s"]] * 4


@pytest.mark.parametrize("ready", ["in the same write", "later"])
def test_every_phase_written_in_one_write_is_recorded_in_order(runs, ready):
    bar = "\\r".join(f"Capturing batches (bs={bs} avail_mem=9 GB): {pct}%|" for bs in (32, 16, 8, 1) for pct in (0, 50))
    lines = [
        "Load weight begin. avail mem=10 GB",
        "Capture cuda graph begin. avail mem=9 GB",
        bar,
        "Capture cuda graph end. Time elapsed: 1 s",
        *([READY] if ready == "in the same write" else []),
    ]
    after = ["sleep=0.2", f"out={READY}"] if ready == "later" else []
    r = runs.one({"command": fake_command("out=" + "\\n".join(lines), *after, "hang")})  # one write
    assert r.outcome == "ready", r.reason
    names = ["load", "capture", "capture bs=32", "capture bs=16", "capture bs=8", "capture bs=1", "warm-up"]
    on_disk = json.loads((runs.last.run_dir.cells / r.attempt / "result.json").read_text())
    assert [p["name"] for p in on_disk["phases"]] == names
    times = [p["at_s"] for p in on_disk["phases"]]
    assert times == sorted(times) and times[-1] <= r.time_to_outcome_s
    assert [p for kind, _, p in runs.events if kind == "phase"] == names  # the live view saw each one too
    kinds = [kind for kind, _, _ in runs.events]  # a deciding read's phases are told after its SIGTERM,
    assert kinds[-1] == "done" and kinds.count("done") == 1  # still before the attempt is done


def test_records_written_before_phases_existed_read_back_with_none():
    old = {
        "cell_id": "a=1",
        "repeat": 1,
        "attempt": "001-a-1-r1",
        "params": {"a": "1"},
        "command": ["srv"],
        "env_changes": {},
        "outcome": "ready",
    }
    assert AttemptRecord.from_json(old).phases == []
    new = {**old, "phases": [{"name": "load", "at_s": 1.5}]}
    assert AttemptRecord.from_json(new).phases == [PhaseChange("load", 1.5)]
