"""server.log is a sink: the secret values the run knows are blanked in the bytes as they are
written, however the server's writes cut them, while the scanner still reads the server's own
bytes. A real server prints them a byte at a time, split, in `\\r` progress lines, URL-quoted,
at the end of a megabyte line and after a flood that the size cap cuts."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from conftest import fake_command
from diagbench.launch.logfile import CappedLog
from diagbench.records import sink
from diagbench.records.sink import StreamBlanker
from diagbench.sensitive import REDACTED
from diagbench.vocab import Evidence

KEY = "zq9-planted-key-7781"  # MY_SVC_KEY's value: by name alone, no shape
SLASHED = "zq9+planted/key+7781"  # OTHER_TOKEN's: a URL-quoting client writes it zq9%2Bplanted%2Fkey%2B7781
BLANK = REDACTED.encode()


@pytest.fixture(autouse=True, params=["hyperscan", "search"])
def engine(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Each test with hyperscan finding the forms, and with a search per form (where it is not installed)."""
    if request.param == "search":
        monkeypatch.setattr(sink, "hyperscan", None)
    elif sink.hyperscan is None:
        pytest.skip("hyperscan is not installed here")
    return str(request.param)


def streamed(blanker: StreamBlanker, chunks: list[bytes]) -> bytes:
    return b"".join(blanker.feed(c) for c in chunks) + blanker.flush()


def test_a_value_split_anywhere_across_two_reads_is_blanked() -> None:
    data = f"my key is {KEY} ok\n".encode()
    for cut in range(len(data) + 1):
        out = streamed(StreamBlanker([KEY]), [data[:cut], data[cut:]])
        assert out == f"my key is {REDACTED} ok\n".encode(), cut


def test_a_value_written_a_byte_at_a_time_is_blanked() -> None:
    data = f"{KEY}{KEY[:5]} then {KEY}".encode()
    out = streamed(StreamBlanker([KEY]), [data[i : i + 1] for i in range(len(data))])
    assert out == f"{REDACTED}{KEY[:5]} then {REDACTED}".encode()


def test_random_cuts_of_a_stream_full_of_near_misses() -> None:
    """Prefixes of the value everywhere (`zq9-plan`), the value overlapping itself, and random
    cuts: the output is what blanking the whole stream at once gives."""
    rng = random.Random(31)
    pieces = [KEY, KEY[:-1], KEY[:4], "zq9-zq9-", "\r", "\n", "x" * 50, KEY + KEY]
    for _ in range(200):
        data = "".join(rng.choices(pieces, k=40)).encode()
        cuts = sorted(rng.sample(range(len(data)), k=rng.randint(0, 12)))
        chunks = [data[a:b] for a, b in zip([0, *cuts], [*cuts, len(data)], strict=True)]
        assert streamed(StreamBlanker([KEY]), chunks) == data.replace(KEY.encode(), BLANK)


def test_a_secret_holding_line_breaks_keeps_them_so_line_numbers_hold() -> None:
    pem = "-----BEGIN KEY-----\nAAAAsecretbody\n-----END KEY-----"
    out = streamed(StreamBlanker([pem]), [f"a\n{pem}\nb\n".encode()])
    assert out == f"a\n{REDACTED}\n\n\nb\n".encode()
    assert out.count(b"\n") == f"a\n{pem}\nb\n".count("\n")


def test_the_forms_a_value_is_written_in() -> None:
    secret = "p@ss/w0rd+with&more"
    blanker = StreamBlanker([secret])
    for form in ("p%40ss%2Fw0rd%2Bwith%26more", "p%40ss%2Fw0rd%2Bwith%26more", "p@ss/w0rd+with&amp;more"):
        assert blanker.blank(f"url={form}".encode()) == f"url={REDACTED}".encode()


def test_memory_is_flat_however_much_passes() -> None:
    blanker = StreamBlanker([KEY])
    chunk = b"y" * (65536 - len(KEY) + 1) + KEY[:-1].encode()  # each ends with all of the value but its last byte
    passed = 0
    for _ in range(2000):  # 128 MB
        passed += len(blanker.feed(chunk))
        assert len(blanker.held) == len(KEY) - 1
    assert passed == 2000 * len(chunk) - len(blanker.held)


def test_nothing_known_passes_the_bytes_untouched() -> None:
    data = b"hf_token=abc \xff\xfe junk\r"
    assert StreamBlanker([]).feed(data) is data


def test_a_value_with_nul_and_other_bytes_hyperscan_would_read_as_syntax() -> None:
    odd = "a\x00b.*c(d)[e]{2}\\z-odd-value"
    data = f"x {odd} y {odd[:-1]}".encode()
    assert streamed(StreamBlanker([odd]), [data[:9], data[9:]]) == f"x {REDACTED} y {odd[:-1]}".encode()


def test_capped_log_blanks_what_it_keeps_and_the_copy_of_the_deciding_line(tmp_path: Path) -> None:
    """Past the cap: the head, the ring before the decision, the copy of the deciding line, the
    part held across the decision: none holds the value, and the file's line count is the stream's."""
    path = tmp_path / "server.log"
    log = CappedLog(path, max_log=4 << 20, secrets=[KEY])
    line = b"a" * 1023 + b"\n"
    log.write(f"start {KEY}\n".encode())
    for _ in range(6000):  # 6 MB: past the cap
        log.write(line)
    deciding = f"RuntimeError: failed with {KEY}"
    log.write(deciding.encode() + b"\n")
    for _ in range(3000):  # the deciding line falls out of the kept tail
        log.write(line)
    log.write(f"mid {KEY[:7]}".encode())  # the decision lands while the value is half written
    log.pin(Evidence(6002, deciding))
    log.write(f"{KEY[7:]} end\n".encode())
    log.close()
    text = path.read_bytes()
    assert KEY.encode() not in text and KEY[:7].encode() + KEY[7:].encode() not in text
    assert f"start {REDACTED}".encode() in text and f"failed with {REDACTED}".encode() in text
    # what was held at the decision (maybe a secret's start) follows the copy of the deciding line
    assert text.endswith(
        f"mid \n[diagbench: the deciding line, line 6002 of the stream]\n{deciding}\n{REDACTED} end\n".replace(
            KEY, REDACTED
        ).encode()
    )


def test_a_real_server_splitting_its_secret_leaves_none_in_server_log(runs, engine: str) -> None:
    """The server prints the value it was given a byte at a time, in `\\r` progress updates,
    URL-quoted, at the end of a 1 MB line, with ANSI colours around it; then its ready line."""
    half = len(KEY) // 2
    r = runs.one(
        {
            "command": fake_command(
                "split=key " + KEY,
                "raw=" + KEY[:half],
                "sleep=0.1",
                "out=" + KEY[half:] + " (after a pause)",
                "out=downloading\\r10% " + KEY + "\\r20% " + KEY,
                "out=GET /v1?q=zq9%2Bplanted%2Fkey%2B7781&x=1",
                "out=\\x1b[31m" + KEY + "\\x1b[0m",
                "raw=" + "y" * 100_000 + KEY + "\\n",  # a long line with the value at its end
                "out=The server is fired up and ready to roll!",
                "hang",
            ),
            "env": {"MY_SVC_KEY": KEY, "OTHER_TOKEN": SLASHED},
        }
    )
    assert r.outcome == "ready", r.reason
    folder = runs.last.run_dir.cells / r.attempt
    log = (folder / "server.log").read_bytes()
    assert KEY.encode() not in log and b"zq9%2Bplanted%2Fkey%2B7781" not in log
    assert b"GET /v1?q=" + BLANK + b"&x=1" in log
    assert log.count(BLANK) == 7
    assert b"\x1b[31m" + BLANK + b"\x1b[0m" in log and b"10% " + BLANK + b"\r20% " + BLANK in log
    assert KEY not in (folder / "result.json").read_text()


@pytest.mark.parametrize("split", [1, 2, 7])
def test_stream_blanking_is_the_same_whatever_the_chunk_size(split: int) -> None:
    data = (f"{KEY} and {KEY}x{KEY[:3]}" * 5).encode()
    chunks = [data[i : i + split] for i in range(0, len(data), split)]
    assert streamed(StreamBlanker([KEY]), chunks) == data.replace(KEY.encode(), BLANK)
