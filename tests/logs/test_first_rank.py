"""The rank that failed first: the rank prefixes each server prints (logs/ranks.py), and the
fixtures of launches of many ranks (tests/fixtures/ranks/expected.yaml, each with its source)."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
import yaml

from conftest import run_cli
from diagbench.logs.classify import classify_file
from diagbench.logs.firstrank import first_failure, tag_launchers
from diagbench.logs.ranks import LineOrigin, line_origin, text_origin
from diagbench.logs.rootcause import read
from diagbench.logs.signatures import builtin_packs, load_packs

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "ranks"
EXPECTED = yaml.safe_load((FIXTURES / "expected.yaml").read_text())
SIGS = load_packs(builtin_packs(), Path("."))


@pytest.mark.parametrize(
    ("line", "rank", "who"),
    [
        (b"[rank1]: Traceback (most recent call last):", 1, "rank1"),
        (b"[rank0]:[W1206 01:28:42.420 ProcessGroupNCCL.cpp:1414] Warning", 0, "rank0"),
        (b"[default1]:[rank1]: ValueError: x", 1, "default1"),
        (b"[default2]:rank 2 of 4 up", None, "default2"),
        (b"[3]: hello", 3, "rank3"),
        (b"[2026-01-01 10:00:05 TP1] Load weight begin.", 1, "TP1"),
        (b"[2026-01-01 10:00:05.123 TP3 EP3] Load weight begin.", 3, "TP3 EP3"),
        (b"[2026-01-01 10:00:05 DP0 TP1] Load weight begin.", None, "DP0 TP1"),
        (b"[2026-01-01 10:00:05 PP1 TP0] x", None, "PP1 TP0"),
        (b"(VllmWorker rank=1 pid=2102) ERROR 01-01 10:00:31 [x.py:1] y", 1, "VllmWorker rank=1"),
        (b"\x1b[1;36m(VllmWorker rank=3 pid=5)\x1b[0;0m INFO x", 3, "VllmWorker rank=3"),
        (b"(VllmWorkerProcess pid=7) INFO x", None, "VllmWorkerProcess pid=7"),
        (b"(Worker_TP1 pid=9) ERROR x", 1, "Worker_TP1"),
        (b"(VllmWorker-1 pid=9) INFO x", 1, "VllmWorker-1"),
        (b"(Worker_DP1_TP0 pid=9) ERROR x", None, "Worker_DP1_TP0 pid=9"),
        (b"(EngineCore_DP0 pid=9) ERROR x", None, "EngineCore_DP0 pid=9"),
        (b"(RayWorkerWrapper pid=7, ip=10.0.0.2) ERROR x", None, "RayWorkerWrapper pid=7"),
        (b"[node 1] [rank3]: x", 3, "rank3"),
    ],
)
def test_a_prefix_names_its_rank(line: bytes, rank: int | None, who: str) -> None:
    origin = line_origin(line)
    assert (origin.rank, origin.who) == (rank, who)
    assert text_origin(line.decode())[0] == origin


@pytest.mark.parametrize(
    "line",
    [
        b"plain line",
        b"",
        b"[2026-01-01 10:00:05] Received sigquit from a child process.",
        b"[W1206 01:28:42.420000 ProcessGroupNCCL.cpp:1414] no rank",
        b"[0]:",  # torchrun's summary entry, not a prefix
        b"(pid=7) no name",
        b"[rank1] no colon",
        b"INFO 01-01 10:00:00 [core.py:58] x",
    ],
)
def test_a_line_without_a_rank_prefix_names_none(line: bytes) -> None:
    assert line_origin(line).who is None
    assert text_origin(line.decode())[0].who is None


def test_the_node_prefix_comes_before_the_rank() -> None:
    assert line_origin(b"[node 2] plain") == LineOrigin(node=2)
    assert line_origin(b"[node 2] (Worker_TP1 pid=9) x") == LineOrigin(2, 1, None, "Worker_TP1")
    assert line_origin(b"[node 2] [rank3]: x").key == "node 2 rank3"


def test_a_hostile_line_is_read_in_linear_time() -> None:
    """Anchored, bounded: a megabyte of what almost matches costs what one line costs."""
    for line in (
        b"[" + b"a" * 1_000_000,
        b"[2026-01-01 10:00:05" + b" TP1" * 200_000,
        b"(" + b"VllmWorker " * 100_000,
        b"[default" + b"1" * 1_000_000,
    ):
        start = time.perf_counter()
        line_origin(line)
        assert time.perf_counter() - start < 0.05


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_fixture_first_rank_and_class(name: str) -> None:
    want = EXPECTED[name]
    got = classify_file(FIXTURES / name, SIGS)
    assert (got.outcome, got.first_failed_rank, got.failure_class) == (
        "failed",
        want["first_failed_rank"],
        want["failure_class"],
    )
    assert list(got.secondary_classes) == want["secondary_classes"]


def test_interleaved_tracebacks_of_two_ranks_are_read_apart() -> None:
    lines = [
        "[rank1]: Traceback (most recent call last):",
        "[rank0]: Traceback (most recent call last):",
        '[rank1]:   File "w.py", line 3, in f',
        '[rank0]:   File "w.py", line 9, in g',
        "[rank1]: torch.OutOfMemoryError: CUDA out of memory.",
        "[rank0]: RuntimeError: [gloo/transport/tcp/pair.cc:553] Connection closed by peer [127.0.0.1]:1",
    ]
    causes = read(lines, 1, to_end=True)
    assert [(c.who, c.type, c.failure_class) for c in causes] == [
        ("rank1", "torch.OutOfMemoryError", "oom"),
        ("rank0", "RuntimeError", "other"),
    ]
    found = first_failure(causes, causes.origins)
    assert found is not None and (found.rank, found.cause) == (1, causes[0])


def test_a_launch_of_one_rank_names_no_first_rank() -> None:
    lines = ["[rank0]: Traceback (most recent call last):", "[rank0]: ValueError: x"]
    causes = read(lines, 1, to_end=True)
    assert first_failure(causes, causes.origins) is None


def test_only_fallout_and_no_launcher_report_names_no_rank() -> None:
    """Every rank lost its peer and nothing says who died first: unknown, not a guess."""
    lines = [
        "[rank0]: RuntimeError: [gloo/transport/tcp/pair.cc:553] Connection closed by peer [127.0.0.1]:1",
        "[rank2]: RuntimeError: [gloo/transport/tcp/pair.cc:553] Connection closed by peer [127.0.0.1]:1",
    ]
    causes = read(lines, 1, to_end=True)
    assert first_failure(causes, causes.origins) is None


def test_torchruns_root_cause_entry_names_a_silent_rank() -> None:
    text = (FIXTURES / "torchrun_2_segv.log").read_text().splitlines()
    causes = tag_launchers(text, 1, read(text, 1, to_end=True))
    found = first_failure(causes)
    assert found is not None and found.rank == 1
    assert found.cause is not None and found.cause.failure_class == "segfault" and found.cause.launcher


def test_classify_json_and_its_words_name_the_first_rank() -> None:
    proc = run_cli("classify", "--json", str(FIXTURES / "torchrun_4_import.log"))
    data = json.loads(proc.stdout)
    assert (data["first_failed_rank"], data["failure_class"], data["signature"]) == (3, "import_error", "rootcause")
    words = run_cli("classify", str(FIXTURES / "torchrun_4_import.log")).stdout
    assert "rank 3 failed first: ModuleNotFoundError: No module named 'diagbench_no_such_module' (L17)" in words
