"""A limit's search, pure: bisection within ceil(log2(HI - LO)) + 2 launches, the check past the
limit, flaky and undecided values, and the range's parsing and each value's launch."""

from __future__ import annotations

import math
import random
from collections.abc import Callable

import pytest

from diagbench.errors import UserError
from diagbench.limit.problem import INT64, LimitProblem, parse_knob, parse_range
from diagbench.limit.search import Conclusion, Search, Verdict, budget
from diagbench.triage.apply import Launch


def search(lo: int, hi: int, up: Callable[[int], Verdict | bool], smallest: bool = False) -> tuple[int, Conclusion]:
    """The whole search against an oracle: (values launched, what they add up to)."""
    found = Search(lo, hi, smallest)

    def verdict(value: int) -> Verdict:
        said = up(value)
        return said if isinstance(said, Verdict) else (Verdict.OK if said else Verdict.BAD)

    launched = 0
    while (value := found.next_value()) is not None:
        found.known[value] = verdict(value)
        launched += 1
    if (value := found.check_value()) is not None:
        found.checks[value] = verdict(value)
        launched += 1
    return launched, found.conclude()


def test_the_budget_is_ceil_log2_of_the_range_plus_two() -> None:
    assert [budget(0, n) for n in (0, 1, 2, 3, 4, 5, 63, 64, 65)] == [1, 2, 3, 4, 4, 5, 8, 8, 9]
    for n in range(1, 300):
        assert budget(7, 7 + n) == math.ceil(math.log2(n)) + 2


def test_a_capture_limit_at_48_is_found_with_the_value_past_it_in_the_budget() -> None:
    launched, found = search(1, 64, lambda v: v <= 48)
    assert (found.limit, found.beyond, found.monotone, found.against) == (48, 49, True, None)
    assert launched == budget(1, 64) == 8  # 7 for the search, one left to check past the limit


def test_the_smallest_value_is_found_the_same_way_from_the_other_end() -> None:
    launched, found = search(1, 64, lambda v: v >= 17, smallest=True)
    assert (found.limit, found.beyond, found.monotone) == (17, 16, True)
    assert launched <= budget(1, 64)


@pytest.mark.parametrize("smallest", [False, True])
def test_every_boundary_of_many_ranges_is_found_within_the_budget(smallest: bool) -> None:
    draw = random.Random(34)
    for _ in range(1500):
        lo = draw.randint(-(10**6), 10**6)
        hi = lo + draw.choice([0, 1, 2, 3, draw.randint(0, 5000), draw.randint(0, 10**9)])
        edge = draw.randint(lo - 3, hi + 3)
        up = (lambda v, e=edge: v >= e) if smallest else (lambda v, e=edge: v <= e)
        launched, found = search(lo, hi, up, smallest)
        assert launched <= budget(lo, hi), (lo, hi, edge)
        expected = (None if edge > hi else max(edge, lo)) if smallest else (None if edge < lo else min(edge, hi))
        assert found.limit == expected, (lo, hi, edge, found)
        assert found.monotone is not False


def test_two_launches_that_fail_alike_launch_the_near_end_third_within_the_budget() -> None:
    draw = random.Random(3)
    for _ in range(1500):
        lo = draw.randint(-1000, 1000)
        hi = lo + draw.choice([2, 3, 4, draw.randint(2, 5000)])
        edge = draw.randint(lo - 3, hi + 3)
        found = Search(lo, hi)
        launched = []
        while (value := found.next_value()) is not None:
            found.known[value] = Verdict.OK if value <= edge else Verdict.BAD
            launched.append(value)
            if len(launched) == 2 and all(found.known[v].past for v in launched):
                found.same_failure = True
        assert len(launched) <= budget(lo, hi), (lo, hi, edge)
        assert found.conclude().limit == (None if edge < lo else min(edge, hi))
        if found.same_failure:
            assert lo in launched[:3] and (edge >= lo or len(launched) <= 3)  # nothing comes up: said in 3


def test_the_widest_range_a_server_can_read_takes_65_launches_at_most() -> None:
    launched, found = search(0, INT64, lambda v: v <= 123_456_789)
    assert (found.limit, found.beyond) == (123_456_789, 123_456_790)
    assert launched <= budget(0, INT64) == 65


def test_a_value_past_the_limit_that_comes_up_is_reported_beside_it() -> None:
    # comes up to 48, fails 49..56, comes up again 57..63, fails at 64: the check at 60 shows it
    launched, found = search(1, 64, lambda v: v <= 48 or 57 <= v <= 63)
    assert (found.limit, found.beyond, found.monotone, found.against) == (48, 49, False, 60)
    assert launched <= budget(1, 64)


def test_a_range_that_comes_up_at_its_end_is_checked_at_the_other_end() -> None:
    launched, found = search(1, 64, lambda v: v > 1)  # everything but 1
    assert (found.limit, found.beyond, found.monotone, found.against) == (64, None, False, 1)
    assert launched == 2


def test_nothing_that_comes_up_gives_no_limit_and_a_check_inside_the_range() -> None:
    _, found = search(1, 64, lambda v: False)
    assert (found.limit, found.beyond, found.monotone) == (None, 1, True)
    # nothing the search launched came up (64, 32, 16, ..., 1); its check at 48 did
    _, found = search(1, 64, lambda v: v == 48)
    assert (found.limit, found.beyond, found.monotone, found.against) == (48, 64, False, 48)


def test_a_flaky_value_counts_as_past_the_limit() -> None:
    _, found = search(1, 64, lambda v: Verdict.FLAKY if v == 48 else v < 48)
    assert (found.limit, found.beyond, found.flaky) == (47, 48, (48,))


def test_a_launch_that_decides_nothing_stops_the_search() -> None:
    found = Search(1, 64)
    found.known[64] = Verdict.BAD
    found.known[32] = Verdict.UNRESOLVED
    assert found.stuck and found.next_value() is None and found.check_value() is None


def test_a_range_of_one_value_is_one_launch() -> None:
    assert search(5, 5, lambda v: True) == (1, Conclusion(5, None, True, None, ()))
    assert search(5, 5, lambda v: False)[1].limit is None


@pytest.mark.parametrize(
    ("given", "message"),
    [
        (
            "--x=5..4",
            "--vary --x=5..4: LO 5 is above HI 4: write the smaller first (4..5); --smallest looks for the smallest",
        ),
        ("--x=1.5..4", "--vary --x=1.5..4: expected a range of whole numbers LO..HI, e.g. 1..64 (got '1.5..4')"),
        ("--x=a..b", "--vary --x=a..b: expected a range of whole numbers LO..HI, e.g. 1..64 (got 'a..b')"),
        ("--x", "--vary --x: expected NAME=LO..HI, e.g. --vary --cuda-graph-max-bs=1..64"),
        (
            "x=1..4",
            "--vary x=1..4: 'x' is not an option (write it as the command takes it, e.g. --vary --cuda-graph-max-bs=1..64)",
        ),
        (
            "--x=0..9223372036854775808",
            "--vary --x=0..9223372036854775808: 9223372036854775808 is beyond a 64-bit integer "
            "(at most 9223372036854775807): a server could not read it",
        ),
    ],
)
def test_a_range_or_option_that_cannot_be_varied_is_one_message(given: str, message: str) -> None:
    with pytest.raises(UserError) as caught:
        parse_knob([given], [])
    assert str(caught.value) == message


def test_the_knob_is_one_option_or_one_variable() -> None:
    assert parse_knob(["--max-bs=-8..+8"], []) == (parse_knob(["--max-bs=-8..8"], [])[0], -8, 8)
    with pytest.raises(UserError, match="one knob at a time"):
        parse_knob(["--a=1..2"], ["B=1..2"])
    with pytest.raises(UserError, match="nothing to vary"):
        parse_knob([], [])
    with pytest.raises(UserError, match="DIAGBENCH_"):
        parse_knob([], ["DIAGBENCH_SCOPE=1..2"])
    assert parse_range("here", " 0 .. 2 ") == (0, 2)


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (("srv", "--port", "{port}"), ("srv", "--port", "{port}", "--max-bs", "7")),
        (("srv", "--max-bs", "64", "--port", "{port}"), ("srv", "--max-bs", "7", "--port", "{port}")),
        (("srv", "--max-bs=64", "--port", "{port}"), ("srv", "--max-bs=7", "--port", "{port}")),
        (("srv", "--max-bs", "-1", "--x"), ("srv", "--max-bs", "7", "--x")),
        (("srv", "--max-bs", "--x"), ("srv", "--max-bs", "7", "--x")),
    ],
)
def test_each_value_replaces_the_options_own_or_is_added(argv: tuple[str, ...], expected: tuple[str, ...]) -> None:
    knob, lo, hi = parse_knob(["--max-bs=1..64"], [])
    problem = LimitProblem(None, Launch(argv, {}), knob, lo, hi, False, None)  # type: ignore[arg-type]  # no spec needed
    assert problem.launch_at(7).argv == expected


def test_a_variable_is_set_over_the_commands_own() -> None:
    knob, lo, hi = parse_knob([], ["KV=1..8"])
    problem = LimitProblem(None, Launch(("srv",), {"KV": "2", "A": "b"}), knob, lo, hi, False, None)  # type: ignore[arg-type]
    assert problem.launch_at(5).env == {"KV": "5", "A": "b"}
    assert problem.shown() == "KV='{value}' A=b srv"
