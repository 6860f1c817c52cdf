"""A launch of many ranks in the reports: a fake server replays a real torchrun log (rank 3 fails
first with an import error, ranks 0-2 then lose their gloo peer) and exits 1; the record names
rank 3, and the text, markdown and issue reports say it before the deciding line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from conftest import fake_command, run_cli, write_spec

LOG = Path(__file__).resolve().parent.parent / "fixtures" / "ranks" / "torchrun_4_import.log"


@pytest.fixture(scope="module")
def ranks_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    tmp = tmp_path_factory.mktemp("ranks")
    spec = write_spec(tmp, {"command": fake_command(f"replay={LOG}", "exit=1"), "ready": {"log": "never ready"}})
    done = run_cli("run", str(spec), "--run-id", "r", cwd=tmp)
    assert done.returncode == 0, done.stderr
    return tmp / "runs" / "r"


def test_the_record_names_the_rank_that_failed_first(ranks_run: Path) -> None:
    record = json.loads(next(ranks_run.glob("cells/*/result.json")).read_text())
    assert (record["failure_class"], record["first_failed_rank"]) == ("import_error", 3)
    assert record["cause"]["type"] == "ModuleNotFoundError"


@pytest.mark.parametrize("fmt", ["table", "md"])
def test_the_report_says_rank_3_failed_first(ranks_run: Path, fmt: str) -> None:
    done = run_cli("report", str(ranks_run), "--format", fmt, cwd=ranks_run.parent, columns=400)
    assert done.returncode == 0, done.stderr
    assert "rank 3 failed first: L17: rank3: ModuleNotFoundError: No module named" in done.stdout


def test_the_issue_says_rank_3_failed_first(ranks_run: Path) -> None:
    done = run_cli("report", str(ranks_run), "--format", "issue", cwd=ranks_run.parent)
    assert "Rank 3 failed first; the other ranks' errors are its fallout." in done.stdout


def test_the_html_report_names_rank_3_first(ranks_run: Path) -> None:
    page = (ranks_run / "report.html").read_text()
    assert "rank 3 failed first: L17: rank3: ModuleNotFoundError" in page  # the attempt's deciding line
    assert "<dt>first failed</dt><dd>rank 3</dd>" in page
