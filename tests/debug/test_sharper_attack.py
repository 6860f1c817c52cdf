"""A debug set's `finds` is a user's pattern searched over a server's lines (issue 31's sweep):
it runs under the budget every user pattern has (logs/guard.py), so one that backtracks on a
line the server printed never freezes `diagbench debug`."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from conftest import run_cli

SERVER = (
    "import sys; print('a' * 40 + '!'); "
    "print('RuntimeError: CUDA error: an illegal memory access was encountered', flush=True); sys.exit(1)"
)


def test_a_backtracking_finds_pattern_gives_up_on_the_line_and_debug_ends(tmp_path: Path) -> None:
    sets = tmp_path / "mine.yaml"
    sets.write_text(
        "server: any\nsets:\n  - {id: mine.slow, for: [illegal_memory_access], env: {MY_DEBUG: '1'},"
        " finds: ['(a+)+$'], source: 'a test'}\n"
    )
    command = f'{sys.executable} -c "{SERVER}" --port {{port}}'
    try:
        done = run_cli("debug", command, "--debug-sets", str(sets), "--timeout", "20s", cwd=tmp_path, timeout=60)
    except subprocess.TimeoutExpired:
        pytest.fail("diagbench debug froze on a debug set's pattern")
    assert "mine.slow" in done.stdout + done.stderr, done.stdout + done.stderr
    assert done.returncode in (0, 1) and "Traceback" not in done.stderr, done.stderr
