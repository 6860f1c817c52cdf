"""A real run's report.html, loaded by headless Chromium: what it rendered, what it logged, what it fetched.

Skipped only off CI when Chromium is missing; in CI (`CI` set) a missing browser fails
the test: `.ci/browser.sh` installs it.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

from browser import Browser, chromium_path
from conftest import fake_command, run_cli

READY = "The server is fired up and ready to roll!"


@pytest.fixture(scope="module")
def chromium() -> str:
    path = chromium_path()
    if path is None:
        if os.environ.get("CI"):
            pytest.fail("chromium is missing in CI: .ci/run must call .ci/browser.sh")
        pytest.skip("chromium is not installed (bash .ci/browser.sh installs it)")
    return path


@pytest.fixture(scope="module")
def real_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A 2 x 2 matrix, two repeats each, of a fake server that goes through SGLang's phases."""
    folder = tmp_path_factory.mktemp("browser-run")
    base = fake_command(
        "out=Load weight begin. avail mem=10 GB",
        "sleep=0.3",
        "out=Capture cuda graph begin. avail mem=9 GB",
        "sleep=0.2",
    )
    spec = folder / "spec.yaml"
    spec.write_text(
        f"""
name: browser
description: Does <b>capture</b> survive a large batch? & "quotes"
server:
  command: {json.dumps(base)}
  timeout: 20s
  grace: 2s
matrix:
  mode:
    args: ["{{value}}", "hang"]
    values:
      good: "out={READY}"
      bad: "err=torch.OutOfMemoryError: CUDA out of memory. <script>alert(1)</script>"
  bs: {{env: BS, values: ["8", "64"]}}
expect:
  - {{when: {{mode: good}}, outcome: ready}}
hypotheses:
  - id: good-comes-up
    claim: The good mode comes up at every batch size.
    when: {{mode: good}}
    supported_if: ready
    refuted_if: failed
    meaning: {{supported: the good mode is sound}}
  - id: bad-is-oom
    claim: The bad mode dies of CUDA OOM.
    when: {{mode: bad}}
    supported_if: failed:oom
    refuted_if: ready
    meaning: {{supported: "it is memory, not capture"}}
"""
    )
    done = run_cli("run", str(spec), "--runs-dir", str(folder / "runs"), "--repeat", "2", timeout=180, cwd=folder)
    assert done.returncode == 0, done.stdout + done.stderr
    return (folder / "runs" / "latest").resolve()


COUNTS = """JSON.stringify({
  bars: document.querySelectorAll('svg.bar').length,
  segments: document.querySelectorAll('svg.bar svg.seg').length,
  cells: document.querySelectorAll('td.cell').length,
  cellTexts: [...document.querySelectorAll('td.cell')].map(td => td.innerText.trim()),
  verdicts: [...document.querySelectorAll('tr.verdict')].map(tr => [tr.querySelector('strong').innerText,
      tr.querySelector('.badge').innerText]),
  barWidth: document.querySelector('svg.bar').getBoundingClientRect().width,
  title: document.querySelector('h1').innerText,
  description: document.querySelector('.description').innerText,
  scripts: document.scripts.length,
  open: document.querySelectorAll('details[open]').length,
})"""


def test_chromium_renders_every_attempt_cell_and_verdict_without_errors_or_fetches(chromium, real_run, tmp_path):
    report = real_run / "report.html"
    verdicts = json.loads((real_run / "verdicts.json").read_text())
    browser = Browser(tmp_path / "profile")
    try:
        page = browser.page(report.as_uri())
        seen = json.loads(page.evaluate(COUNTS))
        shot = page.screenshot(tmp_path / "report.png")  # kept with the test's files, like a CI artifact

        assert seen["bars"] == 8  # 4 cells x 2 repeats, one timeline bar each
        assert seen["segments"] >= 8 * 3  # launch, load, capture at least, then teardown
        assert seen["cells"] == 4
        assert sorted(seen["cellTexts"]) == ["failed:oom 2/2"] * 2 + ["ready 2/2"] * 2
        assert seen["verdicts"] == [[v["id"], v["verdict"]] for v in verdicts]
        assert seen["verdicts"] == [["good-comes-up", "supported"], ["bad-is-oom", "supported"]]
        assert seen["barWidth"] > 300  # the bars have room on a laptop-sized window
        assert seen["title"] == "browser"
        assert seen["description"] == 'Does <b>capture</b> survive a large batch? & "quotes"'  # text, not markup
        assert seen["scripts"] == 1 and seen["open"] == 0
        assert page.problems() == []
        assert page.requests() == [report.as_uri()]  # the page fetched nothing but itself
        assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and shot.stat().st_size > 20_000

        # a grid cell opens its attempt's timeline, with the deciding line and the log around it
        opened = page.evaluate(
            "document.querySelector('td.cell.o-failed a').click();"
            "new Promise(r => setTimeout(() => r(document.querySelector('details[open]').innerText), 100))"
        )
        assert "torch.OutOfMemoryError: CUDA out of memory. <script>alert(1)</script>" in opened
        assert "Load weight begin" in opened and "capture" in opened
        assert (
            page.evaluate(
                "document.querySelector('[data-toggle-all=open]').click();"
                "document.querySelectorAll('details[open]').length"
            )
            == 8
        )
        assert page.problems() == []
    finally:
        browser.close()


def test_the_report_command_writes_the_same_page(real_run):
    done = run_cli("report", str(real_run), "--format", "html", timeout=60)
    assert done.returncode == 0
    assert done.stdout == (real_run / "report.html").read_text()


@pytest.fixture(scope="module")
def ranks_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A launch of three ranks (RANK in each child's environment) where rank 1 never gets to
    the collective the others wait in: stalled, its stacks read by rank."""
    folder = tmp_path_factory.mktemp("browser-ranks")
    rankfake = Path(__file__).resolve().parent.parent / "rankfake.py"
    command = [sys.executable, str(rankfake), "3", "1"]
    server = {"command": command, "ready": {"log": "never ready"}, "timeout": "60s", "stall": "1.5s", "grace": "2s"}
    spec = folder / "spec.yaml"
    spec.write_text(json.dumps({"name": "ranks", "server": server, "matrix": {"only": {"env": "X", "values": ["x"]}}}))
    done = run_cli("run", str(spec), "--runs-dir", str(folder / "runs"), timeout=120, cwd=folder)
    assert done.returncode == 0, done.stdout + done.stderr  # no expect: a timeout is an outcome, not a failure
    return (folder / "runs" / "latest").resolve()


LANES = """JSON.stringify({
  lanes: [...document.querySelectorAll('svg.lane')].map(s => [s.getAttribute('class'), s.getAttribute('aria-label')]),
  sites: [...document.querySelectorAll('.lane-site')].map(s => s.innerText),
  laneWidth: document.querySelector('svg.lane').getBoundingClientRect().width,
  barWidth: document.querySelector('svg.bar').getBoundingClientRect().width,
  waitLeft: document.querySelector('svg.lane svg.seg.wait').getBoundingClientRect().left,
  barLeft: document.querySelector('svg.bar').getBoundingClientRect().left,
})"""


def test_chromium_draws_a_lane_per_rank_under_the_hung_attempts_bar(chromium, ranks_run, tmp_path):
    report = ranks_run / "report.html"
    browser = Browser(tmp_path / "profile")
    try:
        page = browser.page(report.as_uri())
        seen = json.loads(page.evaluate(LANES))
        assert [c for c, _ in seen["lanes"]] == ["lane", "lane odd", "lane"]
        assert seen["lanes"][1][1].startswith("rank 1 lane, odd: time.sleep (rankfake.py:")
        assert seen["sites"][1].startswith("elsewhere: time.sleep")
        assert all(s.startswith("threading.Lock.acquire (rankfake.py:") for s in (seen["sites"][0], seen["sites"][2]))
        assert abs(seen["laneWidth"] - seen["barWidth"]) < 1  # the lanes share the bar's column and scale
        assert seen["waitLeft"] > seen["barLeft"]  # the wait starts when the quiet window began, not at launch
        assert page.problems() == []
        assert page.requests() == [report.as_uri()]
    finally:
        browser.close()
