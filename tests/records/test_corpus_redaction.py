"""Redaction blanks secrets, not counts: every real log of the corpus and every fixture, read
through the redaction a run applies when it knows no secret (a record's deciding line and
reason, a report's log tail, server.log as written), keeps every line that holds no secret's
shape as it was. Blanked evidence is damaged evidence (SGLang's `#new-token: 5` was shown as
`#new-token: <redacted>`; llama.cpp's `Preserved token: 200005`, LMDeploy's `hf_overrides=None`)."""

from __future__ import annotations

from pathlib import Path

import pytest

from diagbench.launch.logfile import CappedLog
from diagbench.records.redact import Redactor
from diagbench.sensitive import looks_secret

TESTS = Path(__file__).resolve().parents[1]
LOGS = sorted([*(TESTS / "corpus").rglob("*.log"), *(TESTS / "fixtures").glob("*.log")])
NO_SECRET = Redactor()  # the rules alone: names, flags, shapes, URLs


def test_the_corpus_is_there() -> None:
    assert len(LOGS) > 200


@pytest.mark.parametrize("log", LOGS, ids=[str(p.relative_to(TESTS)) for p in LOGS])
def test_no_line_without_a_secret_is_blanked(log: Path) -> None:
    text = log.read_text(encoding="utf-8", errors="replace")
    blanked = [
        (number, line)
        for number, line in enumerate(text.splitlines(), 1)
        for shown in (NO_SECRET.log(line), NO_SECRET.cut(line))
        if shown != line and not looks_secret(line)
    ]
    assert blanked == [], "blanked where no secret was: " + "; ".join(f"line {n}: {t[:120]!r}" for n, t in blanked)
    tail = text[-8192:]  # a report's log tail, read as a run's reports read it
    assert NO_SECRET.cut(tail) == tail or looks_secret(tail)


def test_the_live_writer_knowing_no_secret_writes_every_byte(tmp_path: Path) -> None:
    for log in LOGS[:40]:
        data = log.read_bytes()
        out = tmp_path / "server.log"
        capped = CappedLog(out, secrets=())
        for start in range(0, len(data), 4096):
            capped.write(data[start : start + 4096])
        capped.close()
        assert out.read_bytes() == data, log


@pytest.mark.parametrize(
    "line",
    [
        "[2026-03-25 15:42:05] Prefill batch, #new-seq: 1, #new-token: 6, #cached-token: 0, token usage: 0.00",
        "print_info: EOG token             = 248065 '<|file_sep|>'",
        "srv  params_from_: Preserved token: 200005",
        "backend_config=PytorchEngineConfig(hf_overrides=None, max_prefill_token_num=8192)",
        "load: control-looking token: 128247 '</s>' was not control-type",
    ],
)
def test_counts_ids_and_parameter_names_are_not_secrets(line: str) -> None:
    assert NO_SECRET.log(line) == line and NO_SECRET.cut(line) == line


@pytest.mark.parametrize(
    ("line", "secret"),
    [
        ("ServerArgs(api_key='s3cr3t-value', max_tokens=5)", "s3cr3t-value"),
        ("token: abcdefgh12345678", "abcdefgh12345678"),
        ("HF_TOKEN=hf_abcdefghijklmnopqrstuvwxyzABCDEFGH", "hf_abcdefghijklmnopqrstuvwxyzABCDEFGH"),
        ("--api-key 1234", "1234"),  # a flag's value: a command line, not a count in a server's words
    ],
)
def test_secrets_beside_them_still_are(line: str, secret: str) -> None:
    assert secret not in NO_SECRET.log(line)
