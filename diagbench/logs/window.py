"""The settle window: the failure lines seen since the first one, and which of them names
the launch (see watch.py: a wrapper printed just after the root cause may still decide)."""

from __future__ import annotations

from dataclasses import dataclass, field

from diagbench.logs.events import is_event
from diagbench.logs.scan import Hit
from diagbench.vocab import FailureClass

__all__ = ["Window"]


@dataclass
class Window:
    closes_at: float
    closes_after_line: int
    hits: list[Hit] = field(default_factory=list)

    def best(self) -> Hit:
        """The failure that names the launch: the highest priority, then the earliest."""
        return max(self.hits, key=lambda h: (h.signature.priority, -h.line_no))

    def secondary(self, best: Hit) -> tuple[str, ...]:
        """The other failure classes seen, in order; not the same pack's lesser reading of
        `best`'s own line, which is no second error."""
        found: list[str] = []
        for hit in self.hits:
            if hit.line_no == best.line_no and hit.signature.pack == best.signature.pack:
                continue
            cls = hit.signature.failure_class
            if cls not in (None, FailureClass.OTHER, best.signature.failure_class) and cls not in found:
                found.append(cls)
        return tuple(found)

    def after_retry(self, request_failed: bool) -> Window | None:
        """The window once the server says it tries again: its failure lines are set aside;
        a death diagbench saw itself, or a ready request that failed, still holds it open."""
        self.hits = [h for h in self.hits if is_event(h)]
        return self if self.hits or request_failed else None
