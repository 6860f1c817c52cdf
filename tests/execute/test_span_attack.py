"""The Slurm span's files in the attempt's folder (issue 31's sweep): the server can plant names
there, so each node's `<k>.json` is read as a regular bounded file (a FIFO never waited on) and
every file the span writes is replaced whole, never written through a link."""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from diagbench.execute.slurm import span
from diagbench.execute.slurm.span import NODES_FOLDER


def _span(tmp_path: Path, nodes: int) -> span._Span:
    args = argparse.Namespace(record=str(tmp_path / "nodes.json"), nodes=nodes, grace=1.0, argv=["true"])
    found = span._Span(args)
    found.folder.mkdir()
    return found


def test_a_node_file_planted_as_a_link_is_never_written_through(tmp_path: Path) -> None:
    victim = tmp_path / "victim.txt"
    victim.write_text("keep me\n")
    folder = tmp_path / NODES_FOLDER
    folder.mkdir()
    (folder / ".0.json.tmp").symlink_to(victim)  # the names the span wrote through before
    (folder / "0.json").symlink_to(victim)
    (tmp_path / "nodes.tmp").symlink_to(victim)
    span._leave(folder, 0, 123, 1)
    assert victim.read_text() == "keep me\n"
    assert json.loads((folder / "0.json").read_text())["exit_code"] == 1 and not (folder / "0.json").is_symlink()
    found = span._Span(argparse.Namespace(record=str(tmp_path / "nodes.json"), nodes=1, grace=1.0, argv=["true"]))
    found._write(0)
    assert victim.read_text() == "keep me\n"
    assert json.loads((tmp_path / "nodes.json").read_text())["nodes"][0]["exit_code"] == 1


def test_a_node_file_planted_as_a_fifo_or_with_an_infinite_time_is_read_as_nothing(tmp_path: Path) -> None:
    found = _span(tmp_path, 2)
    os.mkfifo(found.folder / "0.json")
    (found.folder / "1.json").write_text('{"pid": 9, "exit_code": 0, "ended_at": Infinity}')
    code = (
        "import argparse, json, sys; from diagbench.execute.slurm import span; "
        "s = span._Span(argparse.Namespace(record=sys.argv[1], nodes=2, grace=1.0, argv=['true'])); "
        "print(json.dumps([n.to_json() for n in s._nodes()], allow_nan=False))"
    )
    try:
        done = subprocess.run(
            [sys.executable, "-c", code, str(tmp_path / "nodes.json")], capture_output=True, text=True, timeout=30
        )
    except subprocess.TimeoutExpired:
        pytest.fail("the span waited on a FIFO planted as a node's file")
    assert done.returncode == 0, done.stderr
    nodes = json.loads(done.stdout)
    assert nodes[0]["pid"] is None and nodes[1]["pid"] == 9 and nodes[1]["exited_s"] is None


def test_the_stop_request_is_never_written_through_a_planted_link(tmp_path: Path) -> None:
    found = _span(tmp_path, 1)
    target = tmp_path / "created-through-the-link"
    (found.folder / span.STOP_FILE).symlink_to(target)  # dangling: touch() would create its target

    class Ended:
        def exit_code(self) -> int:
            return 0

    with contextlib.suppress(Exception):  # stop_tree of a stand-in step: only the stop file matters here
        found._stop_step(Ended())  # type: ignore[arg-type]
    assert not target.exists()
    assert (found.folder / span.STOP_FILE).is_file() and not (found.folder / span.STOP_FILE).is_symlink()
