"""The sinks' redaction, rule by rule: a known value in every form it is written out in, a
token right after a terminal colour code, a URL's credentials as an HTTP client sends them,
and what one part of a process learns, every sink of it knows."""

from __future__ import annotations

import base64
import html
import json
from pathlib import Path

import pytest

from diagbench import safetext
from diagbench.records import sink
from diagbench.records.redact import Redactor, learn
from diagbench.sensitive import REDACTED

SECRET = 'p@ss/w0rd+with&more"<x>`|*'


@pytest.mark.parametrize(
    "form",
    [
        SECRET,
        "p%40ss%2Fw0rd%2Bwith%26more%22%3Cx%3E%60%7C%2A",  # urllib.parse.quote
        "p%40ss%2fw0rd%2bwith%26more%22%3cx%3e%60%7c%2a",  # the same, lower-case escapes
        json.dumps(SECRET)[1:-1],  # inside a JSON string
        html.escape(SECRET),  # in HTML (report.html, an attribute too)
        html.escape(SECRET, quote=False),
        safetext.markdown(SECRET),  # in Markdown (a report, the issue)
        safetext.markdown_code(SECRET),  # in a Markdown code span
    ],
)
def test_a_known_value_is_blanked_in_every_form_it_is_written(form: str) -> None:
    assert Redactor(frozenset({SECRET})).text(f"a {form} b") == f"a {REDACTED} b"


def test_a_value_holding_control_characters_is_blanked_as_shown() -> None:
    value = "line-one\x1bline-two"
    assert Redactor(frozenset({value})).text(f"x {safetext.terminal(value, keep='')} y") == f"x {REDACTED} y"


@pytest.mark.parametrize(
    "coloured",
    [
        "\x1b[31m{}\x1b[0m",  # a colour, raw
        "\\x1b[1;38;5;208m{}",  # a 256-colour code as a report shows it (escaped)
        "\x1b[2J{}",  # a screen clear
        "\x1b[1mBearer {}",
    ],
)
def test_a_token_right_after_a_colour_code_is_a_token(coloured: str) -> None:
    token = "abcdefghijklmnop" if "Bearer" in coloured else "hf_" + "aB3" * 12
    assert token not in Redactor().text(coloured.format(token))


def test_a_token_inside_a_word_is_not_one() -> None:
    word = "xhf_" + "aB3" * 12
    assert Redactor().text(word) == word


def test_url_credentials_are_learned_with_the_header_a_client_sends() -> None:
    secrets = Redactor.of([{"PIP_INDEX_URL": "https://me:s3cr3t-pass-99@pypi.example/simple"}])
    basic = base64.b64encode(b"me:s3cr3t-pass-99").decode()
    assert {"s3cr3t-pass-99", basic} <= secrets.known
    assert secrets.text(f"> Authorization: basic {basic}") == f"> Authorization: basic {REDACTED}"


def test_what_one_part_learns_every_sink_knows() -> None:
    value = "learned-in-one-place-4242"
    assert value in sink.document(f"before {value}")
    Redactor.of([{"SOME_SERVICE_TOKEN": value}])  # as a spec, a command line or a --good-env is read
    assert sink.document(f"after {value}") == f"after {REDACTED}"
    assert sink.record({"a": [f"x {value}", {"b": value}], "n": 3}) == {"a": [f"x {REDACTED}", {"b": REDACTED}], "n": 3}


def test_short_values_and_blanks_are_never_learned() -> None:
    learn(["short", "<redacted>", "redacted"])
    assert sink.document("a short word, redacted") == "a short word, redacted"


def test_a_document_is_written_to_a_regular_file_only(tmp_path: Path) -> None:
    """A report in a run directory handed over: a FIFO is not waited on, a link not followed,
    what it points at not truncated."""
    import os

    fifo, link, target = tmp_path / "report.html", tmp_path / "junit.xml", tmp_path / "precious"
    os.mkfifo(fifo)
    target.write_text("keep me")
    link.symlink_to(target)
    for path in (fifo, link):  # replaced whole by a rename: the FIFO never opened, the link never followed
        sink.write_document(path, "x")
        assert path.is_file() and not path.is_symlink() and path.read_text() == "x"
    assert target.read_text() == "keep me"
    link.unlink()
    link.symlink_to(target)
    sink.write_document(link, "named by the user", follow=True)  # `--junit LINK`: as named
    assert target.read_text() == "named by the user"
