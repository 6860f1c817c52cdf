"""The servers diagbench knows by name: what `classify --server`, spec `server.kind` and a
pack's `server:` may say. Apart from detection (servers.py), which needs the signatures that
need these names."""

from __future__ import annotations

from collections.abc import Sequence

from diagbench.errors import UserError

__all__ = ["ALIASES", "READY_ALSO", "SERVERS", "guess_server", "known_server", "server_name"]

SERVERS = {
    "vllm": "vLLM",
    "sglang": "SGLang",
    "tgi": "Text Generation Inference",
    "tei": "Text Embeddings Inference",
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
    "text-embeddings-inference": "tei",
    "text-embeddings-router": "tei",
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


# a word of the command that names the server (the program, or a module run by python -m)
_PROGRAMS = {
    "diagbench.simulator": "simulator",
    "diagbench.refserver": "refserver",
    "sglang.launch_server": "sglang",
    "vllm.entrypoints.openai.api_server": "vllm",
    "lmdeploy": "lmdeploy",
    "ollama": "ollama",
}


def guess_server(argv: Sequence[str]) -> str | None:
    """The server a command line names: `vllm serve`, `python -m sglang.launch_server`, ..."""
    for word in argv[:4]:
        base = word.rsplit("/", 1)[-1]
        if base in _PROGRAMS:
            return _PROGRAMS[base]
        if (name := known_server(base)) is not None and name != "pytorch":
            return name
    return None
