from __future__ import annotations

import random
from pathlib import Path

import pytest

from diagbench.logs.scan import LineSplitter, Scanner, hyperscan
from diagbench.logs.signatures import Kind, Signature, builtin_packs, load_packs

SIGS = load_packs(builtin_packs(), Path("."))


def hits(scanner: Scanner, text: bytes):
    return [(h.line_no, h.signature.id) for h in scanner.scan(text, 1)]


def test_splitter_joins_reads_and_treats_cr_as_a_line_end():
    s = LineSplitter()
    assert s.feed(b"abc") == b""
    assert s.feed(b"def\r10%\r20%\r") == b"abcdef\n10%\n20%\n"
    assert s.feed(b"\nnext\r\n") == b"next\n"  # "\r" then "\n" in the next read is one ending
    assert s.feed(b"tail") == b""
    assert s.flush() == b"tail\n"


def test_splitter_cuts_huge_lines():
    s = LineSplitter(max_line=100)
    out = b"".join(s.feed(b"x" * 30) for _ in range(10))
    assert out.count(b"\n") == 2 and len(s.pending) < 100


def test_prefixes_do_not_hide_anchored_signatures():
    scanner = Scanner(SIGS)
    text = (
        b"[rank0]: ImportError: cannot import name 'x'\n"
        b"(VllmWorkerProcess pid=123) Killed\n"
        b"vllm-1  | ModuleNotFoundError: No module named 'y'\n"
        b"[2025-05-01 10:00:00 TP3] Killed\n"
    )
    assert [hit for hit in hits(scanner, text) if hit[1] != "generic.uncaught_exception"] == [
        (1, "generic.import_error"),
        (2, "generic.killed"),
        (3, "generic.import_error"),
        (4, "generic.killed"),
    ]


def test_named_groups_feed_the_phase_name():
    scanner = Scanner(SIGS)
    [hit] = scanner.scan(b"Capturing batches (bs=48 avail_mem=10.2 GB): 40%|\n", 7)
    assert hit.line_no == 7 and hit.signature.phase_name(hit.match) == "capture bs=48"


def test_repeated_progress_hits_collapse_to_the_last():
    scanner = Scanner(SIGS)
    text = b"".join(b"Capturing batches (bs=%d avail_mem=1 GB)\n" % bs for bs in (64, 32, 16))
    assert [h.text for h in scanner.scan(text, 1)] == ["Capturing batches (bs=16 avail_mem=1 GB)"]


def test_a_pattern_spanning_lines_does_not_match():
    scanner = Scanner([Signature("s", Kind.FAILURE, r"foo\s+bar", "other")], engine="re")
    assert hits(scanner, b"foo\nbar\n") == []
    assert hits(scanner, b"foo  bar\n") == [(1, "s")]


@pytest.mark.skipif(hyperscan is None, reason="hyperscan not installed")
def test_engines_agree_on_random_logs():
    fast, slow = Scanner(SIGS), Scanner(SIGS, engine="re")
    assert fast.engine_name == "hyperscan" and slow.engine_name == "re"
    corpus = (Path(__file__).parent / "fixtures").glob("*.log")
    lines = [line for path in corpus for line in path.read_bytes().splitlines()]
    rng = random.Random(7)
    for _ in range(20):
        text = b"\n".join(rng.choice(lines) for _ in range(300)) + b"\n"
        assert hits(fast, text) == hits(slow, text)


def test_patterns_hyperscan_rejects_fall_back_to_re():
    sig = Signature("look", Kind.FAILURE, r"(?<=boom )bang", "other")  # lookbehind: not in hyperscan
    scanner = Scanner([sig, *SIGS])
    assert hits(scanner, b"boom bang\n") == [(1, "look")]
    if hyperscan is not None:
        assert scanner.engine_name == "hyperscan+re"


def test_anchored_phase_is_confirmed_in_the_middle_of_a_buffer():
    scanner = Scanner(SIGS)
    [hit] = scanner.scan(b"noise\nAUTOTUNE addmm(32x2880, 32x4096, 4096x2880)\nmore noise\n", 1)
    assert (hit.line_no, hit.signature.id) == (2, "triton.autotune")


def test_required_phase_survives_other_phases_after_it():
    scanner = Scanner(SIGS)
    text = b"Available routes are:\nStarting vLLM API server 0 on http://x\nINFO:     Application startup complete.\n"
    assert [h.signature.id for h in scanner.scan(text, 1)] == [
        "vllm.routes",
        "vllm.starting_server",
        "vllm.uvicorn_ready",
    ]


def test_last_phase_before_each_decisive_line_is_kept():
    scanner = Scanner(SIGS)
    filler = b"".join(b"Capturing batches (bs=%d avail_mem=1 GB)\n" % (i % 7) for i in range(5000))
    text = (
        filler
        + b"Capture cuda graph begin. avail mem=1 GB\nScheduler hit an exception: Traceback\n"
        + filler
        + b"AUTOTUNE addmm(1x2, 2x3, 3x4)\n"
        + b"plain\n" * 3
    )
    got = [(h.signature.id, h.line_no) for h in scanner.scan(text, 1)]
    assert got == [("sglang.capture_begin", 5001), ("sglang.scheduler_exception", 5002), ("triton.autotune", 10003)]


def test_phase_on_the_failure_line_itself_counts():
    scanner = Scanner(SIGS)
    text = b"noise\nCapturing batches (bs=8 avail_mem=1 GB): 10%|Scheduler hit an exception: Traceback\n"
    assert [h.signature.id for h in scanner.scan(text, 1)] == ["sglang.capturing_batch", "sglang.scheduler_exception"]


def test_a_bar_that_opens_with_cr_does_not_add_a_line():
    s = LineSplitter()
    assert s.feed(b"warn\n\rCapturing 0%|\nTraceback\n") == b"warn\nCapturing 0%|\nTraceback\n"
    assert s.feed(b"\rnext bar 10%\r") == b"next bar 10%\n"  # across reads too
    assert s.feed(b"\rbar 20%\r\n") == b"bar 20%\n"


def test_more_real_prefixes():
    scanner = Scanner(SIGS)
    text = (
        b"(VllmWorker rank=1 pid=4242) ERROR 06-03 11:02:33 [multiproc_executor.py:527] ImportError: libcudart.so.12\n"
        b"[2025-05-12 08:03:12 DP0 TP3 EP3] Killed\n"
        b"(RayWorkerWrapper pid=77, ip=10.0.0.2) ModuleNotFoundError: No module named 'flashinfer'\n"
    )
    strong = [(n, sid) for n, sid in hits(scanner, text) if sid != "generic.uncaught_exception"]
    assert strong == [(1, "generic.import_error"), (2, "generic.killed"), (3, "generic.import_error")]
