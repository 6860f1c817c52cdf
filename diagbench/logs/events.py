"""Failures that are events, not log lines: a process of the server's tree ended by a signal.

diagbench sees such a death itself (launch/deaths.py reads the wait status of a worker that a
signal ended); it enters the watch as a hit of a built-in signature, so it is ranked against
the log's own failure lines by the usual rules. Its evidence is line 0: no log line said it.
"""

from __future__ import annotations

import signal

from diagbench.logs.scan import Hit
from diagbench.logs.signatures import Kind, Signature
from diagbench.vocab import Evidence, FailureClass

__all__ = [
    "DEATH_CLASSES",
    "DEATH_PRIORITY",
    "EVENT_PACK",
    "EVIDENCE_CHARS",
    "death_hit",
    "evidence_of",
    "is_event",
    "signal_name",
]

EVENT_PACK = "diagbench"
EVIDENCE_CHARS = 500
# Orderly stops (SIGTERM, SIGINT, SIGHUP) are no failure: a server's own cleanup sends them.
DEATH_CLASSES: dict[int, FailureClass] = {
    signal.SIGKILL: FailureClass.KILLED,  # the OOM killer, or someone's kill -9
    signal.SIGSEGV: FailureClass.SEGFAULT,
    signal.SIGBUS: FailureClass.SEGFAULT,
    signal.SIGABRT: FailureClass.OTHER,
    signal.SIGFPE: FailureClass.OTHER,
    signal.SIGILL: FailureClass.OTHER,
}
DEATH_PRIORITY = 60  # above the generic lines that report it ("Failed core proc(s): {}"), below root causes
_DEATHS = {
    cls: Signature(f"tree.{cls}", Kind.FAILURE, ".*", cls, DEATH_PRIORITY, pack=EVENT_PACK, source="launch/deaths.py")
    for cls in set(DEATH_CLASSES.values())
}


def death_hit(words: str, sig: int, line_no: int) -> Hit | None:
    """The hit for a death by `sig` (`words` name the process), after log line `line_no`;
    None for a signal that is no failure."""
    cls = DEATH_CLASSES.get(sig)
    if cls is None:
        return None
    text = words.encode()
    signature = _DEATHS[cls]
    found = signature.compiled.match(text)
    assert found is not None  # ".*" matches any text
    return Hit(signature, line_no, text, found)


def is_event(hit: Hit) -> bool:
    return hit.signature.pack == EVENT_PACK


def evidence_of(hit: Hit) -> Evidence:
    """What a hit shows as its evidence: its line, cut short; line 0 for an event."""
    line_no = 0 if is_event(hit) else hit.line_no
    return Evidence(line_no, hit.text.rstrip()[:EVIDENCE_CHARS])


def signal_name(sig: int) -> str:
    """`SIGKILL`, or `signal 99` for a number with no name."""
    try:
        return signal.Signals(sig).name
    except ValueError:
        return f"signal {sig}"
