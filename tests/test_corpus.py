"""The corpus: real launch logs from public threads (tests/corpus), each labelled by hand.

Every log is classified as `classify` would; the score by server and the confusion by
outcome and class are printed, and the test holds the line: at least 95% right, and not
one failed or stalled launch called ready. `python tests/test_corpus.py` prints the same.

A log is right when its outcome matches (a `timeout` label, a log that stops with no
error, is `unknown` offline) and, for a failure, its class does.
"""

from __future__ import annotations

import sys
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from diagbench.logs.classify import Classification, classify_file
from diagbench.logs.scan import hyperscan
from diagbench.logs.signatures import builtin_packs, load_packs

CORPUS = Path(__file__).parent / "corpus"
ITEMS: list[dict[str, Any]] = yaml.safe_load((CORPUS / "labels.yaml").read_text())["items"]
SIGS = load_packs(builtin_packs(), Path("."))
TARGET = 0.95


@dataclass(frozen=True)
class Scored:
    item: dict[str, Any]
    got: Classification

    @property
    def want(self) -> str:
        outcome = "unknown" if self.item["outcome"] == "timeout" else self.item["outcome"]
        return f"failed:{self.item['failure_class']}" if outcome == "failed" else outcome

    @property
    def label(self) -> str:
        return f"failed:{self.got.failure_class}" if self.got.outcome == "failed" else self.got.outcome

    @property
    def right(self) -> bool:
        return self.want == self.label


def score(engine: str = "auto") -> list[Scored]:
    return [Scored(item, classify_file(CORPUS / item["file"], SIGS, engine)) for item in ITEMS]


def report(scored: list[Scored]) -> str:
    """The score by server, the confusion (label -> what classify said), and the servers detected."""
    lines = ["corpus: right / logs, by server"]
    for server in sorted({s.item["server"] for s in scored}):
        mine = [s for s in scored if s.item["server"] == server]
        lines.append(f"  {server:9} {sum(s.right for s in mine):3d} / {len(mine):3d}")
    right = sum(s.right for s in scored)
    lines.append(f"  {'all':9} {right:3d} / {len(scored):3d}  ({right / len(scored):.1%})")
    lines.append("confusion: label -> classified (count)")
    for (want, label), count in sorted(Counter((s.want, s.label) for s in scored).items()):
        lines.append(f"  {'  ' if want == label else '!='} {want:28} -> {label:28} {count:3d}")
    lines.append("misses:")
    lines += [
        f"  {s.item['id']} {s.item['source']}: {s.want} -> {s.label} ({s.got.signature})" for s in scored if not s.right
    ]
    detected = Counter((s.item["server"], s.got.server or "-") for s in scored)
    lines.append("server detected: " + ", ".join(f"{a}->{b} {n}" for (a, b), n in sorted(detected.items())))
    return "\n".join(lines)


@pytest.fixture(scope="module")
def scored() -> list[Scored]:
    return score()


def test_corpus_score(scored: list[Scored], capsys: pytest.CaptureFixture[str]) -> None:
    text = report(scored)
    with capsys.disabled():
        print("\n" + text)
    assert sum(s.right for s in scored) >= TARGET * len(scored), text


def test_no_failed_or_stalled_launch_is_called_ready(scored: list[Scored]) -> None:
    called_ready = [s.item["id"] for s in scored if s.got.outcome == "ready" and s.item["outcome"] != "ready"]
    assert called_ready == []


def test_the_server_given_never_turns_a_failed_launch_into_ready() -> None:
    for item in ITEMS:
        if item["outcome"] != "ready":
            got = classify_file(CORPUS / item["file"], SIGS, server=item["server"])
            assert got.outcome != "ready", item["id"]


def test_a_detected_server_is_the_labelled_one(scored: list[Scored]) -> None:
    """Detection names no server rather than a wrong one (Triton serving TensorRT-LLM with no
    TensorRT-LLM line in the excerpt is Triton's log as far as it can tell)."""
    wrong = [
        (s.item["id"], s.item["server"], s.got.server) for s in scored if s.got.server not in (None, s.item["server"])
    ]
    assert len(wrong) <= 1, wrong
    assert sum(s.got.server == s.item["server"] for s in scored) >= 0.75 * len(scored)


@pytest.mark.skipif(hyperscan is None, reason="hyperscan not installed")
def test_both_engines_classify_the_corpus_alike(scored: list[Scored]) -> None:
    slow = score("re")
    assert [(s.label, s.got.line_no, s.got.server) for s in slow] == [
        (s.label, s.got.line_no, s.got.server) for s in scored
    ]


def test_the_corpus_is_whole() -> None:
    assert sorted(p.name for p in (CORPUS / "logs").glob("*.log")) == sorted(Path(i["file"]).name for i in ITEMS)
    for item in ITEMS:
        text = (CORPUS / item["file"]).read_text(encoding="utf-8", errors="replace")
        assert item["proof"] in text, item["id"]
        assert item["source"] and item["url"].startswith("https://github.com/"), item["id"]


if __name__ == "__main__":
    print(report(score(sys.argv[1] if len(sys.argv) > 1 else "auto")))
