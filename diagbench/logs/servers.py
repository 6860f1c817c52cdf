"""Which server wrote a log: the names diagbench knows, and detection from the log's markers.

A server is given (`classify --server NAME`, spec `server.kind: NAME`) or detected: each
built-in pack that belongs to a server has `marker` signatures, lines only that server
prints (its banner, its logger's format, its command line echoed in a paste). Each marker
counts once, with its priority as its weight; the server with the highest total so far is
the detected one (ties go to the first to get there). Servers embed one another (Ollama
runs llama.cpp, Triton runs TensorRT-LLM): the wrapper's markers weigh more.

What the server changes: ready lines marked `needs_server` (uvicorn's, which several
servers print at different moments) count only for their own server; and when the server
is given, only its own ready lines (and those of packs that belong to no server) decide.
Detection never makes a failure line count less.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from diagbench.errors import UserError
from diagbench.logs.signatures import Kind, Signature

SERVERS = {
    "vllm": "vLLM",
    "sglang": "SGLang",
    "tgi": "Text Generation Inference",
    "trtllm": "TensorRT-LLM (trtllm-serve, or Triton with the TensorRT-LLM backend)",
    "llamacpp": "llama.cpp server (llama-server)",
    "triton": "Triton Inference Server",
    "ollama": "Ollama",
    "lmdeploy": "LMDeploy",
    "pytorch": "a PyTorch distributed launch (torchrun)",
}
ALIASES = {
    "llama.cpp": "llamacpp",
    "llama-cpp": "llamacpp",
    "llama-server": "llamacpp",
    "tritonserver": "triton",
    "triton-server": "triton",
    "tensorrt-llm": "trtllm",
    "tensorrt_llm": "trtllm",
    "trtllm-serve": "trtllm",
    "text-generation-inference": "tgi",
    "text-generation-launcher": "tgi",
    "torchrun": "pytorch",
}
# a server whose ready lines are another's too: TensorRT-LLM served by Triton is ready when Triton is
READY_ALSO = {"trtllm": ("triton",)}


def known_server(word: str) -> str | None:
    """The canonical name for `word` (case and a few common spellings forgiven), or None."""
    key = word.strip().lower()
    key = ALIASES.get(key, key)
    return key if key in SERVERS else None


def server_name(word: str) -> str:
    """`known_server`, or a usage error that lists the names."""
    if (name := known_server(word)) is None:
        import difflib

        close = difflib.get_close_matches(word.lower(), [*SERVERS, *ALIASES], n=1, cutoff=0.6)
        hint = f"did you mean '{ALIASES.get(close[0], close[0])}'? " if close else ""
        raise UserError(f"unknown server '{word}': {hint}(expected one of: {', '.join(SERVERS)})")
    return name


@dataclass
class Detector:
    """The server of one log: given, or detected from the markers seen so far."""

    given: str | None = None
    scores: dict[str, int] = field(default_factory=dict)
    _seen: set[str] = field(default_factory=set)

    def saw(self, marker: Signature) -> None:
        if marker.server is None or marker.id in self._seen:
            return
        self._seen.add(marker.id)
        self.scores[marker.server] = self.scores.get(marker.server, 0) + marker.priority

    @property
    def server(self) -> str | None:
        if self.given is not None:
            return self.given
        # dicts keep insertion order, and max keeps the first of equals: ties go to the first seen
        return max(self.scores, key=lambda name: self.scores[name]) if self.scores else None

    def allows(self, ready: Signature) -> bool:
        """Whether this ready line may decide, given what is known of the server."""
        assert ready.kind is Kind.READY
        if ready.server is None:
            return True
        if self.given is not None or ready.needs_server:
            server = self.server
            return server is not None and ready.server in (server, *READY_ALSO.get(server, ()))
        return True
