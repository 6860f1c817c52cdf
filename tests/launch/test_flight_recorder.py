"""PyTorch flight-recorder dumps read without pickle.load: real dumps written by torch 2.13 over
gloo (tests/fixtures/flight_recorder: two ranks, rank 1 never entered the third collective)."""

from __future__ import annotations

import os
import pickle
from pathlib import Path

import pytest

from diagbench.launch.flight import DUMP_LIMIT, FLIGHT_FOLDER, behind, behind_words, read_dump, read_dumps

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "flight_recorder"


def _dumps() -> dict[int, dict[str, object]]:
    return {r: read_dump((FIXTURES / f"rank_{r}").read_bytes()) for r in (0, 1)}


def test_a_real_dump_is_read_and_the_rank_behind_named_by_its_collective() -> None:
    dumps = _dumps()
    assert dumps[0]["version"] == "2.10" and len(dumps[0]["entries"]) == 3  # type: ignore[arg-type]
    found = behind(dumps)
    assert [(b.rank, b.group, b.last_seq, b.ahead_seq, b.collective) for b in found] == [
        (1, "default_pg", 2, 3, "gloo:all_reduce")
    ]
    assert behind_words(found) == (
        "flight recorder: rank 1 is behind in default_pg: its last collective #2, the others' #3 "
        "(it never entered gloo:all_reduce)"
    )
    assert behind({0: dumps[0]}) == [] and behind_words([]) is None


class _Boom:
    def __reduce__(self) -> tuple[object, tuple[str]]:
        return (os.system, ("touch /tmp/diagbench-flight-pwned",))


def test_a_dump_that_names_any_global_is_refused_never_run(tmp_path: Path) -> None:
    evil = pickle.dumps({"entries": [_Boom()]})
    with pytest.raises(ValueError, match=r"names (posix|os)\.system"):
        read_dump(evil)
    assert not Path("/tmp/diagbench-flight-pwned").exists()
    for bad in (b"", b"not a pickle", pickle.dumps([1, 2]), pickle.dumps({"entries": 3})):
        with pytest.raises(ValueError, match="not a flight-recorder dump"):
            read_dump(bad)


def test_dumps_are_read_through_the_files_door_bounded(tmp_path: Path) -> None:
    flight = tmp_path.joinpath(*FLIGHT_FOLDER)
    flight.mkdir(parents=True)
    (flight / "rank_0").write_bytes((FIXTURES / "rank_0").read_bytes())
    (flight / "rank_1").symlink_to(FIXTURES / "rank_1")  # a planted link is never read through
    with open(flight / "rank_2", "wb") as handle:
        handle.truncate(DUMP_LIMIT + 1)
    os.mkfifo(flight / "rank_3")  # a FIFO never hangs the reader
    dumps, notes = read_dumps(tmp_path)
    assert list(dumps) == [0]
    assert [n.split(":")[0] for n in notes] == [
        "flight recorder rank_1",
        "flight recorder rank_2",
        "flight recorder rank_3",
    ]
