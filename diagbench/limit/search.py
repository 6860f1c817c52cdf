"""A limit's search, pure: which value to launch next from what the launches so far showed,
and what they add up to.

Bisection assumes the values that come up lie on one side of the limit. It launches the far
end first (HI, or LO with --smallest: if that comes up, it is the answer), then halves the
values between the last one that came up and the first one that did not, in at most
ceil(log2(HI - LO + 1)) more launches: ceil(log2(HI - LO)) + 2 at most in all. A launch left
within that budget checks the assumption: a value the search skipped, past the limit first.
A value that comes up past the limit (or fails before it) is reported with the limit, never
folded into it.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import Enum

from diagbench.records.record import AttemptRecord
from diagbench.vocab import Outcome

__all__ = ["Conclusion", "Search", "Verdict", "budget", "judge"]


class Verdict(str, Enum):
    """What one value's launches showed."""

    OK = "ok"  # every launch came up
    BAD = "bad"  # none came up (failed, crashed or timed out)
    FLAKY = "flaky"  # some came up and some did not: not to be relied on, so past the limit
    UNRESOLVED = "unresolved"  # a launch did not start, or was stopped: nothing learnt

    @property
    def past(self) -> bool:
        """Beyond the limit: it does not (reliably) come up."""
        return self in (Verdict.BAD, Verdict.FLAKY)


def judge(records: Sequence[AttemptRecord]) -> Verdict:
    """A value's verdict from its launches (each must have run to an outcome of the server's)."""
    if not records or any(not r.outcome.ran or r.outcome is Outcome.LAUNCH_ERROR for r in records):
        return Verdict.UNRESOLVED
    up = sum(r.outcome is Outcome.READY for r in records)
    return Verdict.OK if up == len(records) else Verdict.BAD if up == 0 else Verdict.FLAKY


def budget(lo: int, hi: int) -> int:
    """The most values a search launches: ceil(log2(HI - LO)) + 2 (one when LO is HI)."""
    span = hi - lo
    return 1 if span == 0 else (span - 1).bit_length() + 2


@dataclass(frozen=True)
class Conclusion:
    """What the launches add up to, in the user's values."""

    limit: int | None  # the largest (--smallest: the smallest) value that came up; None: none did
    beyond: int | None  # the next value the search launched, which did not come up (None: the range's end came up)
    monotone: bool | None  # None: not checked (no value left untested, or no launch left within the budget)
    against: int | None = (
        None  # a value on the wrong side of the limit (a check that came up past it, or failed before)
    )
    flaky: tuple[int, ...] = ()


@dataclass
class Search:
    """Bisection over LO..HI. Values are kept as launched; the search itself works in `x`,
    where the answer is always the largest x that comes up (x = -value with --smallest)."""

    lo: int
    hi: int
    smallest: bool = False
    known: dict[int, Verdict] = field(default_factory=dict)  # the search's own launches, value -> verdict
    checks: dict[int, Verdict] = field(default_factory=dict)  # launches made to check it
    # the first two launches failed alike (the same line, no class of its own: a command that may not
    # work at all), so the near end is launched third; still within the budget: the gap left is halved
    same_failure: bool = False

    def _x(self, value: int) -> int:
        return -value if self.smallest else value

    @property
    def span(self) -> tuple[int, int]:
        """The range in x: (first, last), last launched first."""
        return (-self.hi, -self.lo) if self.smallest else (self.lo, self.hi)

    def _xs(self, known: Mapping[int, Verdict]) -> dict[int, Verdict]:
        return {self._x(v): verdict for v, verdict in known.items()}

    def bounds(self) -> tuple[int | None, int | None]:
        """(the largest x that came up below every x that did not, the smallest x that did not)."""
        xs = self._xs(self.known)
        bad = min((x for x, v in xs.items() if v.past), default=None)
        good = max((x for x, v in xs.items() if v is Verdict.OK and (bad is None or x < bad)), default=None)
        return good, bad

    @property
    def stuck(self) -> bool:
        """A launch that decided nothing stops the search (what it would have shown is unknown)."""
        return any(v is Verdict.UNRESOLVED for v in (*self.known.values(), *self.checks.values()))

    def next_value(self) -> int | None:
        """The next value the search launches; None once it has ended (or is stuck)."""
        if self.stuck:
            return None
        first, last = self.span
        if self._value(last) not in self.known:
            return self._value(last)
        good, bad = self.bounds()
        if bad is None:  # the far end came up: it is the answer
            return None
        if self.same_failure and len(self.known) == 2 and good is None and self._value(first) not in self.known:
            return self._value(first)
        low = good if good is not None else first - 1
        return None if bad - low <= 1 else self._value(low + (bad - low) // 2)

    def _value(self, x: int) -> int:
        return -x if self.smallest else x

    def check_value(self) -> int | None:
        """Once the search has ended, one value it skipped, if the budget has a launch left: past
        the limit first (in the widest stretch it skipped there), else before it."""
        if self.stuck or self.checks or self.next_value() is not None:
            return None
        if len(self.known) >= budget(self.lo, self.hi):
            return None
        first = self.span[0]
        good, bad = self.bounds()
        tested = sorted(self._xs(self.known))
        if bad is not None:
            past = _widest([x for x in tested if x >= bad])
            if past is not None:
                return self._value(past)
        before = [first - 1, *(x for x in tested if good is not None and x <= good)]
        if len(before) > 1 and before[1] > first:  # the first value of the range was never launched
            return self._value(first)
        inside = _widest(before[1:])
        return None if inside is None else self._value(inside)

    def conclude(self) -> Conclusion:
        good, bad = self.bounds()
        flaky = tuple(sorted(v for v, verdict in {**self.known, **self.checks}.items() if verdict is Verdict.FLAKY))
        against = self._against(good)
        if good is None and against is not None:  # nothing the search launched came up, but a check did
            good = against
            bad = min((x for x, v in self._xs(self.known).items() if v.past and x > good), default=None)
        return Conclusion(
            limit=None if good is None else self._value(good),
            beyond=None if bad is None else self._value(bad),
            monotone=self._monotone(against),
            against=None if against is None else self._value(against),
            flaky=flaky,
        )

    def _against(self, good: int | None) -> int | None:
        """A check on the wrong side of the limit: it came up past it, or failed before it (in x)."""
        for x, v in self._xs(self.checks).items():
            if (v is Verdict.OK and (good is None or x > good)) or (v.past and good is not None and x < good):
                return x
        return None

    def _monotone(self, against: int | None) -> bool | None:
        if against is not None:
            return False
        first, last = self.span
        if len({**self.known, **self.checks}) == last - first + 1:  # every value launched: the data say it all
            return True
        if any(v in (Verdict.OK, Verdict.BAD) for v in self.checks.values()):
            return True  # as far as the check goes
        return None


def _widest(points: Sequence[int]) -> int | None:
    """The middle of the widest stretch of untested values between sorted points, or None."""
    best: tuple[int, int] | None = None
    for a, b in itertools.pairwise(points):
        if b - a >= 2 and (best is None or b - a > best[1] - best[0]):
            best = (a, b)
    return None if best is None else best[0] + (best[1] - best[0]) // 2
