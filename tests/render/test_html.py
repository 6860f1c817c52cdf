"""The HTML report from run directories made by hand: self-contained, small, escaped, laid out."""

from __future__ import annotations

import re
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

from diagbench.judge.view import view_of
from diagbench.records.manifest import Manifest, PlannedEntry
from diagbench.records.record import AttemptRecord, PhaseChange
from diagbench.records.store import RunDir, load_run
from diagbench.render.grid import build_grid, split_axes
from diagbench.render.html import render_html
from diagbench.render.htmlkit import el, text
from diagbench.render.timeline import segments
from diagbench.spec.hypotheses import Condition, Hypothesis, hypotheses_sha256
from diagbench.vocab import Evidence, Outcome

HOSTILE = '<script>alert("x")</script> [rank0]: </pre> & "quotes" \x1b[31m'
HYP = Hypothesis(
    "bs-matters",
    "Large batch sizes fail to capture.",
    {"bs": ("64",)},
    (Condition(Outcome.FAILED),),
    (Condition(Outcome.READY),),
    {"supported": "cap the batch size", "refuted": "batch size is not it"},
)


class Elements(HTMLParser):
    """Counts tags and collects attributes, as a browser's parser would see them."""

    def __init__(self) -> None:
        super().__init__()
        self.tags: list[tuple[str, dict[str, str | None]]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))

    def count(self, tag: str, cls: str | None = None) -> int:
        return sum(1 for t, a in self.tags if t == tag and (cls is None or cls in (a.get("class") or "").split()))


def parse(page: str) -> Elements:
    parser = Elements()
    parser.feed(page)
    return parser


def sglang_phases(buckets: int) -> list[PhaseChange]:
    """SGLang's start-up as its log shows it: load, capture begin, a phase per batch-size bucket, warm-up."""
    bars = [PhaseChange(f"capture bs={8 * (buckets - i)}", round(5.1 + i * 0.07, 3)) for i in range(buckets)]
    return [PhaseChange("load", 1.0), PhaseChange("capture", 5.0), *bars, PhaseChange("warm-up", 9.5)]


def make_run(
    folder: Path, cells: int, repeats: int, log_line_mb: float = 0, phases: list[PhaseChange] | None = None
) -> Path:
    """A run of `cells` batch sizes x 2 modes, `repeats` each, with phases, hostile log text
    and (optionally) a huge line just before the first few deciding lines."""
    run = RunDir(folder / "made")
    (run.path / "cells").mkdir(parents=True)
    attempts: list[dict[str, Any]] = []
    records: list[AttemptRecord] = []
    for c in range(cells):
        for mode in ("eager", "compile"):
            params = {"bs": str(2**c), "mode": mode}
            cell_id = f"bs={2**c},mode={mode}"
            for rep in range(1, repeats + 1):
                name = f"{len(attempts) + 1:03d}-bs-{2**c}.mode-{mode}-r{rep}"
                attempts.append({"attempt": name, "cell_id": cell_id, "repeat": rep, "params": params})
                failed = mode == "compile" and rep % 2 == 0
                records.append(
                    AttemptRecord(
                        cell_id=cell_id,
                        repeat=rep,
                        attempt=name,
                        params=params,
                        command=["srv", "--bs", str(2**c)],
                        env_changes={"MODE": mode},
                        outcome=Outcome.FAILED if failed else Outcome.READY,
                        failure_class="oom" if failed else None,
                        evidence=Evidence(40, ("x" * 5000) + HOSTILE),
                        phases=phases or [PhaseChange("load", 1.0), PhaseChange("capture bs=8", 5.0 + c)],
                        time_to_outcome_s=10.0 + c,
                        duration_s=11.0 + c,
                        log_lines=41,
                    )
                )
    run.write_manifest(
        Manifest.from_json(
            {
                "run_id": "made",
                "spec": {"name": "made", "description": "Made by hand."},
                "spec_sha256": "ab" * 32,
                "hypotheses": [HYP.to_json()],
                "hypotheses_sha256": hypotheses_sha256([HYP]),
                "cells": [],
                "attempts": attempts,
                "provenance": {"hostname": "gpu-7", "gpus": [{"name": "NVIDIA H200", "driver": "580.1"}]},
            }
        )
    )
    huge = "y" * int(log_line_mb * 1024 * 1024)
    for n, r in enumerate(records):
        run.write_result(r)
        lines = [f"line {i} {HOSTILE}" for i in range(1, 39)] + [
            huge if n < 5 else "",
            r.evidence.text if r.evidence else "",
            "after",
        ]
        (run.cells / r.attempt / "server.log").write_text("\n".join(lines) + "\n")
    return run.path


def test_a_100_attempt_run_is_one_self_contained_page_under_a_megabyte(tmp_path):
    phases = sglang_phases(57)  # 60 phases each, as SGLang logs them: a piece per bucket made it 1.4 MB
    assert len(phases) == 60
    page = render_html(view_of(load_run(make_run(tmp_path, cells=5, repeats=10, log_line_mb=1, phases=phases))))
    size = len(page.encode())
    assert size < 1_000_000, size
    tags = parse(page)
    assert tags.count("details", "attempt") == 100
    assert tags.count("svg", "bar") == 100
    assert tags.count("svg", "seg") == 100 * 5  # launch, load, capture, warm-up, teardown
    assert page.count("<title>capture bs=456..8, 57 buckets: 5.00 s → 9.50 s (4.50 s)</title>") == 100
    assert page.count("capture bs=232 7.06 s") == 100  # the attempt's details still list every phase
    assert tags.count("script") == 1 and tags.count("style") == 1  # inline, and nothing else
    for tag, attrs in tags.tags:
        for name in ("src", "href"):  # nothing to fetch: links point inside the page or the run directory
            value = attrs.get(name) or ""
            assert not re.match(r"[a-z]+:", value), (tag, attrs)
    assert not any(t in ("img", "link", "iframe", "object", "embed") for t, _ in tags.tags)
    policy = next(a["content"] for t, a in tags.tags if t == "meta" and a.get("http-equiv"))
    assert policy.startswith("default-src 'none';")


def test_log_text_stays_text(tmp_path):
    page = render_html(view_of(load_run(make_run(tmp_path, cells=1, repeats=1))))
    assert '<script>alert("x")' not in page and "</pre> &" not in page
    assert "&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;" in page or "&lt;script&gt;alert" in page
    assert "\x1b" not in page


def test_the_deciding_line_opens_with_the_lines_before_it(tmp_path):
    page = render_html(view_of(load_run(make_run(tmp_path, cells=1, repeats=1))))
    hit = re.search(r'<span class="hit">\s*40 \| (.*?)\n</span>', page)
    assert hit is not None and hit.group(1).startswith("xxxx") and hit.group(1).endswith("…")
    assert "    35 | line 35" in page and "    41 | after" in page and "    34 | " not in page


def test_repeats_read_k_of_n_and_stripe_the_cell(tmp_path):
    view = view_of(load_run(make_run(tmp_path, cells=2, repeats=4)))
    grid = build_grid(view.planned, view.records)
    assert (grid.row_axes, grid.col_axes) == (("bs",), ("mode",))
    mixed = grid.cells[(("1",), ("compile",))]
    assert mixed.counts == (("ready", 2), ("failed:oom", 2))
    page = render_html(view)
    assert "ready 2/4" in page and "failed:oom 2/4" in page and "ready 4/4" in page
    assert "linear-gradient(90deg, var(--ready) 0.0% 50.0%, var(--failed) 50.0% 100.0%)" in page


def test_axes_split_into_rows_and_columns_that_read_as_a_grid():
    two = {"kernel": ["a", "b"], "compile": ["on", "off"]}
    assert split_axes(two) == (("kernel",), ("compile",))
    four = {"kernel": ["a", "b"], "compile": ["on", "off"], "graphs": ["x", "y"], "warmup": ["e", "f"]}
    assert split_axes(four) == (("kernel", "compile"), ("graphs", "warmup"))
    assert split_axes({"bs": [str(i) for i in range(20)]}) == (("bs",), ())
    wide = {"mode": ["a", "b"], "bs": [str(i) for i in range(12)]}  # 12 columns would not fit: bs goes down
    assert split_axes(wide) == (("bs",), ("mode",))
    three = {"a": ["1", "2", "3"], "b": ["1", "2"], "c": ["1", "2", "3"]}
    assert split_axes(three) == (("a", "b"), ("c",))


def test_an_axis_with_one_label_is_said_once_not_drawn():
    planned = [PlannedEntry(f"00{i}", f"k={k},bs=32", 1, {"k": k, "bs": "32"}) for i, k in enumerate(("a", "b"))]
    grid = build_grid(planned, [])
    assert grid.row_axes == ("k",) and grid.col_axes == () and grid.constants == (("bs", "32"),)


def test_a_timeline_is_split_at_each_phase_change_then_teardown():
    r = AttemptRecord(
        cell_id="a=1",
        repeat=1,
        attempt="001",
        params={},
        command=[],
        env_changes={},
        outcome="failed",
        phases=[PhaseChange("load", 0.5), PhaseChange("capture", 2.0), PhaseChange("capture bs=8", 3.0)],
        time_to_outcome_s=3.5,
        duration_s=4.0,
    )
    assert [(s.name, s.start, s.end, s.kind) for s in segments(r)] == [
        ("launch", 0.0, 0.5, "start"),
        ("load", 0.5, 2.0, "phase"),
        ("capture", 2.0, 3.0, "phase"),
        ("capture bs=8", 3.0, 3.5, "phase"),
        ("teardown", 3.5, 4.0, "teardown"),
    ]


def test_a_run_of_capture_buckets_is_one_piece_that_names_them():
    def record(phases: list[PhaseChange]) -> AttemptRecord:
        return AttemptRecord(
            cell_id="a=1",
            repeat=1,
            attempt="001",
            params={},
            command=[],
            env_changes={},
            outcome=Outcome.READY,
            phases=phases,
            time_to_outcome_s=10.0,
        )

    folded = segments(record(sglang_phases(36)))
    assert [(s.name, s.start, s.end, s.note) for s in folded] == [
        ("launch", 0.0, 1.0, ""),
        ("load", 1.0, 5.0, ""),
        ("capture", 5.0, 9.5, "capture bs=288..8, 36 buckets"),
        ("warm-up", 9.5, 10.0, ""),
    ]
    # buckets apart from each other fold apart; a phase between them stays its own piece
    apart = [PhaseChange(n, t) for t, n in enumerate(["capture bs=8", "capture bs=4", "compile", "capture bs=2"], 1)]
    assert [(s.name, s.note) for s in segments(record(apart))] == [
        ("launch", ""),
        ("capture", "capture bs=8..4, 2 buckets"),
        ("compile", ""),
        ("capture bs=2", ""),
    ]


def test_a_record_from_before_phase_timelines_draws_one_piece_named_for_its_last_phase():
    r = AttemptRecord(
        cell_id="a=1",
        repeat=1,
        attempt="001",
        params={},
        command=[],
        env_changes={},
        outcome="ready",
        phase="warm-up",
        time_to_outcome_s=66.0,
        duration_s=66.2,
    )
    assert [(s.name, s.kind) for s in segments(r)] == [("… warm-up", "unknown"), ("teardown", "teardown")]


def test_the_builder_escapes_every_string_it_is_given():
    assert el("a", {"title": '"><b>'}, "<i>") == '<a title="&quot;&gt;&lt;b&gt;">&lt;i&gt;</a>'
    assert text("a\x00b\x1bc\td") == "abc\td"


def test_the_committed_gpu_run_renders_its_verdicts_and_every_attempt():
    run = Path(__file__).resolve().parents[2] / "runs" / "refserver-capture-h200-fresh-caches"
    view = view_of(load_run(run))
    page = render_html(view)
    tags = parse(page)
    assert tags.count("svg", "bar") == 12 and tags.count("td", "cell") == 16  # 12 cells and 4 excluded
    for v in view.verdicts:
        assert f"badge v-{v.verdict.value}" in page and v.id in page


def test_attempts_that_did_not_run_say_why_and_draw_no_bar(tmp_path):
    run = RunDir(tmp_path / "idle")
    (run.path / "cells").mkdir(parents=True)
    words = {"skipped": "cannot change a verdict", "cancelled": "interrupted", "internal_error": "diagbench failed: X"}
    attempts: list[dict[str, Any]] = []
    records: list[AttemptRecord] = []
    for i, (outcome, reason) in enumerate(words.items(), 1):
        name = f"00{i}-k-{outcome}-r1"
        attempts.append({"attempt": name, "cell_id": f"k={outcome}", "repeat": 1, "params": {"k": outcome}})
        records.append(
            AttemptRecord(
                cell_id=f"k={outcome}",
                repeat=1,
                attempt=name,
                params={"k": outcome},
                command=[],
                env_changes={},
                outcome=outcome,
                reason=reason,
            )
        )
    run.write_manifest(Manifest.from_json({"run_id": "idle", "spec": {"name": "idle"}, "attempts": attempts}))
    for r in records:
        run.write_result(r)
    page = render_html(view_of(load_run(run.path)))
    tags = parse(page)
    assert tags.count("svg", "bar") == 0 and tags.count("details", "attempt") == 3
    for outcome, reason in words.items():
        assert f'<span class="notrun">{reason}</span>' in page
        assert f'<td class="cell o-{outcome}"' in page
    assert "hypotheses sha256" not in page  # no hypotheses, no hash to vouch for


def test_the_log_lines_around_a_deciding_line_never_show_a_secret(tmp_path):
    path = make_run(tmp_path, cells=1, repeats=1)
    log = next(path.glob("cells/*/server.log"))
    lines = log.read_text().splitlines()
    lines[37] = "export HF_TOKEN=hf_abcdefghijklmnopqrstuvwx and --api-key sk-abcdefghijklmnopqrstuv"
    log.write_text("\n".join(lines) + "\n")
    page = render_html(view_of(load_run(path)))
    assert "    38 | export HF_TOKEN=" in page
    assert "hf_abcdefghij" not in page and "sk-abcdefghij" not in page


def test_the_committed_isolation_leads_with_its_culprit_and_steps():
    from diagbench.render.reports import report_html
    from diagbench.reports.read import ReportRequest, read_report
    from diagbench.vocab import ReportFormat

    run = Path(__file__).resolve().parents[2] / "runs" / "refserver-isolate-h200"
    report = read_report(ReportRequest(run, ReportFormat.HTML))
    isolation = report.isolation
    assert isolation is not None
    culprit = "culprit: --warmup (good: every, bad: first), --enable-torch-compile (good: -, bad: on)"
    for page in (report_html(report), (run / "report.html").read_text()):
        tags = parse(page)
        assert tags.count("section") and ("section", {"id": "isolation"}) in tags.tags
        assert culprit in page and "target: failed:cuda_graph_capture (what the bad launch did)" in page
        assert tags.count("table", "steps") == 1 and page.count('class="badge v-') == len(isolation.steps)
        assert "6 of 6 attempt(s) recorded" in page and tags.count("svg", "bar") == 6


def test_a_hang_across_ranks_draws_a_lane_per_rank_the_odd_one_marked():
    from diagbench.records.parts import Hang, RankWait
    from diagbench.render.timeline import Scale, lanes

    ranks = (RankWait(0, 11, "all_reduce (w.py:22)"), RankWait(1, 12, "time.sleep (w.py:19)"))
    hang = Hang(11, "python", "MainThread (11)", (), "all_reduce in w.py:work", ranks=ranks, odd_ranks=(1,))
    r = AttemptRecord(
        cell_id="a=1",
        repeat=1,
        attempt="001",
        params={},
        command=[],
        env_changes={},
        outcome="timeout",
        time_to_outcome_s=10.0,
        duration_s=11.0,
        stalled=True,
        stalled_after_s=4.0,
        hang=hang,
    )
    page = Elements()
    page.feed("".join(str(h) for h in lanes(r, Scale(10.0))))
    svgs = [a for tag, a in page.tags if tag == "svg" and "lane" in (a.get("class") or "")]
    assert [a["class"] for a in svgs] == ["lane", "lane odd"]
    assert [a["aria-label"] for a in svgs] == [
        "rank 0 lane, all_reduce (w.py:22)",
        "rank 1 lane, odd: time.sleep (w.py:19)",
    ]
    pieces = [
        (a["x"], a["width"], a["class"]) for tag, a in page.tags if tag == "svg" and "seg" in (a.get("class") or "")
    ]
    assert pieces[:2] == [("0.0%", "60.0%", "seg run"), ("60.0%", "40.0%", "seg wait")]  # quiet from 6 s to 10 s
    assert (
        lanes(
            AttemptRecord(cell_id="a", repeat=1, attempt="2", params={}, command=[], env_changes={}, outcome="timeout"),
            Scale(1),
        )
        == []
    )
