"""`report --format issue` is inert and fits: package metadata, log lines and records written
by a hostile server or package index cannot add a heading, HTML, a link or a mention to the
issue (read back by a CommonMark parser, HTML allowed as GitHub allows it); past GitHub's
65,536 characters the least decisive parts are cut, said so; a manifest the other formats
refuse is refused the same way."""

from __future__ import annotations

import html
import json
from pathlib import Path
from typing import Any

import pytest
from markdown_it import MarkdownIt

from conftest import fake_command, run_cli, write_spec
from diagbench.render.issue import MAX_BODY

HOSTILE = "evil\x1b[2J\n## Injected heading @octocat #1 <img src=x onerror=alert(1)> ```` [x](http://e)"
OURS = {"<!--", "<sub>", "</sub>", "<br>"}  # the only HTML the issue itself writes


@pytest.fixture(scope="module")
def failed_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    tmp = tmp_path_factory.mktemp("issue")
    lines = [f"out=line {i} {HOSTILE[:40]}" for i in range(3)]
    spec = write_spec(
        tmp, {"command": fake_command(*lines, "out=torch.OutOfMemoryError: CUDA out of memory.", "exit=1")}
    )
    done = run_cli("run", str(spec), "--run-id", "r", cwd=tmp)
    assert done.returncode == 0, done.stderr
    return tmp / "runs" / "r"


def copy_with(
    run: Path, tmp: Path, manifest: dict[str, Any] | None = None, record: dict[str, Any] | None = None
) -> Path:
    import shutil

    target = tmp / "copy"
    shutil.copytree(run, target)
    if manifest is not None:
        path = target / "manifest.json"
        path.write_text(json.dumps({**json.loads(path.read_text()), **manifest}))
    if record is not None:
        path = next(target.glob("cells/*/result.json"))
        path.write_text(json.dumps({**json.loads(path.read_text()), **record}))
    return target


def environment(dists: list[dict[str, Any]]) -> dict[str, Any]:
    python = {"interpreter": "/usr/bin/python3", "python": "3.12.3", "distributions": dists}
    return {"environment": {"python": python, "gpus": [], "variables": {"CUDA_HOME": HOSTILE}}}


def issue(run: Path, *extra: str) -> tuple[int, str, str]:
    done = run_cli("report", str(run), "--format", "issue", *extra, cwd=run.parent)
    return done.returncode, done.stdout, done.stderr


def html_of(markdown: str) -> tuple[list[str], list[str]]:
    """The headings' texts and the raw HTML pieces a CommonMark reader finds in `markdown`."""
    tokens = MarkdownIt("commonmark", {"html": True}).parse(markdown)
    headings = [tokens[i + 1].content for i, t in enumerate(tokens) if t.type == "heading_open"]
    raw = [t.content for t in tokens if t.type == "html_block"]
    raw += [c.content for t in tokens if t.children for c in t.children if c.type == "html_inline"]
    return headings, raw


def test_hostile_metadata_and_log_lines_stay_text(failed_run: Path, tmp_path: Path) -> None:
    dists = [{"name": HOSTILE, "version": "1.0```\n# v", "origin": {"kind": "url", "url": HOSTILE}}]
    run = copy_with(
        failed_run,
        tmp_path,
        environment(dists),
        {"reason": HOSTILE, "cause": {"type": HOSTILE, "message": HOSTILE, "line_no": 3}},
    )
    code, text, err = issue(run)
    assert code == 0, err
    headings, raw = html_of(text)
    assert all(h.startswith(("Launch fails with", "Environment", "Command", "`")) for h in headings), headings
    assert len(headings) == 4
    assert {piece.split()[0] for piece in raw} <= OURS, raw
    assert "\x1b" not in text and "\\x1b[2J" in text
    tokens = MarkdownIt("commonmark").parse(text)
    inline = [c for t in tokens for c in (t.children or [])]
    prose = " ".join(c.content for c in inline if c.type == "text")  # code spans and blocks mention no one
    assert "@octocat" not in prose and "#1 " not in prose and "@\u200boctocat" in html.unescape(prose)
    assert not any(c.type in ("link_open", "image") for c in inline)
    fences = [t for t in tokens if t.type == "fence"]
    assert any(HOSTILE.split("\n")[0].replace("\x1b", "\\x1b") in f.content for f in fences)  # inside its block


def test_an_issue_past_githubs_limit_is_cut_keeping_what_decides(failed_run: Path, tmp_path: Path) -> None:
    dists = [{"name": f"package-{i:05d}", "version": "1.0.0" * 20} for i in range(5000)]
    hang = {"pid": 1, "name": "w", "thread": "MainThread", "frames": ["f" * 5000] * 40, "site": "x"}
    run = copy_with(failed_run, tmp_path, environment(dists), {"hang": hang})
    code, text, err = issue(run)
    assert code == 0, err
    assert len(text) <= MAX_BODY
    assert text.startswith("## Launch fails with failed:oom") and "### Command" in text
    assert "torch.OutOfMemoryError: CUDA out of memory." in text  # the deciding line, in context
    assert "more lines left out: GitHub takes 65,536 characters" in text
    assert "package-00000==" in text and "package-04999==" not in text  # the package list is cut first
    headings, _ = html_of(text)
    assert headings[0].startswith("Launch fails with") and "Command" in headings
    assert len([t for t in MarkdownIt("commonmark").parse(text) if t.type == "fence"]) >= 3  # every block closed


def test_a_one_megabyte_line_is_clipped_in_the_issue(failed_run: Path, tmp_path: Path) -> None:
    run = copy_with(failed_run, tmp_path, record={"reason": "x" * (1 << 20)})
    code, text, _ = issue(run)
    assert code == 0 and len(text) < 20_000


@pytest.mark.parametrize(
    "manifest",
    [
        {"cells": "broken"},
        {"environment": {"python": "not a mapping"}},
        {"environment": {"python": {"distributions": [1, 2]}}},
        {"environment": {"gpus": "x"}},
    ],
)
def test_a_manifest_the_other_formats_refuse_is_refused_alike(
    failed_run: Path, tmp_path: Path, manifest: dict[str, Any]
) -> None:
    run = copy_with(failed_run, tmp_path, manifest)
    said = {}
    for fmt in ("table", "html", "issue"):
        done = run_cli("report", str(run), "--format", fmt, cwd=tmp_path)
        assert done.returncode == 2 and "Traceback" not in done.stderr, (fmt, done.stderr)
        said[fmt] = done.stderr.strip().splitlines()[-1]
    assert len(set(said.values())) == 1 and "manifest.json: field '" in said["issue"], said
