"""The rank that failed first, in a launch of many ranks, and the error that decides its class.

When one rank fails, the others fail after it: their collectives lose a peer, a watchdog
times out, the launcher reports every rank it stopped. Those are fallout. The earliest error
a rank reports in its own lines (behind its prefix, logs/ranks.py) that is not fallout is the
first failure; its class is the launch's. Where no rank printed its own error (a rank that
segfaults prints nothing), the launchers' reports name it:

- torchrun's summary, raised as ChildFailedError (torch/distributed/elastic/multiprocessing/
  errors/__init__.py: `_MSG_FORMAT_TEMPLATE`, "Failures:" then "Root Cause (first observed
  failure):", each failure as `_FAILURE_FORMAT_TEMPLATE`: `[0]:`, `rank      : 1 (local_rank: 1)`,
  `exitcode  : -11 (pid: N)  (SIGSEGV)`, `error_file: ...`, `traceback : Signal 11 (SIGSEGV)
  received by PID N`; the root is the failure of the earliest error-file timestamp,
  ChildFailedError.get_first_failure). The error_handler (errors/error_handler.py) writes a
  rank's error file under `@record`, whose traceback the summary then shows indented.
- torch.multiprocessing.spawn (torch/multiprocessing/spawn.py, ProcessContext.join): a rank that
  raised is reported as ProcessRaisedException, "-- Process 1 terminated with the following
  error:" then its traceback; one killed by a signal as ProcessExitedException, "process 1
  terminated with signal SIGSEGV". The index is the rank spawn passed to the function.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, replace

from diagbench.logs.rootcause import Cause, root_of

__all__ = [
    "FALLOUT",
    "FALLOUT_SETTLE_S",
    "LAUNCHER_WORDS",
    "FirstFailure",
    "first_failure",
    "is_fallout",
    "tag_launchers",
    "waits_for_first",
]

# what a rank reports when another rank died first. Sources: gloo transport/tcp/pair.cc ("Connection
# closed by peer", "Read error [...]: Connection reset by peer", "Connection refused" on connect);
# torch ProcessGroupNCCL.cpp ("Watchdog caught collective operation timeout", and NCCL's
# ncclRemoteError text "remote process exited or there was a network error", nccl src/misc/utils.cc);
# torch/distributed/elastic/multiprocessing/errors (ChildFailedError: the summary of every rank);
# torch/multiprocessing/spawn.py (ProcessRaisedException, ProcessExitedException: the parent's words);
# torch/distributed/elastic/multiprocessing/api.py (SignalException "Process N got signal: SIGTERM",
# a rank the agent stopped); SGLang's "Received sigquit from a child process" (its parent, after a
# scheduler died: srt/entrypoints/engine.py)
FALLOUT = re.compile(
    r"Connection (?:reset|closed) by peer|\bRead error\b|Connection refused"
    r"|remote process exited or there was a network error|Watchdog caught collective operation timeout"
    r"|ChildFailedError|ProcessRaisedException|SignalException|got signal: (?:Signals\.)?SIG(?:TERM|INT)"
    r"|Received sigquit from a child process|NCCL communicator was aborted"
)
# the lines that open a launcher's report of its ranks' failures (a cheap look at each line)
LAUNCHER_WORDS = re.compile(r"Root Cause \(first observed failure\):|terminated with the following error:")
# a failure line that is a rank's fallout: the watch waits FALLOUT_SETTLE_S for the first rank's own
# error and the launcher's report (torchrun polls its workers every 0.1 s, stops the rest, then reports)
_FALLOUT_BYTES = re.compile(FALLOUT.pattern.encode())
# torchrun's agent saying a worker failed: the rank (global) comes in its summary, printed once
# the agent has stopped the other workers (torch/distributed/elastic/multiprocessing/api.py)
_AGENT_FAILED = re.compile(rb"failed \(exitcode: -?\d{1,4}\) local_rank: \d{1,6}")
FALLOUT_SETTLE_S = 3.0
_SPAWN_ERROR = re.compile(r"-- Process (\d{1,6}) terminated with the following error:")
_SPAWN_SIGNAL = re.compile(r"\bprocess (\d{1,6}) terminated with (?:signal|exit code)\b")
_ROOT = "Root Cause (first observed failure):"
_FAILURES = re.compile(r"^\s*Failures:\s*$")
_ENTRY = re.compile(r"^\s*\[(\d{1,6})\]:\s*$")  # `[0]:` opens one failure of torchrun's summary
_ENTRY_RANK = re.compile(r"^\s*rank\s*: (\d{1,6}) \(local_rank: \d{1,6}\)")
_BORDER = re.compile(r"^\s*={8,}\s*$")
SUMMARY_LINES = 400  # a summary's entries (each rank's indented traceback) are read this far


@dataclass(frozen=True)
class FirstFailure:
    """The rank that failed first (None: a process whose rank no line says) and its error."""

    rank: int | None
    who: str
    cause: Cause  # its own error, or the launcher's report of it (a rank that printed nothing)


def is_fallout(cause: Cause) -> bool:
    """Whether an error is another failure's consequence (a lost peer, a launcher's summary)."""
    return cause.fallout or FALLOUT.search(f"{cause.type}: {cause.message} {' '.join(cause.chain)}") is not None


def waits_for_first(line: bytes) -> bool:
    """Whether a failure line is fallout of another rank's failure, or torchrun's agent saying a
    worker failed before its summary names the rank, so the watch waits for that rank's own error
    or the summary (FALLOUT_SETTLE_S; the launch's exit ends the wait)."""
    return _FALLOUT_BYTES.search(line) is not None or _AGENT_FAILED.search(line) is not None


def first_failure(causes: Sequence[Cause], origins: int = 0) -> FirstFailure | None:
    """The first failure of a launch of many ranks (`origins`: how many prefixed processes
    wrote the log), or None for a launch of one or a log that does not say."""
    own = [c for c in causes if c.who is not None and not c.launcher]
    reported = [c for c in causes if c.launcher and c.rank is not None]
    # many ranks: two wrote lines, a launcher reported ranks, or a rank above 0 speaks (a live run is
    # torn down once the first rank's error is read, before the others say anything)
    if max(origins, len({c.who for c in own})) < 2 and not reported and not any((c.rank or 0) > 0 for c in own):
        return None
    at = next((k for k, c in enumerate(own) if not is_fallout(c)), None)
    if at is not None:
        first = own[at]
        named = _launchers_root(reported)  # torchrun --tee: local ranks only, its summary names the rank
        rank = first.rank if first.rank is not None else (named.rank if named else None)
        return FirstFailure(rank, first.who or "", root_of(_its_report(own[at:], first.who)) or first)
    root = _launchers_root(reported)
    if root is None:
        return None
    if is_fallout(root):  # mp.spawn's join may report only a rank that lost its peer: not the first to fail
        unnamed = next((c for c in causes if c.rank is None and not c.launcher and not is_fallout(c)), None)
        # the first rank's own error, printed with no prefix: its class, rank unknown; else nothing says
        return FirstFailure(None, "", unnamed) if unnamed is not None else None
    mine = next((c for c in own if c.rank == root.rank and not is_fallout(c)), None)
    return FirstFailure(root.rank, root.who or f"rank{root.rank}", mine or root)


def _launchers_root(reported: Sequence[Cause]) -> Cause | None:
    """The report a launcher gives as the first failure: its first that is not fallout, else its first."""
    return next((c for c in reported if not is_fallout(c)), None) or (reported[0] if reported else None)


def _its_report(own: Sequence[Cause], who: str | None) -> list[Cause]:
    """The errors a rank reported one after the other, until another rank's (an error it
    printed in parts: SGLang's wrapper after the CUDA error it wraps)."""
    out: list[Cause] = []
    for cause in own:
        if cause.who != who:
            break
        if not is_fallout(cause):
            out.append(cause)
    return out


def tag_launchers(lines: Sequence[str], first_line_no: int, causes: list[Cause]) -> list[Cause]:
    """The causes with the ranks the launchers' reports name (`lines[0]` is line `first_line_no`)."""
    out = [_spawn_signal(c) for c in causes]
    for i, line in enumerate(lines):
        if "terminated with the following error" in line and (found := _SPAWN_ERROR.search(line)):
            out = _tag_next(out, first_line_no + i, int(found.group(1)))
        elif _ROOT in line or ("Failures:" in line and _FAILURES.match(line)):
            out = _tag_summary(out, lines, i, first_line_no, root=_ROOT in line)
    return out


def _spawn_signal(cause: Cause) -> Cause:
    """mp.spawn's ProcessExitedException names the rank a signal ended."""
    found = _SPAWN_SIGNAL.search(cause.message) if "terminated with" in cause.message else None
    if found is None:
        return cause
    return replace(cause, rank=int(found.group(1)), who=f"process {found.group(1)}", launcher=True)


def _tag_next(causes: list[Cause], line_no: int, rank: int) -> list[Cause]:
    """The first error after mp.spawn's "-- Process N terminated ..." line is rank N's."""
    for k, cause in enumerate(causes):
        if cause.line_no > line_no and cause.who is None:
            causes[k] = replace(cause, rank=rank, who=f"process {rank}", launcher=True)
            break
    return causes


def _tag_summary(causes: list[Cause], lines: Sequence[str], at: int, first: int, root: bool) -> list[Cause]:
    """The errors inside torchrun's summary section starting at `lines[at]`, each with the rank
    of the entry it is in; the other failures' are fallout. The ChildFailedError the summary
    is raised as takes the root's rank."""
    rank: int | None = None
    spans: list[tuple[int, int, int]] = []  # (first line, last line, rank) of each entry
    start = 0
    for i in range(at + 1, min(len(lines), at + SUMMARY_LINES)):
        line = lines[i]
        if _ENTRY.match(line) or _BORDER.match(line) or line.startswith(("-----", "Root Cause")):
            if rank is not None:
                spans.append((first + start, first + i - 1, rank))
            rank = None
            if not _ENTRY.match(line):
                break
            start = i
        elif rank is None and (found := _ENTRY_RANK.match(line)):
            rank = int(found.group(1))
    if rank is not None:
        spans.append((first + start, first + min(len(lines), at + SUMMARY_LINES) - 1, rank))
    for k, cause in enumerate(causes):
        for low, high, r in spans:
            if low <= cause.line_no <= high:
                causes[k] = replace(cause, rank=r, who=f"rank{r}", launcher=True, fallout=not root)
        if root and spans and "ChildFailedError" in cause.type and cause.line_no < spans[0][0]:
            causes[k] = replace(cause, rank=spans[0][2], who=f"rank{spans[0][2]}", launcher=True)
    return causes
