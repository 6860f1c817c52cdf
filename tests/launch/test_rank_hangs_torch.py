"""Hangs across real ranks over gloo on the CPU: mp.spawn and torchrun, one rank never joining
the warm-up all_reduce. The stall is decided, the site is the collective at the program's line
(never spawn's join or the elastic agent's sleep loop), the odd rank named, nothing left running."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from conftest import Runs

pytestmark = pytest.mark.torch

WORKER = Path(__file__).resolve().parent.parent / "rankworker.py"
STALL = "3s"  # torch's import is CPU work: the window starts once every rank waits
ALL_REDUCE_LINE = next(n for n, line in enumerate(WORKER.read_text().splitlines(), 1) if "dist.all_reduce(" in line)
SLEEP_LINE = next(n for n, line in enumerate(WORKER.read_text().splitlines(), 1) if "the rank that never joins" in line)


def _server(command: list[str], env: dict[str, str] | None = None) -> dict[str, object]:
    server: dict[str, object] = {"command": command, "ready": {"log": "never ready"}, "timeout": "90s"}
    server.update(stall=STALL, grace="3s", env=env or {})
    return server


def _torchrun(python: Path, world: int) -> list[str]:
    launcher = [str(python), "-m", "torch.distributed.run", f"--nproc-per-node={world}", "--nnodes=1"]
    return [*launcher, "--master-addr=127.0.0.1", "--master-port={port}", str(WORKER), "torchrun"]


def _check(runs: Runs, record_hang: object, world: int, odd: int, source: str) -> None:
    from diagbench.records.parts import Hang

    assert isinstance(record_hang, Hang)
    at, sleep_at = f"rankworker.py:{ALL_REDUCE_LINE}", f"rankworker.py:{SLEEP_LINE}"
    assert record_hang.site == "all_reduce in rankworker.py:work"
    assert record_hang.odd_ranks == (odd,)
    assert [r.rank for r in record_hang.ranks] == list(range(world))
    assert {r.source for r in record_hang.ranks} == {source}
    sites = {r.rank: r.site for r in record_hang.ranks}
    assert sites[odd] == f"time.sleep ({sleep_at})"
    assert all(sites[r] == f"all_reduce ({at})" for r in range(world) if r != odd)
    others = [r for r in range(world) if r != odd]
    who = f"rank {others[0]} waits" if len(others) == 1 else "ranks " + ", ".join(map(str, others[:-1]))
    assert record_hang.words is not None and record_hang.words.startswith(who)
    assert record_hang.words.endswith(f"; rank {odd} is elsewhere: time.sleep ({sleep_at})")
    assert record_hang.pid in {r.pid for r in record_hang.ranks if r.rank == others[0]}


def test_mp_spawn_two_ranks_one_never_joins_the_all_reduce(runs: Runs, torch_python: Path) -> None:
    record = runs.one(_server([str(torch_python), str(WORKER), "spawn", "{port}", "2", "1"]))
    assert record.stalled and record.outcome.value == "timeout"
    assert record.time_to_outcome_s is not None and record.time_to_outcome_s < 60  # not the 90 s timeout
    _check(runs, record.hang, 2, 1, "spawn order")
    result = json.loads((runs.last.run_dir.cells / record.attempt / "result.json").read_text())
    assert result["hang"]["odd_ranks"] == [1]
    assert result["hang"]["ranks"][0] == {
        "rank": 0,
        "pid": result["hang"]["ranks"][0]["pid"],
        "site": f"all_reduce (rankworker.py:{ALL_REDUCE_LINE})",
        "wait": "all_reduce",
        "at": f"rankworker.py:{ALL_REDUCE_LINE}",
        "source": "spawn order",
    }


@pytest.mark.parametrize(("world", "odd"), [(2, 1), (4, 2)])
def test_torchrun_ranks_one_never_joins_the_all_reduce(runs: Runs, torch_python: Path, world: int, odd: int) -> None:
    env = {"RANKWORKER_ODD": str(odd), "RANKWORKER_HOW": "sleep"}
    record = runs.one(_server(_torchrun(torch_python, world), env))
    assert record.stalled and record.outcome.value == "timeout"
    _check(runs, record.hang, world, odd, "RANK")
    assert "elastic" not in ((record.hang.site or "") if record.hang else "")


def test_the_spin_rule_decides_a_hang_whose_host_stays_busy(runs: Runs, torch_python: Path) -> None:
    """Rank 0 burns a core while both ranks hang: never a stall by CPU, a spin by stacks."""
    server = _server([str(torch_python), str(WORKER), "spawn", "{port}", "2", "1"], {"RANKWORKER_BUSY": "1"})
    record = runs.one({**server, "spin": "3s"})
    assert record.outcome.value == "timeout" and record.stalled
    assert record.reason.startswith("spinning "), record.reason
    assert f"rank 0 at all_reduce (rankworker.py:{ALL_REDUCE_LINE}); rank 1 at time.sleep" in record.reason
    assert "server.spin 3s" in record.reason
    assert record.time_to_outcome_s is not None and record.time_to_outcome_s < 60
    assert record.hang is not None and record.hang.odd_ranks == (1,)
    # the stacks taken after the spin rule's last sample (py-spy holds a process while it reads it)
    assert record.hang.site == "all_reduce in rankworker.py:work" and not record.hang.notes


def test_the_flight_recorder_says_which_rank_is_behind_by_which_collective(runs: Runs, torch_python: Path) -> None:
    record = runs.one(
        {**_server([str(torch_python), str(WORKER), "spawn", "{port}", "2", "1"]), "stacks": "flight-recorder"}
    )
    assert record.stalled and record.hang is not None
    assert record.env_changes["TORCH_FR_BUFFER_SIZE"] == "2000"
    assert record.env_changes["TORCH_NCCL_DUMP_ON_TIMEOUT"] == "1"
    assert str(record.env_changes["TORCH_FR_DUMP_TEMP_FILE"]).endswith("/stacks/flight-recorder/rank_")
    assert [(b.rank, b.last_seq, b.ahead_seq, b.collective) for b in record.hang.behind] == [
        (1, 0, 1, "gloo:all_reduce")
    ]
    assert record.hang.words is not None and record.hang.words.endswith(
        "flight recorder: rank 1 is behind in default_pg: its last collective #0, the others' #1 "
        "(it never entered gloo:all_reduce)"
    )
    dumps = runs.last.run_dir.cells / record.attempt / "stacks" / "flight-recorder"
    assert sorted(p.name for p in dumps.glob("rank_*")) == ["rank_0", "rank_1"]
