from __future__ import annotations

import io
import random
from pathlib import Path

import pytest

from diagbench.logs.lines import GLUED_CRS, Endings, LineSplitter, has_junk, lone_crs, read_blocks, split_lines
from diagbench.logs.scan import COUNT_APART, Scanner, hyperscan
from diagbench.logs.signatures import Kind, Signature, builtin_packs, load_packs

SIGS = load_packs(builtin_packs(), Path("."))


def hits(scanner: Scanner, text: bytes):
    """(line, signature) of each hit but the markers (which name the server, tested on their own)."""
    return [(h.line_no, h.signature.id) for h in scanner.scan(text, 1)]


def lines(text: bytes) -> int:
    return Scanner([]).scan_block(text, 1).lines


def strong_hits(scanner: Scanner, text: bytes):
    """hits() but the catch-all for a traceback's last line."""
    return [hit for hit in hits(scanner, text) if hit[1] != "generic.uncaught_exception"]


def test_splitter_joins_reads_and_ends_buffers_at_a_line_end():
    s = LineSplitter()
    assert s.feed(b"abc") == b""
    assert s.feed(b"def\r10%\r20%\r") == b"abcdef\r10%\r"  # a last "\r" waits: a "\n" may follow
    assert s.feed(b"\nnext\r\n") == b"20%\r\nnext\r\n"
    assert s.feed(b"tail") == b""
    assert s.flush() == b"tail\n"


def test_cr_ends_a_line_unless_next_to_a_newline():
    assert lines(b"abcdef\r10%\r20%\r") == 3
    assert lines(b"a\r\nb\n") == 2  # one ending
    assert lines(b"warn\n\rCapturing 0%|\nTraceback\n") == 3  # a bar's leading "\r" ends nothing
    assert lines(b"\rbar 10%\rbar 20%\r\n") == 2


def test_splitter_hands_over_huge_lines_in_pieces():
    s = LineSplitter(max_line=100)
    out = b"".join(s.feed(b"x" * 30) for _ in range(10))
    assert len(s.pending) < 100 and out + s.pending == b"x" * 300  # memory stays flat
    assert lines(out + s.flush()) == 1  # and the line stays one line


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
    corpus = (Path(__file__).parents[1] / "fixtures").glob("*.log")
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
    mine = [
        Signature("mine.routes", Kind.PHASE, "Available routes are:", phase="serving"),
        Signature("mine.start", Kind.PHASE, "Starting the server", phase="serving"),
        Signature("mine.ready", Kind.READY, "Application startup complete", requires=("mine.routes",)),
    ]
    text = b"Available routes are:\nStarting the server\nINFO:     Application startup complete.\n"
    assert [sid for _, sid in hits(Scanner(mine), text)] == ["mine.routes", "mine.start", "mine.ready"]


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
    got = [(sid, line) for line, sid in hits(scanner, text)]
    assert got == [("sglang.capture_begin", 5001), ("sglang.scheduler_exception", 5002), ("triton.autotune", 10003)]


def test_every_phase_keeps_each_change_in_a_buffer_and_one_line_per_progress_bar():
    scanner = Scanner(SIGS)
    bars = b"".join(
        b"\rCapturing batches (bs=%d avail_mem=1 GB): %d%%|" % (bs, pct) for bs in (8, 4) for pct in (0, 50)
    )
    text = (
        b"Load weight begin.\nCapture cuda graph begin.\n"
        + bars
        + b"\nNCCL error: unhandled system error\nCapture cuda graph end.\n"
    )
    every = [
        h
        for h in scanner.scan_block(text, 1, markers=False, every_phase=True).hits
        if h.signature.kind is not Kind.MARKER
    ]
    assert [(h.line_no, h.signature.phase_name(h.match)) for h in every if h.signature.kind is Kind.PHASE] == [
        (1, "load"),
        (2, "capture"),
        (3, "capture bs=8"),  # the first of its bar's updates
        (5, "capture bs=4"),
        (8, "warm-up"),
    ]
    assert [(h.line_no, h.signature.id) for h in every if h.signature.kind is not Kind.PHASE] == [(7, "nccl.error")]
    last = [h.signature.id for h in scanner.scan(text, 1)]  # without it: the last phase before each decisive line
    assert last == ["sglang.capturing_batch", "nccl.error", "sglang.capture_end"]


def test_phase_on_the_failure_line_itself_counts():
    scanner = Scanner(SIGS)
    text = b"noise\nCapturing batches (bs=8 avail_mem=1 GB): 10%|Scheduler hit an exception: Traceback\n"
    assert [h.signature.id for h in scanner.scan(text, 1)] == ["sglang.capturing_batch", "sglang.scheduler_exception"]


def test_a_bar_that_opens_with_cr_does_not_add_a_line():
    scanner = Scanner(SIGS)
    text = b"warn\n\rCapturing batches (bs=8 avail_mem=1 GB): 0%|\nTraceback\nKilled\n"
    assert hits(scanner, text) == [(2, "sglang.capturing_batch"), (4, "generic.killed")]


def test_more_real_prefixes():
    scanner = Scanner(SIGS)
    text = (
        b"(VllmWorker rank=1 pid=4242) ERROR 06-03 11:02:33 [multiproc_executor.py:527] ImportError: libcudart.so.12\n"
        b"[2025-05-12 08:03:12 DP0 TP3 EP3] Killed\n"
        b"(RayWorkerWrapper pid=77, ip=10.0.0.2) ModuleNotFoundError: No module named 'flashinfer'\n"
    )
    strong = [(n, sid) for n, sid in hits(scanner, text) if sid != "generic.uncaught_exception"]
    assert strong == [(1, "generic.import_error"), (2, "generic.killed"), (3, "generic.import_error")]


def test_the_line_model_is_one_whatever_counts_it():
    """The scanner's count, the splitter's reads and the lines shown to people agree."""
    rng = random.Random(3)
    scanner = Scanner([])
    for _ in range(300):
        text = bytes(rng.choice(b"ab\r\n") for _ in range(rng.randrange(1, 40))) + b"\n"
        whole = scanner.scan_block(text, 1).lines
        assert whole == len(split_lines(text)), text
        splitter, pieces = LineSplitter(), []
        cuts = sorted(rng.sample(range(1, len(text)), min(3, len(text) - 1)))
        for a, b in zip([0, *cuts], [*cuts, len(text)], strict=True):
            pieces.append(splitter.feed(text[a:b]))
        pieces.append(splitter.flush())
        assert sum(scanner.scan_block(p, 1).lines for p in pieces if p) == whole, text


def lone_crs_by_hand(buf: bytes) -> list[int]:
    """The line model's lone "\\r"s, one byte at a time: not after a "\\n", not before one."""
    return [i for i, c in enumerate(buf) if c == 13 and i and buf[i - 1] != 10 and buf[i + 1 : i + 2] != b"\n"]


def test_lone_crs_are_the_line_models_whatever_the_mix_of_endings():
    """Few "\\r"s next to a "\\n" (progress bars) are walked with find; many ("\\r\\n" logs) by `re`."""
    rng = random.Random(5)
    for glued in (0, 1, GLUED_CRS - 1, GLUED_CRS, GLUED_CRS + 1, 5 * GLUED_CRS):
        for _ in range(20):
            parts = [b"\r\n"] * glued + [b"\r"] * rng.randrange(0, 50) + [b"\n\r", b"\n", b"\r\r"] * rng.randrange(0, 9)
            rng.shuffle(parts)
            buf = b"".join(b"x" * rng.randrange(0, 3) + part for part in parts) + b"\n"
            assert list(lone_crs(buf, len(buf))) == lone_crs_by_hand(buf), buf
            cut = rng.randrange(0, len(buf) + 1)  # a buffer's end before its length
            assert list(lone_crs(buf, cut)) == lone_crs_by_hand(buf[:cut]), (buf, cut)


@pytest.mark.skipif(hyperscan is None, reason="the count beside the scan runs with hyperscan")
@pytest.mark.parametrize("coloured", [False, True])
def test_a_big_buffer_counted_beside_the_scan_is_numbered_as_a_small_one(
    monkeypatch: pytest.MonkeyPatch, coloured: bool
):
    """A buffer of COUNT_APART bytes or more has its line ends counted in another thread and
    its hits numbered back from its end: the same lines, numbers and count as one thread,
    with colour codes (scanned cleaned) or without."""
    rng = random.Random(17)
    corpus = [*(Path(__file__).parents[1] / "corpus/logs").glob("*.log")]
    lines = [line for path in corpus for line in path.read_bytes().splitlines() if line]
    lines = [line for line in lines if coloured or not has_junk(line, len(line))]
    endings = [b"\n", b"\n", b"\r\n", b"\r", b"\n\r"]
    text = b""
    while len(text) < 3 * COUNT_APART:
        text += b"".join(rng.choice(lines) + rng.choice(endings) for _ in range(500))
    text += b"\n"
    assert has_junk(text, len(text)) is coloured
    scanner = Scanner(SIGS)
    beside = scanner.scan_block(text, 7)
    assert beside.hits and {h.line_no < beside.lines / 2 for h in beside.hits} == {True, False}  # both halves
    monkeypatch.setattr("diagbench.logs.scan.COUNT_APART", 1 << 62)
    alone = scanner.scan_block(text, 7)
    assert beside.lines == alone.lines == len(split_lines(text))
    assert [(h.line_no, h.signature.id, h.line) for h in beside.hits] == [
        (h.line_no, h.signature.id, h.line) for h in alone.hits
    ]
    shown = split_lines(text)
    assert all(shown[h.line_no - 7] == h.line for h in beside.hits)


def test_a_flood_of_progress_bar_redraws_is_counted_line_by_line():
    """A server that writes nothing but redraws (a million lone "\\r"s in one block, counted
    beside the scan) and then dies: its last line is numbered after every redraw."""
    text = b"x\r" * (1 << 20) + b"\nKilled\n"
    scanned = Scanner(SIGS).scan_block(text, 1)
    assert scanned.lines == (1 << 20) + 1
    assert [(h.line_no, h.signature.id) for h in scanned.hits if h.line == b"Killed"] == [
        ((1 << 20) + 1, "generic.killed")
    ]


def test_a_count_that_failed_in_its_thread_is_raised_where_its_result_is_asked():
    with pytest.raises(AttributeError):
        Endings(None, 10).result()  # no buffer: what went wrong comes back


def test_hits_do_not_depend_on_how_the_log_was_read():
    """Live reads of any size, 8 MB blocks, one buffer: the same ready and failure lines."""
    rng = random.Random(11)
    corpus = [
        *(Path(__file__).parents[1] / "fixtures").glob("*.log"),
        *(Path(__file__).parents[1] / "corpus/logs").glob("*.log"),
    ]
    lines = [line for path in corpus for line in path.read_bytes().splitlines() if line]
    scanner = Scanner(SIGS)
    decisive = (Kind.READY, Kind.FAILURE)
    for _ in range(10):
        text = b"".join(rng.choice(lines) + rng.choice([b"\n", b"\r\n", b"\r", b"\n\r"]) for _ in range(200)) + b"\n"
        whole = [(h.line_no, h.signature.id) for h in scanner.scan(text, 1) if h.signature.kind in decisive]
        for read in (live_reads(text, rng), blocks_of(text, 4096)):
            got, line_no = [], 0
            for buf in read:
                scanned = scanner.scan_block(buf, line_no + 1)
                got += [(h.line_no, h.signature.id) for h in scanned.hits if h.signature.kind in decisive]
                line_no += scanned.lines
            assert got == whole


def live_reads(text: bytes, rng: random.Random) -> list[bytes]:
    splitter, out, pos = LineSplitter(), [], 0
    while pos < len(text):
        step = rng.randrange(1, 3000)
        out.append(splitter.feed(text[pos : pos + step]))
        pos += step
    return [b for b in [*out, splitter.flush()] if b]


def blocks_of(text: bytes, size: int) -> list[bytes]:
    return [bytes(buf[:end]) for buf, end in read_blocks(io.BytesIO(text), size)]


def test_colour_codes_and_tags_do_not_hide_a_line():
    scanner = Scanner(SIGS)
    text = (
        b"\x1b[32mINFO\x1b[0m plain\n"
        b"\x1b[1;31m[rank0]:\x1b[0m ImportError: cannot import name 'x'\n"
        b'<span style="color:#e06c75">[rank1]:</span> Killed  \n'
        b"#033[2m2024-04-18T22:45:31Z#033[0m #033[32m INFO#033[0m text_generation_router: #033[2m329:#033[0m Connected\n"
    )
    assert strong_hits(scanner, text) == [
        (2, "generic.import_error"),
        (3, "generic.killed"),
        (4, "tgi.router_connected"),
    ]
    ready = Scanner(SIGS, engine="re").scan(text, 1)[-1]
    assert ready.text.endswith("#033[2m329:#033[0m Connected")  # matched as read, shown as written


def test_launcher_container_and_paste_prefixes_do_not_hide_a_line():
    scanner = Scanner(SIGS)
    text = (
        b"[1,0]<stderr>:ModuleNotFoundError: No module named 'flash_attn'\n"
        b"ollama  | Killed\n"
        b"2024-05-23T03:12:17.327895Z stderr F ImportError: libcudart.so.12\n"
        b"Jul 25 14:36:08 gpu-node vllm[594237]: Killed\n"
        b"E0109 19:34:35.165873 11729 model.py:248] ImportError: no module\n"
        b"> > Segmentation fault (core dumped)\n"
        b"2024-04-18T18:45:31.064-04:00   Killed\n"
    )
    assert strong_hits(scanner, text) == [
        (1, "generic.import_error"),
        (2, "generic.killed"),
        (3, "generic.import_error"),
        (4, "generic.killed"),
        (5, "generic.import_error"),
        (6, "generic.shell_segfault"),
        (7, "generic.killed"),
    ]


def test_ray_vllm_journald_and_torch_prefixes_do_not_hide_a_line():
    scanner = Scanner(SIGS)
    text = (
        # Ray (ray/_private/worker.py print_worker_logs): no name, an actor's, a Serve replica's
        b"(pid=5) ModuleNotFoundError: No module named 'x'\n"
        b"(ServeReplica:default:VLLMDeployment pid=812) Killed\n"
        b"(RayWorkerWrapper pid=77, ip=fd00::2) ImportError: libcudart.so.12\n"
        # a vLLM worker before it sets its title (multiproc_executor.py: name=f"VllmWorker-{rank}")
        b"(VllmWorker-0 pid=23554) ERROR 12-02 19:32:34 [multiproc_executor.py:953] ImportError: x\n"
        # journalctl -o short-iso (systemd 252: %z), short-iso-precise, short-precise; rsyslog RFC 3339
        b"2024-07-25T14:36:08+0000 gpu-node python3[1234]: Killed\n"
        b"2024-07-25T14:36:08.123456+0200 gpu-node vllm[594237]: ImportError: y\n"
        b"Jul 25 14:36:08.123456 gpu-node vllm[594237]: Killed\n"
        b"2024-07-25T14:36:08+00:00 gpu-node python3[1234]: Killed\n"
        # torch's logging: a path in glog's file part, then a compile id
        b"W1202 19:37:11.217000 32570 torch/_dynamo/convert_frame.py:2415] [0/0] ImportError: z\n"
    )
    assert strong_hits(scanner, text) == [
        (1, "generic.import_error"),
        (2, "generic.killed"),
        (3, "generic.import_error"),
        (4, "generic.import_error"),
        (5, "generic.killed"),
        (6, "generic.import_error"),
        (7, "generic.killed"),
        (8, "generic.killed"),
        (9, "generic.import_error"),
    ]


def test_a_marker_is_reported_once_per_buffer():
    scanner = Scanner(SIGS)
    text = b"".join(
        b"(APIServer pid=1) INFO 05-07 20:28:31 [launcher.py:46] Route: /v%d, Methods: POST\n" % i for i in range(50)
    )
    markers = [h.signature.id for h in scanner.scan_block(text, 1).hits if h.signature.kind is Kind.MARKER]
    assert sorted(markers) == ["vllm.marker_logger", "vllm.marker_process", "vllm.marker_routes"]


def test_parsed_packs_are_cached_until_their_file_changes(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    pack = tmp_path / "mine.yaml"
    pack.write_text("pack: mine\nsignatures:\n  - {id: mine.boom, kind: failure, class: oom, pattern: 'boom'}\n")
    first = load_packs([str(pack)], tmp_path)
    assert [s.id for s in first] == ["mine.boom"] and list((tmp_path / "cache" / "diagbench").glob("packs-*.json"))
    assert load_packs([str(pack)], tmp_path) == first  # read back from the cache
    pack.write_text("pack: mine\nsignatures:\n  - {id: mine.bang, kind: failure, class: nccl, pattern: 'bang'}\n")
    assert [(s.id, s.failure_class) for s in load_packs([str(pack)], tmp_path)] == [("mine.bang", "nccl")]
    for entry in (tmp_path / "cache" / "diagbench").glob("packs-*.json"):
        entry.write_bytes(b"not what was written")  # a damaged entry is parsed again, never trusted
    assert [s.id for s in load_packs([str(pack)], tmp_path)] == ["mine.bang"]


def test_no_pack_value_is_cut_short_by_a_yaml_comment():
    """An unquoted ` #` starts a YAML comment: `source: torch (L vllm#1, #2)` would load as
    `torch (L vllm#1,`. Every such value in the built-in packs must be quoted."""
    folder = Path(load_packs.__code__.co_filename).parent / "packs"
    cut = []
    for path in sorted(folder.glob("*.yaml")):
        for line_no, line in enumerate(path.read_text().splitlines(), 1):
            key, sep, value = line.strip().removeprefix("- ").partition(": ")
            if sep and key.isidentifier() and value[:1] not in ("'", '"', "|", ">") and " #" in value:
                cut.append(f"{path.name}:{line_no}: {line.strip()}")
    assert not cut, "\n".join(cut)
    sources = {sig.id: sig.source for sig in load_packs(builtin_packs(), folder)}
    assert sources["generic.port_in_use"].endswith("#11617, tgi#1156)")
