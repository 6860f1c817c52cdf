"""Real launches of many ranks over gloo on the CPU where one rank fails first (tests/rankfail.py):
torchrun with 2 and 4 ranks, mp.spawn, a rank that raises and one that segfaults and prints
nothing. Live (`diagbench run`) and offline (`classify --json` on the server.log it wrote), the
rank that failed first is named and its error gives the class; nothing is left running."""

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


def _check(runs: Runs, command: list[str], rank: int, failure_class: str, unsaid: bool = False) -> None:
    """`unsaid`: the launcher may name only a rank that lost its peer (mp.spawn's join reports
    whichever process it saw end first), and the first rank's own error has no prefix: then the
    class is still its error's and the rank is unknown (null), never the peer's."""
    server = {"command": command, "ready": {"log": "never ready"}, "timeout": "90s", "grace": "3s"}
    record = runs.one(server)
    assert (record.outcome, record.failure_class) == ("failed", failure_class), record.reason
    assert record.first_failed_rank == rank or (unsaid and record.first_failed_rank is None)
    named = record.first_failed_rank if unsaid else rank
    log = runs.last.run_dir.cells / record.attempt / "server.log"
    data = json.loads(run_cli("classify", "--json", str(log)).stdout)
    assert (data["failure_class"], data["first_failed_rank"]) == (failure_class, named)
    on_disk = json.loads((log.parent / "result.json").read_text())
    assert on_disk["first_failed_rank"] == named


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
    _check(runs, _spawn(torch_python, 2, mode), 1, failure_class, unsaid=True)
