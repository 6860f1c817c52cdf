"""A spec that would expand to gigabytes ("billion laughs": aliases of aliases, here under
`ready.request.json`), one nested 5,000 levels deep, or one whose alias holds itself: one
clear message and exit 2, with bounded memory (the `plan` process runs under a 1 GiB address
space limit) and no traceback."""

from __future__ import annotations

import resource
import subprocess
from pathlib import Path

import pytest

from conftest import diagbench_argv


def laughs() -> str:
    rows = ['l0: &l0 ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]']
    rows += [f"l{i}: &l{i} [{', '.join([f'*l{i - 1}'] * 9)}]" for i in range(1, 9)]
    body = "\n        ".join(rows)
    return f"name: t\nserver:\n  command: [srv]\n  ready:\n    request:\n      path: /x\n      json:\n        {body}\n"


def limited() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30))


def plan(tmp_path: Path, text: str) -> subprocess.CompletedProcess[str]:
    spec = tmp_path / "spec.yaml"
    spec.write_text(text)
    return subprocess.run(
        diagbench_argv("plan", str(spec)), capture_output=True, text=True, timeout=60, preexec_fn=limited
    )


@pytest.mark.parametrize(
    ("text", "said"),
    [
        (laughs(), "spec.yaml:13: this value expands to more than 100,000 values"),
        ("name: " + "[" * 5000 + "]" * 5000 + "\n", "nested too deeply"),
        ("name: t\nserver: {command: [srv]}\nx: " + "[" * 100 + "]" * 100 + "\n", "nested more than 64 levels deep"),
        ("name: t\nx: &a [1, *a]\n", "spec.yaml:2: an alias refers to the value that holds it"),
    ],
    ids=["billion-laughs", "5000-deep", "100-deep", "self-alias"],
)
def test_a_spec_too_big_to_expand_is_one_clear_error(tmp_path, text, said):
    done = plan(tmp_path, text)
    assert done.returncode == 2, done.stderr[-500:]
    assert said in done.stderr
    assert "Traceback" not in done.stderr and len(done.stderr.strip().splitlines()) == 1


def test_aliases_that_stay_small_still_work(tmp_path):
    text = "name: t\nserver:\n  command: [srv, '{port}']\n  ready:\n    request: {path: /x, json: &b {a: 1}}\nx: *b\n"
    done = plan(tmp_path, text)
    assert "expands to more than" not in done.stderr


@pytest.mark.parametrize(
    ("given", "said"),
    [
        ("/dev/zero", "/dev/zero: is a character device, not a regular file (give the path of a YAML file)"),
        ("fifo", "fifo: is a named pipe (FIFO), not a regular file (give the path of a YAML file)"),
        ("folder", "folder: is a directory, not a regular file (give the path of a YAML file)"),
        (
            "huge.yaml",
            "huge.yaml: 16,777,216 bytes: larger than the 256 KiB a YAML file may be here (is this the file you meant?)",
        ),
    ],
)
def test_a_spec_that_is_no_regular_file_or_too_large_is_one_message_at_once(
    tmp_path: Path, given: str, said: str
) -> None:
    """`plan /dev/zero` read for ever (24 GB), a FIFO hung, a 16 MB file took a minute."""
    import os

    os.mkfifo(tmp_path / "fifo")
    (tmp_path / "folder").mkdir()
    (tmp_path / "huge.yaml").write_bytes(b"name: x\n" + b"#" * ((16 << 20) - 9) + b"\n")
    done = subprocess.run(
        diagbench_argv("plan", given), capture_output=True, text=True, timeout=30, cwd=tmp_path, preexec_fn=limited
    )
    assert done.returncode == 2, done.stderr
    assert done.stderr.strip() == f"diagbench: {said}"
