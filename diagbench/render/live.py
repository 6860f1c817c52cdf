"""Live progress for `run`: a screen that fits the terminal, or plain lines off one (CI).

On a terminal: a header (done/total, running, elapsed, ETA), the running attempts (phase,
GPUs, time left before the timeout), as many finished ones as fit above them, and the rest
folded into one summary line; never taller than the terminal, so running attempts beyond
its height fold into one line too. Off a terminal: a line per start, phase change and end,
and a heartbeat every 30 s per running attempt, never wrapped. A resumed run's attempts
recorded before count as done from the start.

Showing the run never stops it: if the console fails (a closed pipe, a lost terminal,
rich's SystemExit on a broken pipe), the view goes dark and the run goes on.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from rich.console import Console, Group, RenderableType
from rich.live import Live
from rich.table import Table
from rich.text import Text

from diagbench.execute.slots import Slot
from diagbench.records.record import AttemptRecord
from diagbench.records.store import RunDir
from diagbench.render.hangs import outcome_words
from diagbench.render.report import OUTCOME_STYLE, deciding_line
from diagbench.render.text import visible
from diagbench.render.waits import HelperLine
from diagbench.safetext import one_line
from diagbench.spec.plan import PlannedAttempt

__all__ = ["FRAME_LINES", "HEARTBEAT_S", "REFRESH_PER_SECOND", "Progress", "duration", "ended"]

HEARTBEAT_S = 30.0
REFRESH_PER_SECOND = 4
FRAME_LINES = 3  # header, table header, and a line kept free so the frame never scrolls


@dataclass
class _Row:
    """One attempt as the screen shows it (mutable: only Progress touches it, under its lock)."""

    who: str
    params: dict[str, str]
    repeat: int
    phase: str = ""
    gpus: tuple[str, ...] = ()
    start: float | None = None
    end: float | None = None
    record: AttemptRecord | None = None
    waiting: bool = False  # for its GPUs, before its launch: no timeout runs yet


def duration(seconds: float) -> str:
    """12.3s, 3m12s, 1h04m: short enough for a narrow column."""
    if seconds < 60:
        return f"{seconds:.1f}s"
    minutes, secs = divmod(int(seconds), 60)
    if minutes < 60:
        return f"{minutes}m{secs:02d}s"
    return f"{minutes // 60}h{minutes % 60:02d}m"


class Progress:
    """Receives the run's events (from worker threads) and shows them; implements RunEvents."""

    def __init__(
        self,
        console: Console,
        timeout_s: float | None = None,
        heartbeat_s: float = HEARTBEAT_S,
        clock: Callable[[], float] = time.monotonic,
    ):
        self.console, self.timeout_s, self.heartbeat_s, self.clock = console, timeout_s, heartbeat_s, clock
        self.interactive = console.is_terminal
        self.lock = threading.Lock()
        self.rows: dict[str, _Row] = {}
        self.finished: list[_Row] = []  # in the order they ended
        self.before = 0  # of them, recorded before this diagbench opened the run (resumed)
        self.opened = clock()
        self.repeats = False
        self.live: Live | None = None
        self.stop = threading.Event()
        self.beat: threading.Thread | None = None
        self.helpers = HelperLine(console)

    # -- RunEvents ------------------------------------------------------------------------

    def on_open(self, run_dir: RunDir, planned: Sequence[PlannedAttempt], done: Sequence[AttemptRecord] = ()) -> None:
        self.opened = self.clock()
        self.repeats = any(p.repeat > 1 for p in planned)
        for item in planned:
            who = item.cell.id + (f" r{item.repeat}" if self.repeats else "")
            self.rows[item.name] = _Row(who, dict(item.cell.params), item.repeat)
        for record in done:
            if (row := self.rows.get(record.attempt)) is not None:
                row.record, row.phase, row.gpus = record, visible(record.phase or ""), tuple(record.gpus)
                self.finished.append(row)
        self.before = len(self.finished)
        earlier = f", {self.before} done before" if self.before else ""
        self._say(f"run directory: {run_dir.path}  ({len(planned)} attempt(s){earlier})")
        if self.interactive:
            self.live = Live(
                console=self.console,
                get_renderable=self.frame,
                refresh_per_second=REFRESH_PER_SECOND,
                transient=True,  # the outcome table that follows replaces the last frame
            )
            self._shown(self.live.start)
        elif self.heartbeat_s > 0:
            self.beat = threading.Thread(target=self._beat, name="heartbeat", daemon=True)
            self.beat.start()

    def on_helpers(self, what: str, pending: Sequence[str], elapsed_s: float, limit_s: float) -> None:
        self.helpers.tell(what, pending, elapsed_s, limit_s)  # before on_open: no screen of attempts yet

    def on_wait(self, item: PlannedAttempt, slot: Slot, why: str) -> None:
        with self.lock:
            row = self.rows[item.name]
            row.start, row.phase, row.gpus, row.waiting = self.clock(), why, tuple(slot.gpus), True
            self._plain(f"{row.who}: {why}")

    def on_start(self, item: PlannedAttempt, slot: Slot) -> None:
        with self.lock:
            row = self.rows[item.name]
            row.start, row.phase, row.gpus, row.waiting = self.clock(), "launching", tuple(slot.gpus), False
            where = f" on GPU {','.join(row.gpus)}" if row.gpus else ""
            self._plain(f"{row.who}: launching{where}")

    def on_phase(self, item: PlannedAttempt, phase: str) -> None:
        with self.lock:
            row = self.rows[item.name]
            row.phase = visible(phase)  # a server's words: its escape sequences are shown, never obeyed
            self._plain(f"{row.who}: {phase}, {duration(self.clock() - (row.start or self.opened))}")

    def on_done(self, item: PlannedAttempt, record: AttemptRecord) -> None:
        with self.lock:
            row = self.rows[item.name]
            row.end, row.record = self.clock(), record
            row.phase = visible(record.phase or (row.phase if row.phase != "launching" else ""))
            self.finished.append(row)
            self._plain(f"{row.who}: {ended(record)}")

    def close(self) -> None:
        self.stop.set()
        if self.live is not None:
            live, self.live = self.live, None
            self._shown(live.stop)
        if self.beat is not None:
            self.beat.join()
            self.beat = None

    # -- plain lines (CI logs) ------------------------------------------------------------

    def heartbeat(self) -> None:
        """One line per running attempt: where it is and for how long (also proof of life)."""
        with self.lock:
            now = self.clock()
            for row in self._running():
                self._plain(f"{row.who}: {row.phase or 'launching'}, {duration(now - (row.start or now))}")

    def _beat(self) -> None:
        while not self.stop.wait(self.heartbeat_s):
            self.heartbeat()

    def _plain(self, text: str) -> None:
        if not self.interactive:
            self._say(f"[{self._counts()}] {text}")

    def _say(self, text: str) -> None:
        self._shown(lambda: self.console.print(visible(text), markup=False, highlight=False, soft_wrap=True))

    def _shown(self, show: Callable[[], object]) -> None:
        """Show something; if the console fails, go dark for the rest of the run. Events come
        from the attempts' threads: an error here would end an attempt, not just the view."""
        try:
            show()
        except (OSError, SystemExit):  # rich raises SystemExit(1) on a broken pipe
            self.go_dark()

    def go_dark(self) -> None:
        """Show nothing more: the live screen stops, and every later line goes nowhere."""
        self.console, self.interactive = Console(quiet=True), False
        live, self.live = self.live, None
        if live is not None:  # half started, perhaps: whatever stopping it raises, nothing is shown anyway
            with contextlib.suppress(Exception, SystemExit):
                live.stop()

    def _counts(self) -> str:
        return f"{len(self.finished)}/{len(self.rows)} running {len(self._running())}"

    def _running(self) -> list[_Row]:
        return [r for r in self.rows.values() if r.start is not None and r.record is None]

    # -- the terminal screen --------------------------------------------------------------

    def frame(self) -> RenderableType:
        """What the terminal shows now, never taller than it: running rows first, then finished
        ones; what does not fit is folded into one line each."""
        with self.lock:
            now = self.clock()
            running, finished = self._running(), list(self.finished)
            waiting = len(self.rows) - len(finished) - len(running)
            room = self.console.size.height - FRAME_LINES - (1 if waiting else 0)
            shown_running, more = _fit_running(running, room, reserve=1 if finished else 0)
            room -= len(shown_running) + (1 if more else 0)
            folded, shown = _fold(finished, room)
            parts: list[RenderableType] = [self._header(now, len(finished), len(running))]
            if folded and room > 0:
                parts.append(_line(_summary(folded)))
            parts.append(self._table(now, shown, shown_running))
            if more:
                parts.append(_line(_more_running(more)))
            if waiting:
                parts.append(_line(f"{waiting} waiting"))
            return Group(*parts)

    def _header(self, now: float, done: int, running: int) -> Text:
        elapsed = now - self.opened
        left = len(self.rows) - done
        ended_here = done - self.before  # the pace is this diagbench's: a resumed run's earlier ones took no time here
        eta = duration(elapsed / ended_here * left) if ended_here > 0 and left else "-"
        text = f"{done}/{len(self.rows)} done · {running} running · {duration(elapsed)} elapsed · ETA {eta}"
        return Text(text, style="bold", no_wrap=True, overflow="ellipsis")

    def _table(self, now: float, finished: list[_Row], running: list[_Row]) -> Table:
        axes = list(next(iter(self.rows.values())).params) if self.rows else []
        gpus = any(r.gpus for r in (*finished, *running))
        table = Table(box=None, pad_edge=False, show_edge=False, header_style="bold")
        for column in (
            *axes,
            *(["#"] if self.repeats else []),
            "phase / outcome",
            *(["GPUs"] if gpus else []),
            "time",
            "left",
        ):
            table.add_column(Text(one_line(column)), no_wrap=True, overflow="ellipsis")  # axis names: never markup
        for row in finished:
            table.add_row(*self._cells(row, axes, gpus, now))
        for row in running:
            table.add_row(*self._cells(row, axes, gpus, now), style="bold")
        return table

    def _cells(self, row: _Row, axes: list[str], gpus: bool, now: float) -> list[Text]:
        start = row.start or now
        cells = [Text(one_line(row.params.get(a, ""))) for a in axes] + (
            [Text(str(row.repeat))] if self.repeats else []
        )
        if row.record is not None:
            r = row.record
            cells.append(Text(visible(outcome_words(r, short=True)), style=OUTCOME_STYLE.get(r.outcome, "")))
            timing = duration(r.time_to_outcome_s) if r.time_to_outcome_s is not None else "-"
            left = ""
        else:
            cells.append(Text(row.phase or "launching", style="cyan"))
            timing = duration(now - start)
            left = duration(max(0.0, self.timeout_s - (now - start))) if self.timeout_s and not row.waiting else ""
        if gpus:
            cells.append(Text(",".join(row.gpus)))
        return [*cells, Text(timing), Text(left)]


def ended(r: AttemptRecord) -> str:
    """How an attempt ended, in one line: `failed:oom after 12.3s: L29: ...` or `skipped: why`."""
    if not r.outcome.ran:
        return f"{r.label}: {r.reason}" if r.reason else r.label
    seconds = f" after {duration(r.time_to_outcome_s)}" if r.time_to_outcome_s is not None else ""
    return f"{visible(outcome_words(r))}{seconds}: {deciding_line(r)}"


def _fold(finished: list[_Row], room: int) -> tuple[list[_Row], list[_Row]]:
    """(folded into the summary line, shown as rows): the latest rows that fit in `room` lines."""
    if len(finished) <= room:
        return [], finished
    keep = max(0, room - 1)  # the summary line takes one
    return finished[: len(finished) - keep], finished[len(finished) - keep :]


def _fit_running(running: list[_Row], room: int, reserve: int) -> tuple[list[_Row], list[_Row]]:
    """(shown as rows, folded into one line): all of them when they fit in `room` lines, else
    the oldest, which are the closest to their timeout (one timeout for all), leaving a line
    for the fold and `reserve` lines for the finished ones' summary."""
    if len(running) <= room:
        return running, []
    oldest = sorted(running, key=lambda r: r.start or 0.0)  # stable: ties stay in plan order
    shown = {id(r) for r in oldest[: max(0, room - 1 - reserve)]}
    return [r for r in running if id(r) in shown], [r for r in oldest if id(r) not in shown]


def _more_running(rows: list[_Row]) -> str:
    """`+7 more running: 4 capture, 3 load`: phases by their first word (`capture bs=8` is a capture)."""
    counts = Counter((r.phase.split() or ["launching"])[0] for r in rows)
    return f"+{len(rows)} more running: " + ", ".join(f"{n} {phase}" for phase, n in counts.most_common())


def _line(text: str) -> Text:
    """A dim line of the frame that never wraps (the frame's height is counted in lines)."""
    return Text(text, style="dim", no_wrap=True, overflow="ellipsis")


def _summary(rows: list[_Row]) -> str:
    counts = Counter(r.record.label for r in rows if r.record is not None)
    words = " · ".join(f"{n} {label}" for label, n in counts.most_common())
    return f"{len(rows)} earlier: {words}"
