"""A hang across ranks: where each rank waits, and which ranks are not where the others wait.

Each rank's wait is its most telling thread's (launch/hangsite.where), said as the wait and
the program's own line: `all_reduce (worker.py:22)`, `time.sleep (worker.py:19)`. Ranks are
grouped by that; the group most ranks share (on a tie the one whose wait says most: a
collective or a lock before a sleep, then the lowest rank) is where the others wait, and its
lowest rank's thread is the hang's site. The others are the odd ranks: a rank in time.sleep
while the rest wait in all_reduce never joined that collective. A rank whose stacks could
not be read is listed but never called odd.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

from diagbench.launch.hangsite import TOP_FRAMES, UNKNOWN, Where, where
from diagbench.launch.stacks import ProcessStacks, Thread
from diagbench.records.parts import Hang, RankWait

__all__ = ["NO_STACKS", "RankedWait", "rank_waits", "rank_words", "with_ranks"]

NO_STACKS = "(no stacks read)"


@dataclass(frozen=True)
class RankedWait:
    rank: int
    stacks: ProcessStacks
    thread: Thread | None
    where: Where | None

    @property
    def key(self) -> tuple[str | None, str | None] | None:
        if self.where is None or (self.where.wait is None and self.where.at is None):
            return None
        return self.where.wait, self.where.at

    @property
    def site(self) -> str:
        w = self.where
        if w is None:
            return NO_STACKS
        if w.wait and w.at:
            return f"{w.wait} ({w.at})"
        return w.site or w.wait or NO_STACKS


def rank_waits(taken: Sequence[ProcessStacks]) -> list[RankedWait]:
    """One entry per rank (by rank), from the process of that rank whose wait says most: a
    process that inherited its parent's RANK (a helper it started) competes with it."""
    parents = {s.ppid for s in taken}
    best: dict[int, tuple[tuple[int, int], RankedWait]] = {}
    for order, stacks in enumerate(taken):
        if stacks.rank is None:
            continue
        choice = _best_thread(stacks)
        cls = choice[1].rank if choice else UNKNOWN + 1
        if stacks.pid in parents and cls != UNKNOWN:
            cls = UNKNOWN - 1  # waits on its children: a child's wait says more
        entry = RankedWait(stacks.rank.rank, stacks, *(choice or (None, None)))
        key = (cls, order)
        if stacks.rank.rank not in best or key < best[stacks.rank.rank][0]:
            best[stacks.rank.rank] = (key, entry)
    return [best[r][1] for r in sorted(best)]


def _best_thread(stacks: ProcessStacks) -> tuple[Thread, Where] | None:
    found = [(t, where(t.frames)) for t in stacks.threads if t.frames and not t.name.startswith("diagbench-")]
    if not found:
        return None
    return min(found, key=lambda tw: (tw[1].rank, tw[0].name != "MainThread"))


def with_ranks(hang: Hang, taken: Sequence[ProcessStacks]) -> Hang:
    """The hang with `ranks`, `odd_ranks` and `words`, its site the common wait's, where at
    least two ranks were found; else as it was."""
    waits = rank_waits(taken)
    if len(waits) < 2:
        return hang
    groups: dict[tuple[str | None, str | None], list[RankedWait]] = {}
    for w in waits:
        if w.key is not None:
            groups.setdefault(w.key, []).append(w)
    if not groups:
        return replace(hang, ranks=_records(waits), words=rank_words(waits, []))
    common = min(groups.values(), key=lambda g: (-len(g), min(_cls(w) for w in g), g[0].rank))
    odd = [w for w in waits if w.key is not None and w not in common]
    lead = common[0]
    out = replace(hang, ranks=_records(waits), odd_ranks=tuple(w.rank for w in odd), words=rank_words(common, odd))
    if lead.thread is not None and lead.where is not None:
        thread = f"{lead.thread.name or '?'} ({lead.thread.tid})"
        frames = tuple(lead.thread.frames[:TOP_FRAMES])
        site, named = lead.where.site, lead.where.named
        out = replace(out, pid=lead.stacks.pid, name=lead.stacks.name, thread=thread, frames=frames, site=site)
        out = replace(out, waiting_frame=named)
    return out


def _cls(w: RankedWait) -> int:
    return w.where.rank if w.where is not None else UNKNOWN + 1


def _records(waits: Sequence[RankedWait]) -> tuple[RankWait, ...]:
    return tuple(
        RankWait(
            w.rank,
            w.stacks.pid,
            w.site,
            w.where.wait if w.where else None,
            w.where.at if w.where else None,
            w.stacks.rank.source if w.stacks.rank else "",
        )
        for w in waits
    )


def rank_words(common: Sequence[RankedWait], odd: Sequence[RankedWait]) -> str:
    """`rank 0 waits in all_reduce (worker.py:22); rank 1 is elsewhere: time.sleep (worker.py:19)`."""
    if not common:
        return "; ".join(f"rank {w.rank}: {w.site}" for w in odd)
    ranks = [w.rank for w in common]
    who = f"rank {ranks[0]} waits" if len(ranks) == 1 else f"ranks {_listed(ranks)} wait"
    said = f"{who} in {common[0].site}"
    if not odd:
        return said if len(ranks) == 1 else f"{said}, all of them"
    return "; ".join([said, *(f"rank {w.rank} is elsewhere: {w.site}" for w in odd)])


def _listed(ranks: Sequence[int]) -> str:
    return ", ".join(str(r) for r in ranks[:-1]) + f" and {ranks[-1]}"
