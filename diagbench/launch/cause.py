"""A finished attempt's root cause, read once from its server.log after the teardown: the
live watch never pays for the root-cause reader per line."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from diagbench.launch.logfile import LogStats
from diagbench.logs.reading import CAUSE_BELOW, Reading, causes_of, refine
from diagbench.logs.rootcause import root_of
from diagbench.records.parts import RootCause
from diagbench.records.record import AttemptRecord
from diagbench.vocab import Outcome

__all__ = ["with_cause"]


def with_cause(record: AttemptRecord, log: Path, stats: LogStats) -> AttemptRecord:
    """A failed or crashed launch's root cause, read once from server.log after the teardown
    (never on the per-line path): a generic failure takes the root's class, a named one
    keeps its class and gains the root's as secondary (logs/reading.py)."""
    if record.outcome not in (Outcome.FAILED, Outcome.CRASHED) or stats.truncated:
        return record  # a capped log's line numbers are not the stream's
    try:
        line_no = record.evidence.line_no if record.evidence else 0
        causes = causes_of(log, line_no + CAUSE_BELOW if record.outcome is Outcome.FAILED and line_no else None)
    except OSError:
        return record
    first = Reading("failed", record.failure_class, tuple(record.secondary_classes), record.evidence, record.phase)
    got = refine(first, causes, record.log_lines) if record.evidence else replace(first, cause=root_of(causes))
    if got.cause is None:
        return replace(record, first_failed_rank=got.first_failed_rank)
    if record.outcome is Outcome.CRASHED or (record.evidence is not None and record.evidence.line_no == 0):
        # it exited before ready, or a death in its tree decided (the kernel's word, not a line):
        # its class stays as the watch said; what the log's ranks said after it is their fallout
        return replace(record, cause=RootCause.of(got.cause), first_failed_rank=got.first_failed_rank)
    return replace(
        record,
        failure_class=got.failure_class,
        secondary_classes=list(got.secondary_classes),
        cause=RootCause.of(got.cause),
        first_failed_rank=got.first_failed_rank,
        # the first rank's error decided, not the fallout line the watch stopped at
        evidence=got.evidence if got.first_failed_rank is not None else record.evidence,
    )
