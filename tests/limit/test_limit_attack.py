"""A range bound of thousands of digits (issue 31's sweep): one line and exit 2, not int()'s
traceback (it refuses 4,300 digits and more)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from conftest import run_cli


@pytest.mark.parametrize("bound", ["9" * 5000, "-" + "1" * 4400, "0" * 6000 + "7"], ids=["5000", "-4400", "zeros"])
def test_a_bound_of_thousands_of_digits_is_one_line_and_exit_2(tmp_path: Path, bound: str) -> None:
    command = f"{sys.executable} -c 'import time; time.sleep(30)' --port {{port}}"
    done = run_cli("limit", command, "--vary-env", f"N={bound}..{'9' * 5000}", cwd=tmp_path)
    assert done.returncode == 2, done.stderr
    assert done.stderr.startswith("diagbench: --vary-env N=") and len(done.stderr.splitlines()) == 1
    assert "is beyond a 64-bit integer" in done.stderr and "Traceback" not in done.stderr
    assert not (tmp_path / "runs").exists()
