"""The sharper line of two logs (pure but for reading them): a set's own line, a place the
failure now names, the frame it moved to; log prefixes that look like places are not places."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from diagbench.debug.sets import load_sets
from diagbench.debug.sharper import find_sharper, innermost_frame, location
from diagbench.records.record import AttemptRecord
from diagbench.vocab import Evidence, Outcome


def record(line_no: int, text: str) -> AttemptRecord:
    evidence = Evidence(line_no, text)
    return AttemptRecord("x", 1, "000-x-r1", {}, [], {}, Outcome.FAILED, failure_class="other", evidence=evidence)


def log(tmp_path: Path, name: str, *lines: str) -> Path:
    path = tmp_path / name
    path.write_text("\n".join(lines) + "\n")
    return path


@pytest.mark.parametrize(
    ("text", "place"),
    [
        ('  File "/srv/model.py", line 42, in forward', "/srv/model.py:42"),
        (
            "kernels/attn.cu:118: void paged_attention(...): block: [0,0,0] Assertion `idx < n` failed.",
            "kernels/attn.cu:118",
        ),
        ("(EngineCore pid=7) ERROR 12-04 17:51:05 [core.py:1510] ValueError: no", None),  # vLLM's log prefix
        ("W1202 19:37:11.217000 32570 torch/_dynamo/convert_frame.py:2415] Set TORCHDYNAMO_VERBOSE=1", None),  # glog's
        ("RuntimeError: CUDA error: an illegal memory access was encountered", None),
    ],
)
def test_a_place_in_the_code_and_not_a_log_prefix(text: str, place: str | None) -> None:
    assert location(text) == place


def test_a_faulthandler_dump_names_the_current_threads_innermost_frame(tmp_path: Path) -> None:
    path = log(
        tmp_path,
        "server.log",
        "loading",
        "Fatal Python error: Segmentation fault",
        "",
        "Thread 0x00007f0000000001 (most recent call first):",
        '  File "/usr/lib/python3.11/threading.py", line 320 in wait',
        "",
        "Current thread 0x00007f4b353ecb80 (most recent call first):",
        '  File "/srv/ext.py", line 519 in call_native',
        '  File "/srv/server.py", line 1 in <module>',
    )
    assert innermost_frame(path, 2) == (8, '  File "/srv/ext.py", line 519 in call_native')


def test_a_deciding_line_that_now_names_a_place_is_sharper(tmp_path: Path) -> None:
    before = log(tmp_path, "a.log", "start", "RuntimeError: CUDA error: device-side assert triggered")
    after = log(tmp_path, "b.log", "start", "kernels/attn.cu:118: paged_attention: Assertion `idx < n` failed.")
    found = find_sharper(
        (record(2, "RuntimeError: CUDA error: device-side assert triggered"), before),
        (record(2, "kernels/attn.cu:118: paged_attention: Assertion `idx < n` failed."), after),
        [],
    )
    assert found is not None and (found.kind, found.line_no) == ("line", 2)
    assert found.why == "the failure now names a place in the code: kernels/attn.cu:118"


def test_a_sets_line_the_first_log_has_too_is_not_sharper(tmp_path: Path) -> None:
    sets = [s for s in load_sets().sets if s.id == "nccl.debug-info"]
    warn = "node1:1:1 [0] misc/socket.cc:484 NCCL WARN socketStartConnect: Connect failed"
    before = log(tmp_path, "a.log", warn, "DistBackendError: NCCL error")
    after = log(tmp_path, "b.log", "NCCL INFO Bootstrap", warn, "DistBackendError: NCCL error")
    found = find_sharper(
        (record(2, "DistBackendError: NCCL error"), before), (record(3, "DistBackendError: NCCL error"), after), sets
    )
    assert found is None  # the same WARN line without NCCL_DEBUG: the settings told nothing new


def test_a_missing_or_special_log_reads_as_empty(tmp_path: Path) -> None:
    fifo = tmp_path / "fifo.log"
    os.mkfifo(fifo)  # never opened for blocking reads
    assert innermost_frame(fifo, 5) is None
    assert innermost_frame(tmp_path / "missing.log", 5) is None
