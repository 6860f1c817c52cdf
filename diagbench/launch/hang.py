"""One attempt's hang handling: end it early when it stalls, and take its tree's stacks
before teardown when it timed out or stalled (or, with `--stacks always`, failed with no
deciding line)."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path

from diagbench.launch.flight import ask_for_dumps, behind, behind_words, flight_env, read_dumps
from diagbench.launch.hangranks import with_ranks
from diagbench.launch.hangsite import summarise
from diagbench.launch.process import ServerProcess, members
from diagbench.launch.spin import SpinWatch, spin_rule
from diagbench.launch.stacks import take_stacks
from diagbench.launch.stall import StallWatch
from diagbench.logs.decision import Decision
from diagbench.logs.watch import Watch
from diagbench.records.parts import Hang
from diagbench.records.record import AttemptRecord
from diagbench.records.redact import Redactor
from diagbench.records.typed import build
from diagbench.safefiles import Folder
from diagbench.spec.load import ServerSpec
from diagbench.vocab import Outcome

__all__ = ["FAULTHANDLER_VAR", "SITE_DIR", "STACKS_FOLDER", "HangCheck", "faulthandler_env"]

STACKS_FOLDER = "stacks"
FAULTHANDLER_VAR = "DIAGBENCH_FAULTHANDLER_DIR"
SITE_DIR = Path(__file__).resolve().parent / "faulthandler_site"


def faulthandler_env(server: ServerSpec, folder: Path, inherited: str | None) -> dict[str, str]:
    """The environment changes `server.stacks: faulthandler` (or flight-recorder, launch/flight.py)
    asks for (recorded in env_changes): diagbench's sitecustomize first on PYTHONPATH, and where it writes."""
    if server.flight_recorder:
        return flight_env(folder, SITE_DIR, inherited)
    if not server.faulthandler:
        return {}
    target = folder / STACKS_FOLDER / "faulthandler"
    with Folder.open(folder) as attempt, attempt.walk((STACKS_FOLDER, "faulthandler"), make=True):
        pass  # made below the attempt's folder, never through a link
    path = str(SITE_DIR) + (f":{inherited}" if inherited else "")
    return {"PYTHONPATH": path, FAULTHANDLER_VAR: str(target), "PYTHONFAULTHANDLER": "1"}


def stall_rule(stall_s: float) -> str:
    """Said where a stall ends an attempt: which rule did it, and how to lengthen or drop it."""
    return (
        f"ended by the stall rule (server.stall or --stall {stall_s:g}s), which a silent download trips too: "
        "give it more, or leave it out to wait the whole timeout"
    )


class HangCheck:
    """The stall rule on the attempt's wake-ups, and the stacks before teardown."""

    def __init__(self, server: ServerSpec, pid: int, gpu_indices: Sequence[int], folder: Path, now: float):
        self.server, self.folder = server, folder
        self.stall = StallWatch(pid, server.stall, gpu_indices, now) if server.stall else None
        self.spin = SpinWatch(pid, server.spin) if server.spin else None
        self._next_spin = now + 1.0
        self.stalled_after_s: float | None = None
        self.hang: Hang | None = None

    def wakeup(self) -> float | None:
        wakes = [w for w in (self.stall.next_check if self.stall else None, self._spin_wakeup()) if w is not None]
        return min(wakes) if wakes else None

    def _spin_wakeup(self) -> float | None:
        return self._next_spin if self.spin is not None else None

    def check(self, watch: Watch, log_bytes: int, now: float) -> None:
        """End the watch as a stalled timeout once the tree has been quiet for `server.stall`,
        or every rank has waited at the same frame for `server.spin`."""
        if watch.decision is not None:
            if self.spin is not None:
                self.spin.stop()
            return
        if self.spin is not None and now >= self._next_spin:
            self._next_spin = now + 1.0
            spun = self.spin.spinning(now)
            if spun is not None:
                self.spin.stop()
                self.stalled_after_s = round(spun[0], 3)
                where = f" in {watch.phase}" if watch.phase else ""
                reason = f"spinning {spun[0]:.0f}s{where}: {spun[1]}; {spin_rule(self.spin.spin_s)}"
                watch.stop(Outcome.TIMEOUT, reason, now)
                return
        if self.stall is None:
            return
        quiet = self.stall.quiet_for(now, log_bytes)
        if quiet is None:
            return
        self.stalled_after_s = round(quiet, 3)
        where = f" in {watch.phase}" if watch.phase else ""
        work = "CPU or GPU" if self.stall.gpu_indices else "CPU"  # GPUs count only where they were handed out
        quiet_words = f"stalled {quiet:.0f}s{where}: no new log line, no {work} work in the tree"
        reason = f"{quiet_words}; {stall_rule(self.stall.stall_s)}"
        watch.stop(Outcome.TIMEOUT, reason, now)

    def wants_stacks(self, decision: Decision) -> bool:
        when = self.server.stacks
        if when == "never" or decision.outcome is Outcome.CANCELLED:
            return False
        if decision.outcome is Outcome.TIMEOUT:
            return True
        undecided = decision.outcome in (Outcome.FAILED, Outcome.CRASHED) and decision.signature is None
        return when == "always" and undecided

    def take(self, proc: ServerProcess, decision: Decision, secrets: Callable[[], Redactor]) -> None:
        """Stacks of every live process of the tree, before the first signal. `secrets` builds
        the redactor, asked for only when stacks are taken: a decision that wants none goes
        straight to its SIGTERM."""
        if self.spin is not None:
            self.spin.stop(wait=self.wants_stacks(decision))  # a sample in progress holds the ranks by ptrace
        if not self.wants_stacks(decision):
            return
        started = time.monotonic()
        redactor = secrets()
        fh_dir = self.folder / STACKS_FOLDER / "faulthandler" if self.server.faulthandler else None
        try:
            taken = take_stacks(members(proc), self.folder / STACKS_FOLDER, redactor, fh_dir)
        except OSError as exc:  # the disk, not the server: the attempt's outcome stands, its stacks are lost
            why = redactor.log(f"stacks could not be written: {exc}")
            self.hang = Hang(proc.pid, "?", None, (), None, notes=(why,))
            return
        hang = summarise(taken, STACKS_FOLDER)
        if hang is not None:
            hang = self._flight(with_ranks(hang, taken), len({s.rank.rank for s in taken if s.rank}))
            hang = replace(hang, taken_s=round(time.monotonic() - started, 3))
            self.hang = build(Hang, redactor.deep(dict(hang.to_json())))

    def _flight(self, hang: Hang, ranks: int) -> Hang:
        """With `server.stacks: flight-recorder`: each rank's dump asked for and read, the
        ranks behind the others named (after the stacks: those are the tree as it hung)."""
        if not self.server.flight_recorder:
            return hang
        try:
            ask_for_dumps(self.folder, ranks)
        except OSError as exc:
            return replace(hang, notes=(*hang.notes, f"flight recorder: {exc}"))
        dumps, notes = read_dumps(self.folder)
        if not dumps:
            notes.append("flight recorder: no rank dumped (torch.distributed not initialised, or no Python rank)")
        found = behind(dumps)
        said = behind_words(found)
        words = "; ".join(w for w in (hang.words, said) if w) or None
        return replace(hang, behind=tuple(found), words=words, notes=(*hang.notes, *notes))

    def recorded(self, record: AttemptRecord) -> AttemptRecord:
        """The record with its `stalled`, `stalled_after_s` and `hang`."""
        return replace(
            record, stalled=self.stalled_after_s is not None, stalled_after_s=self.stalled_after_s, hang=self.hang
        )
