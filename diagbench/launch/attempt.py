"""One attempt's lifecycle: launch, read the log as it is written, decide, tear down, record."""

from __future__ import annotations

import contextlib
import selectors
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from diagbench.errors import LaunchError, WriteError
from diagbench.launch.caches import compile_caches
from diagbench.launch.cause import with_cause
from diagbench.launch.command import build_command, build_env, probe_url
from diagbench.launch.deaths import Death, Descendants
from diagbench.launch.hang import HangCheck, faulthandler_env
from diagbench.launch.load import price_launch
from diagbench.launch.logfile import CappedLog, LogStats
from diagbench.launch.ports import lease_port, port_holder
from diagbench.launch.probes import Readiness
from diagbench.launch.process import Launch, ServerProcess, Teardown, stop_tree
from diagbench.launch.reader import LogReader
from diagbench.launch.tags import Tag
from diagbench.logs.decision import Decision, PhaseChange
from diagbench.logs.scan import Scanner
from diagbench.logs.watch import Watch
from diagbench.records.parts import Price
from diagbench.records.record import AttemptRecord
from diagbench.records.redact import Redactor, redact, redact_argv, server_redactor
from diagbench.spec.load import ServerSpec
from diagbench.spec.plan import PlannedAttempt
from diagbench.spec.ready import timeout_hint
from diagbench.vocab import FailureClass, Outcome

__all__ = ["DRAIN_AFTER_STOP_S", "EXIT_DRAIN_READS", "PROBE_JOIN_S", "PhaseCallback", "run_attempt"]

DRAIN_AFTER_STOP_S = 2.0  # keep what a dying server prints, but not forever
EXIT_DRAIN_READS = 1024  # up to 64 MB left in the pipe at exit (a worker may still be writing)
PROBE_JOIN_S = 5.0


PhaseCallback = Callable[[PlannedAttempt, str], None]


def run_attempt(
    planned: PlannedAttempt,
    server: ServerSpec,
    folder: Path,
    scanner: Scanner,
    tag: Tag,
    cancel_fd: int,
    on_phase: PhaseCallback,
    hurry: threading.Event | None = None,
    gpu_indices: Sequence[int] = (),
) -> AttemptRecord:
    """Launch one attempt and return its record (not yet written). `scanner` is this
    attempt's own (see Scanner.fork); `hurry` cuts the teardown's grace short;
    `gpu_indices` (host indices) are the GPUs whose activity counts as work for server.stall.
    Raises WriteError, after teardown, when server.log could not be written."""
    port_label = f"attempt {planned.name} of {tag.run_dir}"
    with compile_caches(server.fresh_caches, tag.owner) as caches, lease_port(server.port, port_label) as lease:
        t0 = time.monotonic()
        argv = build_command(server, planned.cell, lease.port)
        env, changes = build_env(server, planned.cell, lease.port, tag, caches)
        extra = faulthandler_env(server, folder, env.get("PYTHONPATH"))
        env, changes = {**env, **extra}, {**changes, **extra}
        base = _record_start(planned, argv, changes)
        if lease.holder is not None:
            reason = f"port {lease.port} is already in use by {lease.holder} (stop it, or set server.port: auto)"
            return _launch_error(base, reason, t0)
        rule, timeout = server.ready_rule, server.timeout
        watch = Watch(rule, t0 + timeout, timeout, settle_s=server.settle, server=server.kind, started=t0)
        secrets = server_redactor(server, [planned.cell.env], [planned.cell.args])
        try:
            log = CappedLog(folder / "server.log", server.max_log, secrets.known)
        except OSError as exc:
            raise WriteError(folder / "server.log", exc) from None
        try:
            try:
                proc = ServerProcess(Launch(argv, env, server.cwd, server.shell, tag))
            except LaunchError as exc:
                return _launch_error(base, str(exc), t0)
            reader = LogReader(proc, log, scanner, watch)
            hang = HangCheck(server, proc.pid, gpu_indices, folder, t0)
            supervisor = _Supervisor(server, lease.port, cancel_fd, planned, on_phase, hurry, hang, secrets)
            decision, teardown, price = supervisor.supervise(proc, reader)
        finally:
            stats = log.close()
        if log.error is not None:
            raise log.error
        decision = _shell_could_not_start(decision) if server.shell else decision
        decision = _name_port_holder(decision, lease.port)
        record = _record(base, decision, watch, reader, teardown, t0, stats)
        record = with_cause(record, folder / "server.log", stats)
        phases = _timeline(watch.phases, decision.at - t0)
        return hang.recorded(replace(record, phases=phases, price=price))


def _timeline(phases: list[PhaseChange], decided_s: float) -> list[PhaseChange]:
    """The phase changes (seconds since launch), none later than the decision (rounded as
    time_to_outcome_s is)."""
    return [PhaseChange(p.name, min(p.at_s, round(decided_s, 4))) for p in phases]


def _record_start(planned: PlannedAttempt, argv: tuple[str, ...], changes: dict[str, str | None]) -> dict[str, Any]:
    """The record's fields known before launch (secret-looking values redacted)."""
    return {
        "cell_id": planned.cell.id,
        "repeat": planned.repeat,
        "attempt": planned.name,
        "params": dict(planned.cell.params),
        "command": redact_argv(argv),
        "env_changes": redact(changes),
        "started_at": _now_iso(),
    }


@dataclass(frozen=True)
class _Supervisor:
    """What watching one attempt needs besides the process and its reader."""

    server: ServerSpec
    port: int
    cancel_fd: int
    planned: PlannedAttempt
    on_phase: PhaseCallback
    hurry: threading.Event | None
    hang: HangCheck
    secrets: Redactor  # what is secret in this attempt's launch (server.log is blanked of it too)

    def supervise(self, proc: ServerProcess, reader: LogReader) -> tuple[Decision, Teardown, Price | None]:
        """Watch the server until decided (and price it, when asked, once ready), then (stacks
        first, if hung) stop its whole tree, whatever happened."""
        server, port = self.server, self.port
        request = server.ready_request
        readiness = Readiness(
            probe_url(server.ready_http, port) if server.ready_http else None,
            request,
            probe_url(request.path, port) if request else None,
        )
        teller = _PhaseTeller(self.planned, self.on_phase)
        decided: Decision | None = None
        pinned = False
        try:
            readiness.start()
            decision = decided = _watch(proc, reader, readiness, self, teller)
            if decision.outcome is Outcome.TIMEOUT:
                hung = self.hang.stalled_after_s is not None and (server.kind is not None or bool(reader.watch.phase))
                decision = _timeout_said(decision, server, readiness, reader, hung)
            self.hang.take(proc, decision, self.redactor)  # before teardown: the tree as it hung
            price = None
            if decision.outcome is Outcome.READY and server.price is not None:
                reader.catch_up()
                reader.log.pin(decision.evidence)  # before the pricing load's output
                pinned = True
                price = self.price(reader)
        finally:
            before = proc.exit_code()  # it may have ended on its own after the decision (exit 0 after ready)
            try:
                teardown = stop_tree(proc, server.grace, self.hurry)
            finally:
                reader.catch_up()  # the read that decided, held back until the SIGTERM had gone
            if decided is not None and not pinned:  # nothing was read since the decision
                reader.log.pin(decided.evidence)  # its last part stays in server.log (capped: MBs to write)
            _drain(reader)
            proc.close()
            readiness.close(PROBE_JOIN_S)  # after the teardown: a request in flight ends with the server
            teller.tell(reader.watch.phases)  # those the deciding read held: told after its SIGTERM
        return _with_exit(decision, before, proc.exit_code()), teardown, price

    def redactor(self) -> Redactor:
        """What is secret in this attempt's launch, for its stacks (learned before the launch)."""
        return self.secrets

    def price(self, reader: LogReader) -> Price | None:
        """The pricing load (triage --price), with the server's pipe kept drained meanwhile."""
        if self.server.price is None:
            return None

        def pump() -> bool:
            reader.pump(after_decision=True)
            return not reader.eof

        url = probe_url(self.server.price.request.path, self.port)
        return price_launch(url, self.server.price, self.cancel_fd, None if reader.eof else reader.server.pipe, pump)


def _timeout_said(
    decision: Decision, server: ServerSpec, readiness: Readiness, reader: LogReader, hung: bool = False
) -> Decision:
    """A timeout's reason with what the health probe last got and, with no deciding line,
    a hint from the log's last line (worked out for timeouts only: not on a ready line's way
    to its SIGTERM); `hung`: a server the packs recognise (its kind, or a phase seen) stalled."""
    if said := readiness.health_said():
        decision = replace(decision, reason=f"{decision.reason}; GET {server.ready_http} last got {said}")
    if not decision.evidence and (hint := timeout_hint(reader.last_line, server.ready_log, server.ready_http, hung)):
        decision = replace(decision, reason=f"{decision.reason}; {hint}")
    return decision


def _with_exit(decision: Decision, before: int | None, after: int | None) -> Decision:
    """The decision with the main process's real end where the decision came before it: its
    exit code (or signal) if it ended on its own before teardown, its exit code if it ended
    with one while the teardown's SIGTERM met it already exiting; a death by our signal is
    the teardown's, not the server's, and stays unrecorded."""
    if decision.exit_code is not None or decision.signal is not None:
        return decision
    code = before if before is not None else (after if after is not None and after >= 0 else None)
    if code is None:
        return decision
    return replace(decision, exit_code=code if code >= 0 else None, signal=-code if code < 0 else None)


def _record(
    base: dict[str, Any],
    decision: Decision,
    watch: Watch,
    reader: LogReader,
    teardown: Teardown,
    t0: float,
    log: LogStats,
) -> AttemptRecord:
    return AttemptRecord(
        **base,
        outcome=decision.outcome,
        reason=decision.reason,
        failure_class=decision.failure_class,
        secondary_classes=list(decision.secondary_classes),
        signature=decision.signature,
        evidence=decision.evidence,
        exit_code=decision.exit_code,
        signal=decision.signal,
        phase=watch.phase,
        time_to_outcome_s=round(decision.at - t0, 4),
        duration_s=round(time.monotonic() - t0, 4),
        ended_at=_now_iso(),
        log_bytes=reader.bytes,
        log_lines=reader.line_no,
        log_truncated=log.truncated,
        log_kept_bytes=log.kept,
        log_dropped_bytes=log.dropped,
        killed=teardown.killed,
        left_behind=teardown.left_behind,
        teardown_s=round(teardown.seconds, 4),
        sigterm_at=teardown.sigterm_at,
    )


@dataclass
class _PhaseTeller:
    """Passes each phase change on once, in order (several arrive in one read)."""

    planned: PlannedAttempt
    on_phase: PhaseCallback
    told: int = 0

    def tell(self, phases: list[PhaseChange]) -> None:
        for change in phases[self.told :]:
            self.on_phase(self.planned, change.name)
        self.told = len(phases)


def _watch(
    proc: ServerProcess, reader: LogReader, readiness: Readiness, sup: _Supervisor, teller: _PhaseTeller
) -> Decision:
    """Wait on the pipe, the exit descriptor, the probes, the cancel pipe and the workers'
    pidfds; never sleep-poll (the stall check rides on the same wake-ups, with its own).
    Once decided, what can wait does (phase changes are told after the SIGTERM, in supervise)."""
    watch, hang = reader.watch, sup.hang
    descendants = Descendants(proc.pid)
    sel = _selector(proc, readiness, sup.cancel_fd)
    with sel, contextlib.closing(descendants):
        while watch.decision is None:
            wake = _earliest(watch.wakeup(), hang.wakeup())
            timeout = None if wake is None else max(0.0, wake - time.monotonic())
            if proc.exit_fd is None:  # no pidfd on this platform: look at the exit now and then
                timeout = 0.05 if timeout is None else min(timeout, 0.05)
            events = sel.select(timeout)
            deaths = _read_deaths(sel, descendants, events)  # first: readable only until the parent reaps
            for key, _ in events:
                if key.data == "out":
                    reader.pump()
                    if reader.eof:
                        sel.unregister(proc.pipe)
                    for fd in () if watch.decision else descendants.refresh():  # it writes: new workers?
                        sel.register(fd, selectors.EVENT_READ, "death")
                elif key.data == "http":
                    _http_news(watch, readiness)
                elif key.data == "cancel":
                    watch.stop(Outcome.CANCELLED, "interrupted", time.monotonic())
                elif key.data == "exit":
                    sel.unregister(proc.exit_fd)  # type: ignore[arg-type]  # registered above
            for death in deaths:  # after the lines already in the pipe: those were written before it
                watch.member_died(death.words, death.signal, time.monotonic())
            if watch.decision is None and (code := proc.exit_code()) is not None:
                reader.pump(reads=EXIT_DRAIN_READS)  # what it wrote before dying is already in the pipe
                watch.exited(code, time.monotonic())
            watch.tick(time.monotonic())
            hang.check(watch, reader.bytes, time.monotonic())
            if watch.wants_request:
                readiness.send_request()
            if watch.decision is None:  # a view or a progress file can wait for the SIGTERM
                teller.tell(watch.phases)
    assert watch.decision is not None
    return watch.decision


def _earliest(*times: float | None) -> float | None:
    known = [t for t in times if t is not None]
    return min(known) if known else None


def _selector(proc: ServerProcess, readiness: Readiness, cancel_fd: int) -> selectors.BaseSelector:
    """Everything an attempt waits on, each named by what it means when it wakes."""
    sel = selectors.DefaultSelector()
    sel.register(proc.pipe, selectors.EVENT_READ, "out")
    sel.register(readiness.fileno(), selectors.EVENT_READ, "http")
    sel.register(cancel_fd, selectors.EVENT_READ, "cancel")
    if proc.exit_fd is not None:
        sel.register(proc.exit_fd, selectors.EVENT_READ, "exit")
    return sel


def _read_deaths(
    sel: selectors.BaseSelector, descendants: Descendants, events: list[tuple[selectors.SelectorKey, int]]
) -> list[Death]:
    """The wait statuses of the workers whose pidfds fired (each pidfd is done after this)."""
    deaths = []
    for key, _ in events:
        if key.data == "death":
            sel.unregister(key.fd)
            if death := descendants.ended(key.fd):
                deaths.append(death)
    return deaths


def _http_news(watch: Watch, readiness: Readiness) -> None:
    health_ok, answers = readiness.news()
    if health_ok:
        watch.http_ready(time.monotonic())
    for answer in answers:
        watch.request_answered(answer.ok, answer.detail, time.monotonic())


def _drain(reader: LogReader) -> None:
    """After teardown, keep what the dying server printed (bounded in time)."""
    end = time.monotonic() + DRAIN_AFTER_STOP_S
    sel = selectors.DefaultSelector()
    with sel:
        sel.register(reader.server.pipe, selectors.EVENT_READ)
        while not reader.eof and (left := end - time.monotonic()) > 0:
            if not sel.select(left):
                return
            reader.pump(after_decision=True)


def _shell_could_not_start(decision: Decision) -> Decision:
    """/bin/sh exits 127 (not found) or 126 (not executable) when it cannot start the
    command: that is a launch error, not a server that crashed."""
    words = {127: "command not found", 126: "command not executable"}
    if decision.outcome is not Outcome.CRASHED or decision.exit_code not in words:
        return decision
    reason = f"/bin/sh could not start the command: {words[decision.exit_code]} (exit {decision.exit_code})"
    return replace(decision, outcome=Outcome.LAUNCH_ERROR, reason=reason)


def _name_port_holder(decision: Decision, port: int) -> Decision:
    """A server that could not bind its port: say who holds it (a foreign program that
    took it between diagbench's check and the server's bind)."""
    if decision.failure_class != FailureClass.PORT_IN_USE:
        return decision
    holder = port_holder(port)
    if holder is None:
        return decision
    return replace(decision, reason=f"{decision.reason}; port {port} is held by {holder}")


def _launch_error(base: dict[str, Any], reason: str, t0: float) -> AttemptRecord:
    elapsed = round(time.monotonic() - t0, 4)
    return AttemptRecord(
        **base,
        outcome=Outcome.LAUNCH_ERROR,
        reason=reason,
        time_to_outcome_s=elapsed,
        duration_s=elapsed,
        ended_at=_now_iso(),
    )


def _now_iso() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="milliseconds")
