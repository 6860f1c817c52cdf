"""A span's nodes.json is in the attempt's folder, which the server can write (issue 31's sweep):
read back as a regular file of bounded size, never through a FIFO or a link."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from diagbench.execute.remote.nodes import NODES_FILE, read_nodes

GOOD = {"nodes": [{"node": 0, "pid": 7, "exit_code": 1}, {"node": 1, "pid": 8, "exit_code": None}], "first": 0}


def _read_elsewhere(path: Path) -> str:
    """read_nodes in a process of its own: a FIFO would block the reader for ever."""
    code = "import sys; from pathlib import Path; from diagbench.execute.remote.nodes import read_nodes; "
    code += "print(read_nodes(Path(sys.argv[1])))"
    try:
        done = subprocess.run([sys.executable, "-c", code, str(path)], capture_output=True, text=True, timeout=30)
    except subprocess.TimeoutExpired:
        pytest.fail(f"reading {path.name} waited on it for ever")
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def test_a_nodes_file_planted_as_a_fifo_or_a_link_is_no_record(tmp_path: Path) -> None:
    real = tmp_path / "real.json"
    real.write_text(json.dumps(GOOD))
    assert read_nodes(real) is not None
    fifo = tmp_path / "fifo" / NODES_FILE
    fifo.parent.mkdir()
    os.mkfifo(fifo)
    assert _read_elsewhere(fifo) == "None"
    link = tmp_path / "link" / NODES_FILE
    link.parent.mkdir()
    link.symlink_to(real)
    assert read_nodes(link) is None
    huge = tmp_path / "huge" / NODES_FILE
    huge.parent.mkdir()
    huge.write_text(json.dumps({**GOOD, "pad": "x" * (2 << 20)}))
    assert read_nodes(huge) is None


def test_a_first_node_that_is_a_boolean_names_none(tmp_path: Path) -> None:
    path = tmp_path / NODES_FILE
    path.write_text(json.dumps({**GOOD, "first": True}))
    found = read_nodes(path)
    assert found is not None and found[1] is None
