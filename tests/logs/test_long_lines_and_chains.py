"""Lines longer than a read block, and exception chains longer than the window the root cause is
read in: `classify` shows the line numbers the scanner counts (text as JSON), and names a deep
chain's root, reading back no further than a bound."""

from __future__ import annotations

import json
import traceback
from pathlib import Path

import pytest

from conftest import run_cli
from diagbench.logs import reading
from diagbench.logs.classify import context
from diagbench.logs.lines import BLOCK

OOM = "torch.OutOfMemoryError: CUDA out of memory."


def long_line_log(path: Path, before: int) -> int:
    """`before` lines longer than a read block, a few short ones, a long deciding line: its number."""
    with path.open("w") as handle:
        for i in range(before):
            handle.write("y" * (BLOCK + 1000 * i) + "\n")
        handle.write("loading\nstill loading\n")
        handle.write("x" * (BLOCK * 2 + 7) + " " + OOM + "\n")
        handle.write("after\n")
    return before + 3


@pytest.mark.parametrize("before", [0, 1, 3])
def test_context_counts_lines_longer_than_a_block_as_the_scanner_does(tmp_path: Path, before: int) -> None:
    log = tmp_path / "long.log"
    deciding = long_line_log(log, before)
    shown = context(log, deciding, around=2)
    assert [n for n, _ in shown] == list(range(deciding - 2, deciding + 2))
    assert dict(shown)[deciding].startswith("xxxx") and dict(shown)[deciding + 1] == "after"
    assert dict(shown)[deciding - 1] == "still loading"


def test_classify_text_names_the_line_json_names(tmp_path: Path) -> None:
    log = tmp_path / "long.log"
    deciding = long_line_log(log, 1)
    as_json = json.loads(run_cli("classify", str(log), "--json", cwd=tmp_path).stdout)
    text = run_cli("classify", str(log), cwd=tmp_path).stdout
    assert as_json["line_no"] == deciding
    assert f"at line {deciding}:" in text
    assert [line.split("|")[0].strip(" >") for line in text.splitlines() if "|" in line][-1] == str(deciding + 1)
    assert f"> {deciding:>7} | xxxx" in text or f">{deciding:>8} | xxxx" in text


def chain_log(path: Path, depth: int) -> None:
    def fail(n: int) -> None:
        if n == 0:
            raise ValueError("level 0: the root")
        try:
            fail(n - 1)
        except Exception as exc:
            raise RuntimeError(f"level {n}") from exc

    import sys

    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(max(limit, depth * 3 + 100))
    try:
        fail(depth)
    except Exception as exc:  # noqa: BLE001  # the chain printed as Python prints it
        printed = "".join(traceback.format_exception(exc, limit=2))
    finally:
        sys.setrecursionlimit(limit)
    path.write_text("loading\n" + printed)


def test_a_chain_deeper_than_the_window_is_named_by_its_root(tmp_path: Path) -> None:
    log = tmp_path / "chain.log"
    chain_log(log, 10_000)  # about 2 MB: the root is far above the last 256 KB
    assert log.stat().st_size > 4 * reading.TAIL
    found = json.loads(run_cli("classify", str(log), "--json", cwd=tmp_path).stdout)
    assert found["cause"] == {"type": "ValueError", "message": "level 0: the root", "line_no": 7}  # its exception line


def test_the_walk_back_is_bounded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    log = tmp_path / "chain.log"
    chain_log(log, 10_000)
    monkeypatch.setattr(reading, "CHAIN_BYTES", reading.TAIL * 4)  # less than the chain
    causes = reading.causes_of(log, None, log.read_bytes().count(b"\n"), log.stat().st_size)
    assert len(causes) == 1 and causes[0].message.startswith("level ") and causes[0].message != "level 0: the root"
    assert causes[0].line_no > 7  # the earliest link read, within the bound
