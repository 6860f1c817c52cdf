"""What a maintainer asks for in a bug report, read from a run directory: the environment,
the failing launches with their deciding lines in context, the cause the log reader
followed, a hang's stacks, what was tried and how often it failed. Secrets blanked."""

from __future__ import annotations

from dataclasses import dataclass

from diagbench.jsonvalue import JSONObject
from diagbench.judge.cells import cell_counts
from diagbench.judge.view import RunView
from diagbench.logs.classify import context
from diagbench.records.record import AttemptRecord
from diagbench.vocab import Outcome

__all__ = ["CONTEXT_LINES", "MAX_FAILURES", "TRACKERS", "Failure", "IssueFacts", "Tracker", "issue_facts"]

CONTEXT_LINES = 6  # around the deciding line
MAX_FAILURES = 3  # distinct failing cells shown in full


@dataclass(frozen=True)
class Tracker:
    """Where a server's maintainers take bug reports, and the environment report they ask for."""

    name: str
    url: str
    environment: str  # the command their template asks to paste


TRACKERS = {
    "vllm": Tracker("vLLM", "https://github.com/vllm-project/vllm/issues/new/choose", "python collect_env.py"),
    "sglang": Tracker(
        "SGLang", "https://github.com/sgl-project/sglang/issues/new/choose", "python3 -m sglang.check_env"
    ),
    "tgi": Tracker(
        "Text Generation Inference",
        "https://github.com/huggingface/text-generation-inference/issues/new/choose",
        "text-generation-launcher --env",
    ),
    "llamacpp": Tracker(
        "llama.cpp", "https://github.com/ggml-org/llama.cpp/issues/new/choose", "llama-server --version"
    ),
    "ollama": Tracker("Ollama", "https://github.com/ollama/ollama/issues/new/choose", "ollama -v"),
    "lmdeploy": Tracker("LMDeploy", "https://github.com/InternLM/lmdeploy/issues/new/choose", "lmdeploy check_env"),
    "trtllm": Tracker(
        "TensorRT-LLM", "https://github.com/NVIDIA/TensorRT-LLM/issues/new/choose", "pip show tensorrt_llm"
    ),
}


@dataclass(frozen=True)
class Failure:
    """One failing launch: its record (its cause and hang in it) and its deciding line in context."""

    record: AttemptRecord
    lines: tuple[tuple[int, str], ...]


@dataclass(frozen=True)
class IssueFacts:
    environment: JSONObject  # the manifest's `environment`, else its provenance
    failures: tuple[Failure, ...]
    flaky: tuple[str, ...]  # `cell: 2 of 3 failed:oom`
    launches: int


def issue_facts(view: RunView, environment: JSONObject | None) -> IssueFacts:
    """`environment`: the manifest's, where the run recorded one (else its provenance is shown)."""
    env = environment or view.provenance
    failing = [r for r in view.records if r.outcome.ran and r.outcome is not Outcome.READY]
    first_per_label = {r.label: r for r in reversed(failing)}  # one launch per way of failing, the first
    chosen = sorted(first_per_label.values(), key=lambda r: r.attempt)[:MAX_FAILURES]
    flaky = [f"{counts.cell_id}: {counts}" for counts in cell_counts(view.records) if counts.flaky]
    ran = sum(r.outcome.ran for r in view.records)
    return IssueFacts(view.redactor.deep(dict(env)), tuple(_failure(view, r) for r in chosen), tuple(flaky), ran)


def _failure(view: RunView, record: AttemptRecord) -> Failure:
    folder = view.path / "cells" / record.attempt
    lines: list[tuple[int, str]] = []
    log = folder / "server.log"
    if record.evidence and log.is_file():
        try:
            lines = [(n, view.redactor.cut(text)) for n, text in context(log, record.evidence.line_no, CONTEXT_LINES)]
        except OSError:
            lines = []
    return Failure(record, tuple(lines))
