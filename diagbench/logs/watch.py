"""The watch: a pure state machine from log hits, exits and the clock to one outcome.

It owns the outcome rules; `run` feeds it live, `classify` a file; callers pass `now`.

A failure line opens a short settle window (`settle_s` seconds or `settle_lines` lines;
window.py) so that a wrapper printed just after the root cause (SGLang's "Capture cuda graph
failed: ...", after the traceback) can still decide the class; a signature marked `settles`
ends the window at once, a phase line marked `retry` sets it aside (the server tries again).
The best failure is the highest priority, then the earliest; the other classes seen become
secondary classes.
"""

from __future__ import annotations

import functools
import re
from collections import deque

from diagbench.logs.decision import Decision, PhaseChange, ReadyRule
from diagbench.logs.events import EVIDENCE_CHARS, death_hit, evidence_of, is_event, signal_name
from diagbench.logs.firstrank import FALLOUT_SETTLE_S, waits_for_first
from diagbench.logs.scan import Hit
from diagbench.logs.servers import Detector
from diagbench.logs.signatures import PREFIX, Cause, Kind, Signature
from diagbench.logs.window import Window
from diagbench.vocab import Evidence, FailureClass, Outcome

__all__ = ["REQUEST_SETTLE_S", "ROOT_CAUSE_LINES", "SETTLE_LINES", "SETTLE_S", "STARTUP", "Watch"]


# A Python traceback echoes source lines: `    raise Exception(f"Capture cuda graph failed: {e}")`
# names the failure without being it. Such lines never decide (seen on the refserver's GPU run).
@functools.cache
def _echoed_source() -> re.Pattern[bytes]:
    return re.compile(("^" + PREFIX + r"\s{2,}(?:raise|assert)\b").encode())  # compiled when first needed


SETTLE_S = 0.1
STARTUP = ("load", "compile", "capture")  # start-up work: one after a weak ready line voids it (bound, then loads)
SETTLE_LINES = 200
ROOT_CAUSE_LINES = 50  # how near a traceback's last line must be to name a generic failure
# A failed ready request waits this long for the server's own error line (vLLM's dying engine
# prints its traceback around the time the API server answers 500, and then shuts down).
REQUEST_SETTLE_S = 5.0


class Watch:
    """Decides one launch's outcome from what it is fed."""

    def __init__(
        self,
        rule: ReadyRule,
        deadline: float | None,
        timeout_s: float | None = None,
        settle_s: float = SETTLE_S,
        settle_lines: int = SETTLE_LINES,
        server: str | None = None,
        whole_log: bool = False,
        started: float = 0.0,
    ):
        self.rule, self.deadline, self.timeout_s = rule, deadline, timeout_s
        self.started = started  # the launch's `now`: phase changes are timed from it
        # a finished log: its ready line is confirmed at its end (a bind error may still follow)
        self.whole_log = whole_log
        self.detector = Detector(server)  # which server wrote the log: given, or from its markers
        self.settle_s, self.settle_lines = settle_s, settle_lines
        self.phase: str | None = None
        self.phases: list[PhaseChange] = []  # every change of `phase`, in order
        self.decision: Decision | None = None
        self.lines = 0
        self._seen: set[str] = set()
        self._ready_hit: Hit | None = None
        self._http_ok = False
        self._answer: tuple[bool, str] | None = None  # the ready request's (ok, detail)
        self._window: Window | None = None
        self._retried_at = 0  # the line of the last retry: its own error words are what it retries
        self._weak: Hit | None = None  # the last line a weak signature matched
        self._weak_ready: Hit | None = None  # the last ready line that only a finished log can confirm
        self.bound_early: Evidence | None = None  # a weak ready line a start-up phase came after: not up then
        self._came_up: Evidence | None = None  # a ready line the failure of a whole log came after
        self._recent_weak: deque[Hit] = deque(maxlen=32)
        self._handled: bytes | None = None  # the header of the last record that reported a handled error

    # -- inputs ------------------------------------------------------------------------

    def feed(self, hits: list[Hit], last_line_no: int, now: float) -> Decision | None:
        """Hits from newly written lines, up to line `last_line_no`."""
        if self.decision:
            self._note_markers(hits)
            return self.decision
        self.lines = last_line_no
        for index, hit in enumerate(hits):
            if (decided := self._decided_before(hit, now)) is not None:
                self._note_markers(hits[index:])  # the server is named from all the lines read
                return decided
            if self._after_ready(hit) or self._in_handled_record(hit):
                continue
            if self._take(hit, now):
                self._take_same_line(hit, hits[index + 1 :], now)
                self._note_markers(hits[index + 1 :])
                return self._decide_failure(now)
        if self._window and last_line_no >= self._window.closes_after_line:
            return self._decide_failure(now)
        return None if self.whole_log else self._maybe_ready(now)

    def http_ready(self, now: float) -> Decision | None:
        if self.decision:
            return self.decision
        self._http_ok = True
        return self._maybe_ready(now)

    @property
    def came_up(self) -> Evidence | None:
        """The ready line a whole log's failure came after (a framework's "running on" line
        before the weak error it ends in, or the server's own before its engine died)."""
        return self._came_up

    @property
    def wants_request(self) -> bool:
        """Everything else holds: the ready request is what ready waits for now."""
        return bool(self.rule.request) and self.decision is None and self._answer is None and self._others_hold()

    def request_answered(self, ok: bool, detail: str, now: float) -> Decision | None:
        """The ready request came back (`ok`: with the expected status)."""
        if self.decision:
            return self.decision
        self._answer = (ok, detail)
        if ok:
            return self._maybe_ready(now)
        if self._window is None:  # the server's own error line may still be on its way: let it decide
            self._window = Window(now + max(self.settle_s, REQUEST_SETTLE_S), self.lines + self.settle_lines)
        return None

    def member_died(self, words: str, sig: int, now: float) -> Decision | None:
        """A process of the server's tree, not the main one, was ended by signal `sig` (`words` name
        it). Its parent reports it (a launcher names the rank, a server its worker) once it sees
        it, so the window waits for that report as for fallout (FALLOUT_SETTLE_S; the launch's
        exit ends the wait). Once a failure is being decided, deaths are its fallout: ignored."""
        hit = death_hit(words, sig, self.lines)
        if self.decision or hit is None or self._window is not None:
            return self.decision
        self._window = Window(now + max(self.settle_s, FALLOUT_SETTLE_S), self.lines + self.settle_lines, [hit])
        return None

    def exited(self, code: int | None, now: float) -> Decision:
        """The server's main process ended (its output already fed)."""
        if self.decision:
            return self.decision
        if self._window:
            return self._decide_failure(now)
        exit_code, sig = (None, -code) if code is not None and code < 0 else (code, None)
        how = f"killed by {signal_name(sig)}" if sig else f"exit code {exit_code}"
        weak = self._weak
        return self._set(
            Decision(
                Outcome.CRASHED,
                f"exited before ready ({how})",
                now,
                exit_code=exit_code,
                signal=sig,
                signature=weak.signature.id if weak else None,
                evidence=evidence_of(weak) if weak else None,
            )
        )

    def tick(self, now: float) -> Decision | None:
        """Time passed: the settle window or the deadline may have run out."""
        if self.decision:
            return self.decision
        if self._window and now >= self._window.closes_at:
            return self._decide_failure(now)
        if self.deadline is not None and now >= self.deadline:
            if self._window:
                return self._decide_failure(now)
            waited = f" within {self.timeout_s:g}s" if self.timeout_s else ""
            where = f"; last phase: {self.phase}" if self.phase else ""
            where += f"; no answer yet to {self.rule.request}" if self.wants_request else ""
            return self._set(Decision(Outcome.TIMEOUT, f"not ready{waited}{where}", now))
        return None

    def end_of_log(self, now: float) -> Decision | None:
        """The log is complete (offline classification): close an open window."""
        if self.decision:
            return self.decision
        if self._window:
            return self._decide_failure(now)
        if self._ready_hit is not None and (decided := self._maybe_ready(now)) is not None:
            return decided
        weak, ready = self._weak, self._weak_ready
        if ready is not None and (weak is None or weak.line_no < ready.line_no):
            reason = "the log ends after its ready line"
            return self._set(
                Decision(Outcome.READY, reason, now, signature=ready.signature.id, evidence=evidence_of(ready))
            )
        if weak is None:
            return None
        self._came_up = evidence_of(ready) if ready is not None else None
        return self._set(
            Decision(
                Outcome.FAILED,
                f"the log ends in an error ({weak.signature.id})",
                now,
                failure_class=weak.signature.failure_class,
                signature=weak.signature.id,
                evidence=evidence_of(weak),
            )
        )

    def wakeup(self) -> float | None:
        """The next time `tick` has something to decide."""
        times = [t for t in (self.deadline, self._window and self._window.closes_at) if t]
        return min(times) if times and not self.decision else None

    def stop(self, outcome: Outcome, reason: str, now: float) -> Decision:
        """Decided from outside: cancelled by the user, or the launch itself failed."""
        return self.decision or self._set(Decision(outcome, reason, now))

    # -- rules -------------------------------------------------------------------------

    def _decided_before(self, hit: Hit, now: float) -> Decision | None:
        """What the lines before `hit` decided already, however the log was cut into reads: a closed
        settle window, or a ready line only a bind error could overrule (later failures are its life)."""
        if self._window and hit.line_no > self._window.closes_after_line:
            return self._decide_failure(now)
        ready = self._ready_hit
        if ready is not None and hit.line_no > ready.line_no and not (self.whole_log or hit.signature.after_ready):
            return self._maybe_ready(now)
        return None

    def _after_ready(self, hit: Hit) -> bool:
        """A line after a whole log's ready line that only a bind error overrules: skipped (markers count)."""
        ready = self._ready_hit
        if not self.whole_log or ready is None or hit.line_no <= ready.line_no or hit.signature.after_ready:
            return False
        if self._window is not None:
            return False  # a failure before the ready line is being decided: the line does not stand
        if hit.signature.kind is Kind.MARKER:
            self.detector.saw(hit.signature)
        return True

    def _in_handled_record(self, hit: Hit) -> bool:
        """A failure line in a record of an error the program went on from (`WON'T CONVERT`): weak."""
        sig = hit.signature
        if sig.kind is not Kind.FAILURE:
            return False
        if sig.handled:
            self._handled = sig.record_of(hit.match)
            return False  # the opening line itself is taken as its signature says
        if self._handled is None or self._handled not in hit.line:
            return False
        self._weak = hit
        self._recent_weak.append(hit)
        return True

    def _take(self, hit: Hit, now: float) -> bool:
        """Record one hit; True when it settles a failure now."""
        kind = hit.signature.kind
        self._seen.add(hit.signature.id)
        if kind is Kind.MARKER:
            self.detector.saw(hit.signature)
        elif kind is Kind.PHASE and hit.signature.retry and self._window:
            self._window = self._window.after_retry(request_failed=self._answer is not None and not self._answer[0])
            self._retried_at = hit.line_no  # it tries again: its next lines say how that went
            if self._ready_hit is None:  # after the ready line the retry is a request's (Ollama loads at the first)
                self._enter(hit.signature.phase_name(hit.match), now)
        elif kind is Kind.FAILURE and (hit.line_no == self._retried_at or not self._met(hit.signature)):
            pass  # the error a retry line names is the one it retries; a reading whose context is missing
        elif kind is Kind.PHASE and not self._window:
            self._enter(hit.signature.phase_name(hit.match), now)
        elif kind is Kind.READY and self.rule.log and self._ready_hit is None:
            self._take_ready(hit)
        elif kind is Kind.FAILURE and _echoed_source().match(hit.line):
            self._weak = hit  # the raise it echoes names the error, if the excerpt stops before it
        elif kind is Kind.FAILURE and hit.signature.weak:
            self._weak = hit
            self._recent_weak.append(hit)
        elif kind is Kind.FAILURE:
            if self._window is None:  # a rank's fallout waits for the first rank's own error (firstrank.py)
                settle = max(self.settle_s, FALLOUT_SETTLE_S) if waits_for_first(hit.line) else self.settle_s
                self._window = Window(now + settle, hit.line_no + self.settle_lines)
            self._window.hits.append(hit)
            return hit.signature.settles
        return False

    def _take_same_line(self, settled: Hit, rest: list[Hit], now: float) -> None:
        """The other hits on the line that settled a failure: one line is read whole, so the
        signatures' priorities choose among them, not the packs' order."""
        for hit in rest:
            if hit.line_no != settled.line_no:
                return
            if not (self._after_ready(hit) or self._in_handled_record(hit)):
                self._take(hit, now)

    def _enter(self, phase: str, now: float) -> None:
        if phase != self.phase:
            self.phase = phase
            self.phases.append(PhaseChange(phase, round(now - self.started, 3)))
        if self._weak_ready is not None and phase.startswith(STARTUP):  # bound before it loads: order matters
            self.bound_early, self._weak_ready = evidence_of(self._weak_ready), None

    def _note_markers(self, hits: list[Hit]) -> None:
        for hit in hits:
            if hit.signature.kind is Kind.MARKER:
                self.detector.saw(hit.signature)

    def _met(self, sig: Signature) -> bool:
        """A line that counts only after another (`requires`) has that one behind it."""
        return not sig.requires or any(r in self._seen for r in sig.requires)

    def _take_ready(self, hit: Hit) -> None:
        sig = hit.signature
        if not self.detector.allows(sig) or not self._met(sig):
            return
        if sig.weak:
            self._weak_ready = hit
        else:
            self._ready_hit = hit

    def _others_hold(self) -> bool:
        """The ready line and the health probe, whichever the rule asks for, hold."""
        log_ok = self._ready_hit is not None or not self.rule.log
        http_ok = self._http_ok or not self.rule.http
        return self._window is None and log_ok and http_ok

    def _maybe_ready(self, now: float) -> Decision | None:
        if not self._others_hold() or (self.rule.request and not (self._answer and self._answer[0])):
            return None
        said = [f"GET {self.rule.http_path} -> 200"] if self.rule.http else []
        said += [self._answer[1]] if self._answer else []
        hit = self._ready_hit
        if hit is not None:
            reason = " and ".join(["ready line", *said])
            decision = Decision(Outcome.READY, reason, now, signature=hit.signature.id, evidence=evidence_of(hit))
            return self._set(decision)
        return self._set(Decision(Outcome.READY, " and ".join(said), now, signature="http"))

    def _decide_failure(self, now: float) -> Decision:
        assert self._window is not None
        if not self._window.hits:
            return self._request_failed(now)
        best = self._window.best()
        said = "a process of its tree died" if is_event(best) else "failure line"
        shown, reason = best, f"{said} ({best.signature.id})"
        up = self._ready_hit  # a server's own ready line (a framework's may come before its warm-up)
        port = best.signature.failure_class == FailureClass.PORT_IN_USE
        if self.whole_log and up is not None and up.line_no < best.line_no and not port:
            self._came_up = evidence_of(up)  # it came up, then this ended it (a port taken after: it never served)
        root = self._root_cause_near(best)
        if root is not None:  # "Engine core initialization failed. See root cause above."
            shown, reason = root, f"failure line ({best.signature.id}); its error at line {root.line_no}"
        if self._answer is not None and not self._answer[0]:
            reason += f"; ready request: {self._answer[1]}"
        return self._set(
            Decision(
                Outcome.FAILED,
                reason,
                now,
                failure_class=best.signature.failure_class,
                secondary_classes=self._window.secondary(best),
                signature=shown.signature.id,
                evidence=evidence_of(shown),
            )
        )

    def _request_failed(self, now: float) -> Decision:
        """Only the ready request failed: the server's last error, if it printed one, says why."""
        assert self._answer is not None
        detail = self._answer[1]
        near = [h for h in self._recent_weak if self.lines - h.line_no <= ROOT_CAUSE_LINES]
        root = near[-1] if near else None
        return self._set(
            Decision(
                Outcome.FAILED,
                f"ready request failed: {detail}" + (f"; its error at line {root.line_no}" if root else ""),
                now,
                failure_class=FailureClass.OTHER,
                signature=root.signature.id if root else "ready.request",
                # line 0: no log line decided, the request's answer did
                evidence=evidence_of(root) if root else Evidence(0, detail[:EVIDENCE_CHARS]),
            )
        )

    def _root_cause_near(self, best: Hit) -> Hit | None:
        """For a generic failure (class `other`: "EngineCore failed to start"), the traceback's last
        line close to it says more (`ValueError: max_model_len ...`). A line printed before its
        traceback (`cause: below`) takes the first error after it: later ones echo the same death."""
        cause = best.signature.cause
        if best.signature.failure_class != FailureClass.OTHER or cause is Cause.HERE or self._window is None:
            return None
        strong_lines = {h.line_no for h in self._window.hits}
        weak = [h for h in self._recent_weak if h.line_no not in strong_lines]
        if cause is Cause.BELOW:
            below = [h for h in weak if h.line_no > best.line_no]
            return below[0] if below else None
        near = [h for h in weak if 0 <= best.line_no - h.line_no <= ROOT_CAUSE_LINES]
        return near[-1] if near else None

    def _set(self, decision: Decision) -> Decision:
        self.decision = decision
        return decision
