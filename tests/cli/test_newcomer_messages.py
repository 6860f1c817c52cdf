"""Small things a new user met in a second first day (issue 37): help that keeps option names
whole, a run folder looked for where there is no runs/, a .yml for a .yaml."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from conftest import run_cli

COMMANDS = ("run", "isolate", "triage", "limit", "debug", "plan", "report", "init", "logs")


@pytest.mark.parametrize("command", COMMANDS)
def test_help_never_breaks_a_word_at_its_hyphen(command: str) -> None:
    shown = run_cli(command, "-h", columns=80)
    assert shown.returncode == 0, shown.stderr
    assert not re.search(r"[A-Za-z]-$", shown.stdout, re.M), shown.stdout


def test_report_from_a_folder_with_no_runs_says_where_to_look(tmp_path: Path) -> None:
    done = run_cli("report", "runs/r1", cwd=tmp_path)
    assert done.returncode == 2
    assert done.stderr == (
        f"diagbench: runs/r1: no such run directory (there is no runs/ folder in {tmp_path}: give the run's "
        "path as seen from here, or run diagbench in the folder the run was started in)\n"
    )


def test_a_yml_that_is_a_yaml_is_named(tmp_path: Path) -> None:
    (tmp_path / "exp.yaml").write_text("name: x\n")
    done = run_cli("plan", "exp.yml", cwd=tmp_path)
    assert done.returncode == 2 and done.stderr == "diagbench: exp.yml: no such file (did you mean exp.yaml?)\n"
