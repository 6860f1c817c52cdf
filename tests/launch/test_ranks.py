"""Ranks from what each process says about itself, and a hang read across ranks (no torch needed)."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from conftest import Runs, wait_until
from diagbench.launch.hangranks import with_ranks
from diagbench.launch.hangsite import summarise, where
from diagbench.launch.ranks import SPAWN_ORDER, ProcessInfo, Rank, assign_ranks, rank_from_env
from diagbench.launch.spin import SpinWatch
from diagbench.launch.stacks import ProcessStacks, Thread

RANKFAKE = Path(__file__).resolve().parent.parent / "rankfake.py"
_LINES = RANKFAKE.read_text().splitlines()
LOCK_LINE = next(n for n, line in enumerate(_LINES, 1) if "the collective that never completes" in line)
SLEEP_LINE = next(n for n, line in enumerate(_LINES, 1) if "never gets to the collective" in line)
ALL_REDUCE = [
    "pthread_cond_wait (libc.so.6)",
    "c10d::Work::wait (libtorch_cpu.so)",
    "pybind11::cpp_function::dispatcher (libtorch_python.so)",
    "all_reduce (torch/distributed/distributed_c10d.py:3252)",
    "_exception_logger.<locals>.wrapper (torch/distributed/c10d_logger.py:83)",
    "work (worker.py:22)",
    "_wrap (torch/multiprocessing/spawn.py:87)",
]
SLEEP = ["clock_nanosleep (libc.so.6)", "time_sleep (libpython3.11.so.1.0)", "work (worker.py:19)"]
JOIN = [
    "poll (libc.so.6)",
    "_PollLikeSelector.select (selectors.py:415)",
    "wait (multiprocessing/connection.py:947)",
    "ProcessContext.join (torch/multiprocessing/spawn.py:140)",
    "<module> (worker.py:40)",
]


@pytest.mark.parametrize(
    ("env", "rank"),
    [
        ({"RANK": "3", "WORLD_SIZE": "4", "LOCAL_RANK": "1"}, Rank(3, 4, "RANK")),
        ({"SLURM_PROCID": "5", "SLURM_NTASKS": "8"}, Rank(5, 8, "SLURM_PROCID")),
        ({"OMPI_COMM_WORLD_RANK": "2", "OMPI_COMM_WORLD_SIZE": "4"}, Rank(2, 4, "OMPI_COMM_WORLD_RANK")),
        ({"PMI_RANK": "1"}, Rank(1, None, "PMI_RANK")),
        (
            {"LOCAL_RANK": "1", "GROUP_RANK": "2", "LOCAL_WORLD_SIZE": "4"},
            Rank(9, None, "LOCAL_RANK + GROUP_RANK * LOCAL_WORLD_SIZE"),
        ),
        ({"LOCAL_RANK": "1"}, Rank(1, None, "LOCAL_RANK")),
        ({"RANK": "x", "LOCAL_RANK": ""}, None),
        ({}, None),
    ],
)
def test_a_rank_is_read_from_the_launchers_variables_in_order(env: dict[str, str], rank: Rank | None) -> None:
    assert rank_from_env(env) == rank


def _info(pid: int, ppid: int, argv: tuple[str, ...], rank: Rank | None = None) -> ProcessInfo:
    return ProcessInfo(pid, ppid, float(pid), argv, rank)


def test_spawn_order_numbers_siblings_of_one_program_only_where_nothing_else_says() -> None:
    child = ("python", "-c", "spawn_main(tracker_fd=4, pipe_handle={})", "--multiprocessing-fork")
    procs = [
        _info(10, 1, ("python", "worker.py")),
        _info(11, 10, ("python", "-c", "resource_tracker main(3)")),
        _info(13, 10, tuple(a.format(8) for a in child)),
        _info(12, 10, tuple(a.format(6) for a in child)),
    ]
    assert assign_ranks(procs) == {12: Rank(0, 2, SPAWN_ORDER), 13: Rank(1, 2, SPAWN_ORDER)}
    told = [*procs[:3], _info(12, 10, procs[3].argv, Rank(1, 2, "RANK"))]
    assert assign_ranks(told) == {12: Rank(1, 2, "RANK")}  # an environment that says wins over order
    assert assign_ranks(procs[:2]) == {}  # one child of a kind is no rank
    slurm = Rank(0, 1, "SLURM_PROCID")  # srun's, inherited by the whole tree: it says nothing of the ranks
    under_srun = [ProcessInfo(p.pid, p.ppid, p.started, p.argv, slurm) for p in procs]
    assert assign_ranks(under_srun) == {12: Rank(0, 2, SPAWN_ORDER), 13: Rank(1, 2, SPAWN_ORDER)}
    torchrun = [*under_srun[:2], _info(12, 10, (), Rank(0, 2, "RANK")), _info(13, 10, (), Rank(1, 2, "RANK"))]
    assert assign_ranks(torchrun) == {
        12: Rank(0, 2, "RANK"),
        13: Rank(1, 2, "RANK"),
    }  # the agent's SLURM_PROCID left out


def _stacks(pid: int, ppid: int, frames: list[str], rank: int | None) -> ProcessStacks:
    stacks = ProcessStacks(pid, "python", "", [Thread(pid, "MainThread", "idle", tuple(frames), "py-spy")], ppid=ppid)
    stacks.rank = Rank(rank, 2, SPAWN_ORDER) if rank is not None else None
    return stacks


def test_the_wait_is_the_collective_at_the_programs_line_not_in_torch() -> None:
    found = where(ALL_REDUCE)
    assert (found.wait, found.at, found.site) == ("all_reduce", "worker.py:22", "all_reduce in worker.py:work")
    assert found.named == "all_reduce (torch/distributed/distributed_c10d.py:3252)"


def test_a_parent_joining_its_ranks_is_never_the_site_and_the_rank_elsewhere_is_named() -> None:
    taken = [_stacks(10, 1, JOIN, None), _stacks(12, 10, ALL_REDUCE, 0), _stacks(13, 10, SLEEP, 1)]
    hang = summarise(taken)
    assert hang is not None and hang.pid == 12  # not the parent's selectors.select in spawn's join
    hang = with_ranks(hang, taken)
    assert hang.site == "all_reduce in worker.py:work" and hang.odd_ranks == (1,)
    assert [(r.rank, r.pid, r.site) for r in hang.ranks] == [
        (0, 12, "all_reduce (worker.py:22)"),
        (1, 13, "time.sleep (worker.py:19)"),
    ]
    assert hang.words == "rank 0 waits in all_reduce (worker.py:22); rank 1 is elsewhere: time.sleep (worker.py:19)"


def test_the_ranks_most_share_are_where_the_others_wait() -> None:
    taken = [_stacks(10 + r, 1, SLEEP if r == 2 else ALL_REDUCE, r) for r in range(4)]
    hang = with_ranks(summarise(taken) or pytest.fail("no hang"), taken)
    assert hang.odd_ranks == (2,) and hang.pid == 10
    assert (
        hang.words
        == "ranks 0, 1 and 3 wait in all_reduce (worker.py:22); rank 2 is elsewhere: time.sleep (worker.py:19)"
    )
    same = [_stacks(10 + r, 1, ALL_REDUCE, r) for r in range(2)]
    hang = with_ranks(summarise(same) or pytest.fail("no hang"), same)
    assert hang.odd_ranks == () and hang.words == "ranks 0 and 1 wait in all_reduce (worker.py:22), all of them"


def test_a_rank_whose_stacks_were_not_read_is_listed_never_odd() -> None:
    taken = [_stacks(10, 1, ALL_REDUCE, 0), _stacks(11, 1, ALL_REDUCE, 1), _stacks(12, 1, [], 2)]
    hang = with_ranks(summarise(taken) or pytest.fail("no hang"), taken)
    assert hang.odd_ranks == () and [r.site for r in hang.ranks][2] == "(no stacks read)"


def test_a_real_tree_of_ranks_without_torch_names_the_odd_rank(runs: Runs) -> None:
    """Ranks from RANK in each child's environment; the parent's subprocess.wait is never the site."""
    command = [sys.executable, str(RANKFAKE), "3", "1"]
    record = runs.one({"command": command, "ready": {"log": "never ready"}, "timeout": "60s", "stall": "1.5s"})
    assert record.stalled and record.hang is not None
    assert record.hang.site == "threading.Lock.acquire in rankfake.py:collective"
    assert record.hang.odd_ranks == (1,)
    assert [(r.rank, r.source) for r in record.hang.ranks] == [(0, "RANK"), (1, "RANK"), (2, "RANK")]
    assert record.hang.words == (
        f"ranks 0 and 2 wait in threading.Lock.acquire (rankfake.py:{LOCK_LINE}); "
        f"rank 1 is elsewhere: time.sleep (rankfake.py:{SLEEP_LINE})"
    )
    stacks = runs.last.run_dir.cells / record.attempt / "stacks" / f"{record.hang.ranks[1].pid}.txt"
    assert "rank 1 of 3 (from RANK)" in stacks.read_text()


def _tree_of_ranks(world: int) -> subprocess.Popen[bytes]:
    """A real parent with `world` children that carry RANK (they only sleep: the frames are the test's)."""
    code = (
        "import os, subprocess, sys, time\n"
        f"kids = [subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'], "
        f"env={{**os.environ, 'RANK': str(r)}}) for r in range({world})]\n"
        "time.sleep(60)\n"
    )
    parent = subprocess.Popen([sys.executable, "-c", code])
    wait_until(lambda: len(psutil.Process(parent.pid).children()) == world, 10, "the ranks to start")
    return parent


@pytest.mark.parametrize(
    ("frames", "spins"),
    [
        (ALL_REDUCE, True),
        (
            [
                "pthread_cond_wait (libc.so.6)",
                "_find_and_load (<frozen importlib._bootstrap>:1176)",
                "work (worker.py:3)",
            ],
            False,
        ),
        (["compute (worker.py:40)"], False),
    ],
)
def test_the_spin_rule_needs_every_rank_at_the_same_wait_in_the_programs_code(frames: list[str], spins: bool) -> None:
    parent = _tree_of_ranks(2)
    try:
        thread = Thread(1, "MainThread", "idle", tuple(frames), "py-spy")
        watch = SpinWatch(parent.pid, 0.3, sample=lambda pid: [thread], every=0.05)
        time.sleep(0.8)
        found = watch.spinning(time.monotonic())
        watch.stop()
        if spins:
            assert found is not None and found[0] >= 0.3
            assert found[1] == "rank 0 at all_reduce (worker.py:22); rank 1 at all_reduce (worker.py:22)"
        else:
            assert found is None  # an import, or a frame that names no wait, is never a spin
    finally:
        for child in psutil.Process(parent.pid).children():
            child.kill()
        parent.kill()
        parent.wait()
