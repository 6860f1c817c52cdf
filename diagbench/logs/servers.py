"""Which server wrote a log: detection from the log's markers (the names diagbench knows are
in server_names.py, which the pack loader needs too).

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

from diagbench.logs.server_names import READY_ALSO
from diagbench.logs.signatures import Kind, Signature

__all__ = ["Detector"]


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
