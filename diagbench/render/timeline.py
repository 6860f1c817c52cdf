"""An attempt's timeline as an SVG bar: launch to decision split into its phases, then teardown.

Every bar of a report shares one scale, so a slow launch looks slow next to the others.
SGLang logs a phase per CUDA-graph batch-size bucket (`capture bs=N`, up to ~60): a run of
them is drawn as one `capture` piece whose tooltip names the buckets, so a long matrix's
page stays small.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from diagbench.records.record import AttemptRecord
from diagbench.render.htmlkit import Html, el

__all__ = [
    "BAR_HEIGHT",
    "BUCKET",
    "CHAR_PX",
    "LANE_HEIGHT",
    "MIN_WIDTH_PCT",
    "TRACK_PX",
    "Scale",
    "Segment",
    "bar",
    "lanes",
    "scale_for",
    "segments",
]

BAR_HEIGHT = 20
LANE_HEIGHT = 10  # a rank's lane under its attempt's bar
TRACK_PX = 600  # about the narrowest a bar is drawn on a laptop: decides which labels are written in it
CHAR_PX = 6.5
MIN_WIDTH_PCT = 0.2  # a phase of a few milliseconds still shows
BUCKET = "capture bs="  # sglang.capturing_batch's phase name, before its batch size


@dataclass(frozen=True)
class Segment:
    name: str
    start: float
    end: float
    kind: str = "phase"  # phase | start | teardown | unknown
    note: str = ""  # what the tooltip says instead of the name: the buckets of a folded capture


@dataclass(frozen=True)
class Scale:
    """Seconds since launch -> percent of the track."""

    seconds: float

    def pct(self, t: float) -> float:
        return round(100 * max(0.0, t) / self.seconds, 3)

    def axis(self) -> Html:
        """Tick marks in seconds along the top of the timeline."""
        step = _nice_step(self.seconds)
        ticks = [i * step for i in range(int(self.seconds / step) + 1)]
        marks = [
            el("text", {"x": f"{self.pct(t)}%", "y": 12, "class": _tick_class(self.pct(t))}, _seconds(t)) for t in ticks
        ]
        return el("svg", {"class": "axis", "width": "100%", "height": 16, "aria-hidden": "true"}, marks)


def scale_for(records: Sequence[AttemptRecord]) -> Scale:
    ends = [r.duration_s or r.time_to_outcome_s or 0.0 for r in records if r.outcome.ran]
    return Scale(max([*ends, 0.001]))


def segments(r: AttemptRecord) -> list[Segment]:
    """The pieces of one bar, in order; a record from before phase timelines has one piece
    up to its decision, named for the last phase it reached."""
    decided = r.time_to_outcome_s or 0.0
    marks = [p for p in r.phases if p.at_s <= decided]
    out: list[Segment] = []
    if not marks:
        old = bool(r.phase) and not r.phases
        out.append(Segment(f"… {r.phase}" if old else "launch", 0.0, decided, "unknown" if old else "start"))
    else:
        if marks[0].at_s > 0:
            out.append(Segment("launch", 0.0, marks[0].at_s, "start"))
        ends = [m.at_s for m in marks[1:]] + [decided]
        out += _fold_buckets([Segment(m.name, m.at_s, end) for m, end in zip(marks, ends, strict=True)])
    if r.duration_s is not None and r.duration_s > decided:
        out.append(Segment("teardown", decided, r.duration_s, "teardown"))
    return out


def _fold_buckets(pieces: list[Segment]) -> list[Segment]:
    """Each run of two or more `capture bs=N` pieces as one `capture` piece (taking in the
    `capture` piece just before it, the graph capture's begin line)."""
    out: list[Segment] = []
    i = 0
    while i < len(pieces):
        j = i
        while j < len(pieces) and pieces[j].name.startswith(BUCKET):
            j += 1
        if j - i < 2:
            out.append(pieces[i])
            i += 1
            continue
        start = out.pop().start if out and out[-1].name == "capture" else pieces[i].start
        sizes = [p.name[len(BUCKET) :] for p in pieces[i:j]]
        note = f"{BUCKET}{sizes[0]}..{sizes[-1]}, {len(sizes)} buckets"
        out.append(Segment("capture", start, pieces[j - 1].end, note=note))
        i = j
    return out


def bar(r: AttemptRecord, scale: Scale) -> Html:
    """One attempt's bar: each phase a rectangle with its name when it fits, a tooltip
    with its times, and a mark where the outcome was decided."""
    pieces = []
    for i, seg in enumerate(segments(r)):
        x, width = scale.pct(seg.start), round(max(MIN_WIDTH_PCT, scale.pct(seg.end) - scale.pct(seg.start)), 3)
        shade = f"p{i % 2}" if seg.kind == "phase" else seg.kind
        fits = seg.kind != "teardown" and width / 100 * TRACK_PX >= len(seg.name) * CHAR_PX + 8
        pieces.append(  # a nested svg clips its label to the segment
            el(
                "svg",
                {"x": f"{x}%", "width": f"{width}%", "height": BAR_HEIGHT, "class": f"seg {shade}"},
                el("rect", {"width": "100%", "height": BAR_HEIGHT}, el("title", None, _tip(seg, r))),
                fits and el("text", {"x": 4, "y": 14}, seg.name),
            )
        )
    decided = scale.pct(r.time_to_outcome_s or 0.0)
    pieces.append(el("line", {"x1": f"{decided}%", "x2": f"{decided}%", "y1": 0, "y2": BAR_HEIGHT, "class": "decided"}))
    label = f"{r.label} after {r.time_to_outcome_s or 0:.2f} s"
    return el(
        "svg",
        {
            "class": f"bar o-{r.outcome.value}",
            "width": "100%",
            "height": BAR_HEIGHT,
            "role": "img",
            "aria-label": label,
        },
        pieces,
    )


def lanes(r: AttemptRecord, scale: Scale) -> list[Html]:
    """A lane per rank of a hung launch of many ranks, three grid cells each (who, lane, where):
    running from launch until the quiet window began, then waiting at its site up to the
    decision; the odd ranks (not where the others wait) marked."""
    hang = r.hang
    if hang is None or not hang.ranks:
        return []
    decided = r.time_to_outcome_s or 0.0
    quiet = max(0.0, decided - (r.stalled_after_s or 0.0)) if r.stalled else decided
    out: list[Html] = []
    for rank in hang.ranks:
        odd = rank.rank in hang.odd_ranks
        where = f"rank {rank.rank}" + (" is elsewhere" if odd else " waits") + f": {rank.site}"
        pieces = [
            _lane_piece(scale, 0.0, quiet, "run", f"rank {rank.rank} (pid {rank.pid}): 0 s → {quiet:.2f} s, running"),
            _lane_piece(scale, quiet, decided, "wait", f"{where}, {quiet:.2f} s → {decided:.2f} s"),
        ]
        label = f"rank {rank.rank} lane, {'odd: ' if odd else ''}{rank.site}"
        attrs = {"class": "lane odd" if odd else "lane", "width": "100%", "height": LANE_HEIGHT, "role": "img"}
        out += [
            el("span", {"class": "who lane-who"}, f"rank {rank.rank}"),
            el("svg", {**attrs, "aria-label": label}, pieces),
            el("span", {"class": "lane-site odd" if odd else "lane-site"}, ("elsewhere: " if odd else "") + rank.site),
        ]
    return out


def _lane_piece(scale: Scale, start: float, end: float, kind: str, tip: str) -> Html:
    x, width = scale.pct(start), round(max(MIN_WIDTH_PCT, scale.pct(end) - scale.pct(start)), 3)
    return el(
        "svg",
        {"x": f"{x}%", "width": f"{width}%", "height": LANE_HEIGHT, "class": f"seg {kind}"},
        el("rect", {"width": "100%", "height": LANE_HEIGHT}, el("title", None, tip)),
    )


def _tip(seg: Segment, r: AttemptRecord) -> str:
    times = f"{seg.start:.2f} s → {seg.end:.2f} s ({seg.end - seg.start:.2f} s)"
    if seg.kind == "unknown":
        return f"{times}: the last phase reached was {r.phase} (this record predates phase timelines)"
    if seg.kind == "start":
        return f"{seg.name}: {times}, before the server's first phase line"
    return f"{seg.note or seg.name}: {times}"


def _nice_step(span: float) -> float:
    """1, 2 or 5 times a power of ten, giving four to ten ticks."""
    raw = span / 5
    power = 10 ** math.floor(math.log10(raw))
    return float(next(m * power for m in (1, 2, 5, 10) if m * power >= raw))


def _tick_class(pct: float) -> str:
    """Ticks at the edges are anchored inwards so their text is not cut."""
    return "tick first" if pct == 0 else "tick last" if pct > 95 else "tick"


def _seconds(t: float) -> str:
    if t >= 120:
        return f"{t / 60:g} min"
    return f"{t:g} s"
