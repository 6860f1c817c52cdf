"""Real launches of many ranks over gloo on the CPU where one rank fails first (tests/rankfail.py):
torchrun with 2 and 4 ranks, mp.spawn, a rank that raises and one that segfaults and prints
nothing. Live (`diagbench run`) and offline (`classify --json` on the server.log it wrote), the
rank that failed first is named and its error gives the class; nothing is left running. The
order in which the ranks end is set by the worker, never left to the load on the machine."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from conftest import Runs, run_cli

pytestmark = pytest.mark.torch

WORKER = Path(__file__).resolve().parent.parent / "rankfail.py"


def _torchrun(python: Path, world: int, mode: str) -> list[str]:
    launcher = [str(python), "-m", "torch.distributed.run", f"--nproc-per-node={world}", "--nnodes=1"]
    return [*launcher, "--master-addr=127.0.0.1", "--master-port={port}", str(WORKER), "torchrun", mode]


def _spawn(python: Path, world: int, mode: str) -> list[str]:
    return [str(python), str(WORKER), "spawn", mode, "{port}", str(world)]


def _check(runs: Runs, command: list[str], rank: int | None, failure_class: str, settle: str = "100ms") -> str:
    """Live, offline and on disk: `rank` failed first (None: no line says which) with `failure_class`.
    Returns the log."""
    server = {"command": command, "ready": {"log": "never ready"}, "timeout": "90s", "grace": "3s", "settle": settle}
    record = runs.one(server)
    assert (record.outcome, record.failure_class) == ("failed", failure_class), record.reason
    assert record.first_failed_rank == rank
    log = runs.last.run_dir.cells / record.attempt / "server.log"
    data = json.loads(run_cli("classify", "--json", str(log)).stdout)
    assert (data["failure_class"], data["first_failed_rank"]) == (failure_class, rank)
    on_disk = json.loads((log.parent / "result.json").read_text())
    assert on_disk["first_failed_rank"] == rank
    return log.read_text()


@pytest.mark.parametrize(("world", "mode", "failure_class"), [(2, "import", "import_error"), (4, "raise", "other")])
def test_torchrun_a_rank_that_raises_first(
    runs: Runs, torch_python: Path, world: int, mode: str, failure_class: str
) -> None:
    """The last rank fails; the others then lose their gloo peer in all_reduce (fallout, nccl)."""
    _check(runs, _torchrun(torch_python, world, mode), world - 1, failure_class)


def test_torchrun_a_rank_that_segfaults_is_named_by_torchruns_summary(runs: Runs, torch_python: Path) -> None:
    _check(runs, _torchrun(torch_python, 2, "segv"), 1, "segfault")


@pytest.mark.parametrize(("mode", "failure_class"), [("import", "import_error"), ("segv", "segfault")])
def test_mp_spawn_a_rank_that_fails_first(runs: Runs, torch_python: Path, mode: str, failure_class: str) -> None:
    """join finds the failing rank first (its peer lingers): its report names rank 1."""
    _check(runs, _spawn(torch_python, 2, mode), 1, failure_class)


def test_mp_spawn_reporting_only_a_peer_never_names_the_peer(runs: Runs, torch_python: Path) -> None:
    """join finds the peer first (the failing rank lingers) and reports only its lost connection;
    the failing rank's own error, printed with no prefix, still gives the class; the rank is
    unknown (null), never the peer's. The settle window is held open until the launch exits, so
    join's report is in the log."""
    log = _check(runs, _spawn(torch_python, 2, "logged"), None, "import_error", settle="60s")
    assert "-- Process 0 terminated with the following error:" in log  # the report of the peer was read


def test_mp_spawn_reporting_only_a_peer_of_a_rank_that_said_nothing_names_no_rank(
    runs: Runs, torch_python: Path
) -> None:
    """The same, but the failing rank printed nothing anywhere: the class is the fallout's and
    the rank is unknown (it was named as the peer, rank 0, before)."""
    log = _check(runs, _spawn(torch_python, 2, "silent"), None, "nccl", settle="60s")
    assert "-- Process 0 terminated with the following error:" in log
