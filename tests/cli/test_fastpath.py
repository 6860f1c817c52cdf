"""`classify --json LOG` without typer (cli/fastpath.py): the same output and exit code as
the typer app gives, and every other form left to the app."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import run_cli
from diagbench.cli.fastpath import FastClassify, parse_classify

FIXTURES = Path(__file__).parents[1] / "fixtures"
LOGS = sorted(FIXTURES.glob("*.log"))[::6]  # a spread of servers and outcomes


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["classify", "--json", "x.log"], FastClassify(Path("x.log"))),
        (["classify", "x.log", "--json", "--engine", "re"], FastClassify(Path("x.log"), engine="re")),
        (
            ["classify", "--json", "--signatures=sglang,./p.yaml", "--server", "vllm", "x.log"],
            FastClassify(Path("x.log"), "sglang,./p.yaml", "auto", "vllm"),
        ),
        (["classify", "x.log"], None),  # the text view: rich, through the app
        (["classify", "--json", "-"], None),  # standard input
        (["classify", "--json", "--help"], None),
        (["classify", "--json", "a.log", "b.log"], None),
        (["classify", "--json", "--engine", "fast", "x.log"], None),  # the app names the choices
        (["classify", "--json", "--engine"], None),
        (["classify", "--json", "--json", "x.log"], None),
        (["classify", "--json", "--server", "a", "--server", "b", "x.log"], None),
        (["report", "--json", "x.log"], None),
        ([], None),
    ],
)
def test_only_the_plain_form_is_taken(argv, expected):
    assert parse_classify(argv) == expected


def through_the_app(*args: str) -> subprocess.CompletedProcess[str]:
    code = "import sys; from diagbench.cli.app import app; sys.argv[0] = 'diagbench'; app()"
    env = {**os.environ, "COLUMNS": "200"}
    return subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, env=env, timeout=120)


@pytest.mark.parametrize("log", LOGS, ids=[p.stem for p in LOGS])
def test_the_same_answer_as_the_app(log):
    for extra in ([], ["--engine", "re"]):
        fast, app = (
            run_cli("classify", "--json", *extra, str(log)),
            through_the_app("classify", "--json", *extra, str(log)),
        )
        assert (fast.returncode, fast.stdout, fast.stderr) == (app.returncode, app.stdout, app.stderr)


def test_a_mistake_is_said_by_the_app(tmp_path):
    for args in (["--server", "nope", str(FIXTURES / "sglang_capture_oom.log")], [str(tmp_path / "missing.log")]):
        fast, app = run_cli("classify", "--json", *args), through_the_app("classify", "--json", *args)
        assert fast.returncode == app.returncode == 2
        assert fast.stderr == app.stderr and fast.stderr.startswith("diagbench: ")
