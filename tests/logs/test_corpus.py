"""The corpus: real launch logs from public threads (tests/corpus), each labelled by hand.

Every log is classified as `classify` would; the score by server and the confusion by
outcome and class are printed, and the test holds the line: at least 95% right, and not
one failed or stalled launch called ready. `python tests/logs/test_corpus.py` prints the same.

A log is right when its outcome matches (a `timeout` label, a log that stops with no
error, is `unknown` offline) and, for a failure, its class does.

Some signatures were written from these very logs, and their `source:` cites the log's
thread. The held-out figure, printed beside the score, classifies each log without the
signatures that cite its own thread: a log only such a signature gets right counts wrong,
so a signature fitted to a log earns nothing on it.
"""

from __future__ import annotations

import re
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

CORPUS = Path(__file__).parents[1] / "corpus"
ITEMS: list[dict[str, Any]] = yaml.safe_load((CORPUS / "labels.yaml").read_text())["items"]
SIGS = load_packs(builtin_packs(), Path("."))
TARGET = 0.95  # the first 92 logs
WHOLE_FLOOR = 0.95  # the whole corpus with batch 2 (issue 21 aims at 0.97: not reached yet)
HELD_OUT_FLOOR = 0.90  # leave-thread-out on the whole corpus
CITATION = re.compile(
    r"([A-Za-z][\w./-]*)?(?: ?PR)?#(\d+)"
)  # "vllm#7800", "sgl-project/sglang#552", "sglang PR#10062", "#5828"
SHORT_NAMES = {"trt-llm": "tensorrt-llm", "tgi": "text-generation-inference"}  # as the packs abbreviate them


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


def _repo(name: str) -> str:
    base = name.rsplit("/", 1)[-1].lower()
    return SHORT_NAMES.get(base, base)


def cited_threads(source: str) -> set[str]:
    """The threads a signature's `source:` names, as `repo#N`; a bare `#N` is in the
    repository named before it: "L vllm#7800, #5828" is vllm#7800 and vllm#5828."""
    found: set[str] = set()
    repo = None
    for name, number in CITATION.findall(source):
        if name and name != "PR":
            repo = _repo(name)
        if repo is not None:
            found.add(f"{repo}#{number}")
    return found


def thread_of(item: dict[str, Any]) -> str:
    repo, number = item["source"].split("#")
    return f"{_repo(repo)}#{number}"


def fitted(item: dict[str, Any]) -> set[str]:
    """The signatures whose source cites this log's own thread."""
    return {sig.id for sig in SIGS if thread_of(item) in cited_threads(sig.source)}


def held_out(scored: list[Scored]) -> list[Scored]:
    """Each log classified again without the signatures that cite its own thread. The `re`
    engine, because each log has its own set (a hyperscan database costs ~0.2 s to build;
    the engines are held to the same answers below)."""
    out = []
    for s in scored:
        drop = fitted(s.item)
        if not drop:
            out.append(s)
            continue
        rest = [sig for sig in SIGS if sig.id not in drop]
        out.append(Scored(s.item, classify_file(CORPUS / s.item["file"], rest, "re")))
    return out


def report(scored: list[Scored], held: list[Scored]) -> str:
    """The score by server beside the held-out one, the confusion (label -> what classify
    said), the misses, what holding out loses, and the servers detected."""
    lines = ["corpus: right / logs, by server (held out: without the signatures citing the log)"]
    for server in sorted({s.item["server"] for s in scored}):
        mine = [i for i, s in enumerate(scored) if s.item["server"] == server]
        right, kept = sum(scored[i].right for i in mine), sum(held[i].right for i in mine)
        lines.append(f"  {server:9} {right:3d} / {len(mine):3d}   held out {kept:3d}")
    right, kept, n = sum(s.right for s in scored), sum(s.right for s in held), len(scored)
    lines.append(f"  {'all':9} {right:3d} / {n:3d}   held out {kept:3d}   ({right / n:.1%}, held out {kept / n:.1%})")
    lines.append("confusion: label -> classified (count)")
    for (want, label), count in sorted(Counter((s.want, s.label) for s in scored).items()):
        lines.append(f"  {'  ' if want == label else '!='} {want:28} -> {label:28} {count:3d}")
    lines.append("misses:")
    lines += [
        f"  {s.item['id']} {s.item['source']}: {s.want} -> {s.label} ({s.got.signature})" for s in scored if not s.right
    ]
    lines.append("lost when held out (the signature that got it right -> what is left):")
    lines += [
        f"  {s.item['id']} {s.item['source']}: {s.got.signature} -> {h.label} ({h.got.signature})"
        for s, h in zip(scored, held, strict=True)
        if s.right and not h.right
    ]
    detected = Counter((s.item["server"], s.got.server or "-") for s in scored)
    lines.append("server detected: " + ", ".join(f"{a}->{b} {n}" for (a, b), n in sorted(detected.items())))
    return "\n".join(lines)


@pytest.fixture(scope="module")
def scored() -> list[Scored]:
    return score()


@pytest.fixture(scope="module")
def held(scored: list[Scored]) -> list[Scored]:
    return held_out(scored)


def test_corpus_score(scored: list[Scored], held: list[Scored]) -> None:
    """The report is printed only when this fails (or when run as a script)."""
    text = report(scored, held)
    first = [s for s in scored if not s.item["id"].startswith("b2-")]
    assert sum(s.right for s in first) >= TARGET * len(first), text
    assert sum(s.right for s in scored) >= WHOLE_FLOOR * len(scored), text
    assert sum(h.right for h in held) >= HELD_OUT_FLOOR * len(held), text


def test_cited_threads_reads_the_packs_citations() -> None:
    source = "vllm worker.py (V vllm 0.4.2 worker.py:335; L vllm#10439, #27508, TRT-LLM#9263, sglang PR#10062)"
    assert cited_threads(source) == {"vllm#10439", "vllm#27508", "tensorrt-llm#9263", "sglang#10062"}
    assert cited_threads("L opea GenAIExamples#1991, tgi#563") == {
        "genaiexamples#1991",
        "text-generation-inference#563",
    }
    assert cited_threads("V ggerganov/llama.cpp c392e5094 examples/server/server.cpp:4497") == set()


def test_held_out_uses_no_signature_that_cites_the_log(held: list[Scored]) -> None:
    """The figure is only as good as the reading of the citations: the packs do cite corpus
    threads (were none read, held out would quietly equal the score), and no held-out
    decision is by a signature citing the log it decides."""
    assert len({thread_of(item) for item in ITEMS}) == len(ITEMS)
    assert sum(bool(fitted(item)) for item in ITEMS) >= 10
    assert [h.item["id"] for h in held if h.got.signature in fitted(h.item)] == []


def test_no_failed_or_stalled_launch_is_called_ready(scored: list[Scored], held: list[Scored]) -> None:
    """Not with every signature, nor leaving a log's own thread out."""
    for some in (scored, held):
        called_ready = [s.item["id"] for s in some if s.got.outcome == "ready" and s.item["outcome"] != "ready"]
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
        (s.item["id"], s.item["server"], s.got.server)
        for s in scored
        if s.got.server not in (None, s.item["server"]) and s.item["server"] != "other"  # vLLM's forks are vLLM's
    ]
    assert len(wrong) <= 2, wrong
    known = [s for s in scored if s.item["server"] != "other"]  # a server with a pack
    assert sum(s.got.server == s.item["server"] for s in known) >= 0.75 * len(known)


@pytest.mark.skipif(hyperscan is None, reason="hyperscan not installed")
def test_both_engines_classify_the_corpus_alike(scored: list[Scored]) -> None:
    slow = score("re")
    assert [(s.label, s.got.line_no, s.got.server) for s in slow] == [
        (s.label, s.got.line_no, s.got.server) for s in scored
    ]


def test_the_corpus_is_whole() -> None:
    on_disk = [*(CORPUS / "logs").glob("*.log"), *(CORPUS / "batch2" / "logs").glob("*.log")]
    assert sorted(str(p.relative_to(CORPUS)) for p in on_disk) == sorted(i["file"] for i in ITEMS)
    for item in ITEMS:
        text = (CORPUS / item["file"]).read_text(encoding="utf-8", errors="replace")
        assert item["proof"] in text, item["id"]
        assert item["source"] and item["url"].startswith("https://github.com/"), item["id"]


if __name__ == "__main__":
    plain = score(sys.argv[1] if len(sys.argv) > 1 else "auto")
    print(report(plain, held_out(plain)))
