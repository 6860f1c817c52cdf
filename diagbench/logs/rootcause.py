"""The root-cause reader: every error a log reports, whatever server wrote it.

Python tracebacks are found through the prefixes before lines (ranks, `(Name pid=N)`, times,
docker compose, glog, `> ` quotes; `signatures.PREFIX`; each rank's read apart), and followed
along their chain ("The above exception was the direct cause ...", "During handling of the
above exception ...") to the root exception: its type and message. A traceback whose excerpt
starts in its middle still ends in its exception line, after an indented frame line.
Native reports are read too (their patterns are in native.py): C++ (`terminate called after
throwing an instance of`, `what():`), Rust (`panicked at`), Go (`panic:`, `fatal error:`, the
runtime's signal reports), glog's fatal lines, and the shell's, the kernel's and Python's
reports of a killed or crashed process.

Each error is given its class by causes.py's one table. This reads a finished log once
(offline, or once at the end of a live attempt): never on the live per-line path.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, replace

from diagbench.jsonvalue import JSON
from diagbench.logs.causes import CAPTURE_FRAME, class_of, class_of_frame
from diagbench.logs.native import ANSWERED, DEATHS, FATAL_RECORD, INTERRUPTED, LOGGED, MESSAGE_CHARS, WORDS, native
from diagbench.logs.ranks import LineOrigin, text_origin
from diagbench.logs.signatures import PREFIX

__all__ = ["CUT", "LINE_CHARS", "Cause", "Causes", "read", "root_of", "strip"]

_PREFIX = re.compile("^" + PREFIX)
# prefixes of loggers the packs' PREFIX does not name: `2023-05-30 17:19:25 | ERROR | stderr | `
# (FastChat), `2024-01-01 10:00:00,123 - `, `[12:00:00] `
_MORE = re.compile(
    r"^(?:\d{4}-\d\d-\d\d[ T][\d:.,]+Z?\s*(?:[|-]\s*)?(?:[A-Z]{3,8}\s*[|:-] ?)?(?:std(?:out|err)\s*\| ?)?"
    r"|\[(?!(?:ERROR|Error|error|FATAL|Fatal|CRITICAL|E)\])\s*[\w.:/ -]{1,40}\] ?)"
)
_JUNK = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]|#033\[[0-9;]*[A-Za-z]")
_HEADER = re.compile(r"Traceback \(most recent call last\):\s*$")
_CHAIN = re.compile(
    r"(?:The above exception was the direct cause of the following exception"
    r"|During handling of the above exception, another exception occurred):?\s*$"
)
_EXC_LINE = re.compile(
    r"((?:[A-Za-z_][\w.]*)?(?:Error|Exception|Exit|Interrupt|Failed|Failure|Warning|Fault)|[A-Za-z_]\w*(?:\.\w+)+)(?::\s*(.*)|\s*)$"
)
_NAMED = re.compile(r"(?:[A-Za-z_][\w.]*)?(?:Error|Exception)")
_FRAME = re.compile(r"\s+(?:File \"|\S)|\s*\^+\s*$|\s*~+\s*$|\s*\.\.\.|\s*\[Previous line repeated")
# and what the other lines the reader takes need: a traceback's header and frames, an
# exception's name, a chain's words ("... above exception ..."), the terminal's ^C
_LOOK = (*WORDS, "Traceback", 'File "', "xception", "^C", "HTTP/")
CUT = "traceback"  # the type of a traceback cut before its exception line, with no `raise` to name it
LINE_CHARS = 4096  # of a longer line only its start is read (errors are short; a flood is not)
# glog's level letter, which `strip` takes off with the rest of its prefix: E an error record, F fatal
_GLOG = re.compile(r"(?:^|[\s|>])([EF])\d{4} [\d:.]+\s+\d+ [\w./-]+:\d+\] (.*)")
_RAY = re.compile(r"\((?:[A-Za-z_][\w:.-]*(?: [\w=.:-]+)*? )?pid=\d+(?:, ip=[\w.:]+)?\)")
# the record a program logs an error it went on from under, on the line before the exception:
# a web framework's error in one request, or any record at warning level
_HANDLED = re.compile(
    r"Exception in ASGI application"  # uvicorn protocols/http/h11_impl.py, httptools_impl.py
    r"|Error in ASGI Framework"  # hypercorn asyncio/task_group.py
    r"|Exception on /\S* \[[A-Z]+\]"  # flask app.py log_exception
    r"|Error handling request\b"  # aiohttp web_protocol.py, gunicorn workers/base.py
    r"|Error on request:"  # werkzeug serving.py
    r"|Uncaught exception (?:GET|POST|PUT|DELETE|PATCH|HEAD|OPTIONS) "  # tornado web.py log_exception
)
_WARNING = re.compile(r"\bWARN(?:ING)?\b")  # a record's level: log4j/logback WARN, Python logging WARNING


def _handled(line: str, warning: bool) -> bool:
    """Whether a record (the line before an exception) logs an error the program went on
    from: a web framework's error in one request, or (`warning`) a record at warning level
    (its level is in the prefix `strip` takes off, or starts what is left)."""
    rest = strip(line)
    if _HANDLED.search(rest):
        return True
    return warning and _WARNING.search(line, 0, len(line) - len(rest) + 8) is not None


_RAISE = re.compile(r"raise ((?:[A-Za-z_]\w*\.)*[A-Z]\w*)(?:\((.*))?")  # a class: `raise ValueError(...)`


@dataclass(frozen=True)
class Cause:
    """One error the log reports: its type and message, where, and its class."""

    type: str
    message: str
    line_no: int  # 1-based, as the scanner counts
    failure_class: str
    traceback: bool = False  # a Python exception (else a native report)
    chain: tuple[str, ...] = ()  # the types the chain went through, root first
    handled: bool = False  # logged by a request's error handler or at warning level: the program went on
    fatal: bool = False  # logged as the death of a process or thread of the server (`X hit an exception:`)
    rank: int | None = None  # the rank whose lines report it, where a prefix or a launcher says (logs/ranks.py)
    who: str | None = None  # the process whose lines report it, in the prefix's words (`rank1`, `TP1`)
    launcher: bool = False  # the rank is named by a launcher's report of it (torchrun's summary, mp.spawn's)
    fallout: bool = False  # reported as another failure's consequence (a launcher's other failures)

    def to_json(self) -> dict[str, JSON]:
        """The record's and classify's `cause`."""
        return {"type": self.type, "message": self.message, "line_no": self.line_no}

    def text(self) -> str:
        """`torch.OutOfMemoryError: CUDA out of memory ... (L212)`."""
        said = f"{self.type}: {self.message}" if self.message else self.type
        return f"{said} (L{self.line_no})"


def strip(line: str) -> str:
    """A line without its colour codes and its process, time and quote prefixes."""
    if "\x1b" in line or "#033[" in line:
        line = _JUNK.sub("", line)
    while True:
        found = _PREFIX.match(line)
        rest = line[found.end() :] if found else line
        more = _MORE.match(rest)
        rest = rest[more.end() :] if more else rest
        if rest == line:
            return line
        line = rest


def read(lines: Sequence[str], first_line_no: int = 1, to_end: bool = False) -> Causes:
    """Every error in `lines` (lines[0] is line `first_line_no`), in the order they end; `to_end`:
    the lines run to the log's end. Each rank's or process's prefixed lines (logs/ranks.py) are
    read apart, with the unprefixed lines that continue them, so tracebacks are not mixed."""
    main = _State(first_line_no)
    states: dict[str, tuple[LineOrigin, _State]] = {}
    last, record = main, False
    for i, line in enumerate(lines):
        head = line[:LINE_CHARS]
        origin, cut = text_origin(head)
        if origin.key is not None:
            entry = states.setdefault(origin.key, (origin, _State(first_line_no)))
            if entry[0].rank is None and origin.rank is not None:  # torchrun --tee: the rank shows later
                states[origin.key] = entry = (origin, entry[1])
            last, record = entry[1], entry[0].record
            head = head[cut:]
        elif last is not main and not (record and not head.startswith("[")) and not _continues(last, head):
            last = main
        state = last
        if not state.in_tb and not _may_report(head):
            state.before = head
            continue  # most lines: no word any error needs, outside a traceback (changes no state)
        for part in _parts(head):
            state.take(strip(part), i, _GLOG.search(part) if "] " in part else None)
        state.before = head
        if states and state is main and ANSWERED.search(head):
            for _, other in states.values():
                other.lived_on(head)  # a request answered: no rank's traceback so far ended the server
    out = Causes(_finish(main, to_end))
    for origin, state in states.values():
        ranked = origin.ranked
        out += [replace(c, rank=origin.rank, who=origin.who) if ranked else c for c in _finish(state, to_end)]
    out.sort(key=lambda c: c.line_no)
    out.origins = sum(origin.ranked for origin, _ in states.values())
    return out


class Causes(list[Cause]):
    origins: int = 0  # the errors a log reports, and how many ranks' prefixes its lines carry


def _finish(state: _State, to_end: bool) -> list[Cause]:
    state.cut(last=to_end)  # a traceback a process was printing when the log ended is kept
    state.close()
    return state.out


def _continues(state: _State, line: str) -> bool:
    """Whether an unprefixed line continues what a prefixed process was printing: its open
    traceback, or the chain after its exception (a blank line, the chain's words)."""
    if state.in_tb or state.chain_open:
        return True
    return bool(state.chain) and (not line.strip() or _CHAIN.match(strip(line).strip()) is not None)


def _may_report(line: str) -> bool:
    """Whether a line outside a traceback can hold anything the reader takes: a traceback's
    header, frame or exception line, a chain's words, a native report, a glog record or the
    shell's prompt (substring tests, not a search per pattern)."""
    return (
        any(word in line for word in _LOOK)
        or line.rstrip().endswith(("$", "#"))
        or ("] " in line and _GLOG.search(line) is not None)
    )


def _parts(line: str) -> list[str]:
    """A line that holds several Ray/vLLM-prefixed lines (a paste whose line ends were
    lost) split before each `(Name pid=N)`."""
    if line.count("pid=") < 2:
        return [line]
    starts = [m.start() for m in _RAY.finditer(line)]
    if len(starts) < 2:
        return [line]
    return [line[a:b] for a, b in zip([0, *starts], [*starts, len(line)], strict=True) if line[a:b].strip()]


class _State:
    """Tracebacks being read: the open one's frames, the chain it belongs to."""

    def __init__(self, first_line_no: int):
        self.first = first_line_no
        self.out: list[Cause] = []
        self.chain: list[Cause] = []
        self.chain_open = False
        self.in_tb = False  # a header was seen and its exception line not yet
        self.raise_line: str | None = None  # the last echoed `raise X(...)` of the open traceback
        self.frame = ""  # its last `File "..."` line
        self.indent = 0  # how far its header was indented
        self.modules = 0  # its frames that run a module's body (`in <module>`): imports
        self.capturing = False  # one of its frames captures a CUDA graph (causes.CAPTURE_FRAME)
        self.prev = ""
        self.at = 0
        self.before = ""  # the line before this one, as written
        self.handled = False  # the open chain was logged as an error the program went on from
        self.fatal = False  # the open chain was logged as a worker's death

    def take(self, text: str, i: int, glog: re.Match[str] | None = None) -> None:
        if self.in_tb and self.indent and text[: self.indent].isspace():
            text = text[self.indent :]  # a traceback pasted indented: read as printed
        if text.startswith("^C"):  # the terminal echoes Ctrl-C as ^C, maybe before what the interrupt printed
            self.out.append(_cause(INTERRUPTED, "^C", self.first + i, False))
            text = text[2:]
        stripped = text.strip()
        if found := _HEADER.search(text):
            self.cut()
            self._open(i, "", text[: found.start()])
            self.indent = len(text) - len(text.lstrip())
        elif not self.in_tb and text[:1].isspace() and stripped.startswith('File "'):
            self._open(i, stripped)  # an excerpt cut inside a traceback
        elif _CHAIN.match(stripped):
            self.chain_open = True
        elif (exc := _exception_at(text, self.prev, self.in_tb)) is not None:
            if not self.in_tb:
                self._note_handled(warning=True)  # a lone exception line (Java's): the record it belongs to
                self.capturing = False  # no frames of its own: the traceback before it is another error's
            self._link(self._by_frames(_cause(exc[0], exc[1], self.first + i, True)))
            self.in_tb = False
        elif self.in_tb and (not stripped or _FRAME.match(text) or _flat_frame(stripped, self.prev)):
            if stripped.startswith("File "):
                self.frame = stripped
                self.modules += stripped.endswith("in <module>")
                self.capturing = self.capturing or CAPTURE_FRAME.search(stripped) is not None
            elif stripped.startswith("raise "):
                self.raise_line = stripped
        else:
            self.cut()
            self._outside(text, i, glog)
            self.lived_on(text)
        self.prev = text
        self.at = i if self.in_tb else self.at

    def _outside(self, text: str, i: int, glog: re.Match[str] | None) -> None:
        """A line outside a traceback: a native report, a glog record, or the signal line of
        the Go panic above it."""
        if self._go_signal(text, i):
            return
        if (report := native(text)) is not None:
            self.out.append(_cause(report[0], report[1], self.first + i, False))
        elif glog is not None:
            kind = "glog fatal" if glog.group(1) == "F" else LOGGED
            self.out.append(_cause(kind, glog.group(2).strip()[:MESSAGE_CHARS], self.first + i, False))

    def _go_signal(self, text: str, i: int) -> bool:
        """Go's `[signal SIGSEGV: segmentation violation code=... addr=... pc=...]`, printed on
        the line after the panic or fatal error a signal caused (runtime/panic.go dopanic_m):
        part of that error's message, so a Go SIGSEGV is a segfault."""
        last = self.out[-1] if self.out else None
        if not text.startswith("[signal ") or last is None or last.line_no != self.first + i - 1:
            return False
        if last.type not in ("Go panic", "Go fatal error"):
            return False
        self.out[-1] = _cause(last.type, f"{last.message} {text.strip()}"[:MESSAGE_CHARS], last.line_no, False)
        return True

    def cut(self, last: bool = False) -> None:
        """A traceback that ended before its exception line: its last `raise` and the
        package of its last frame say what it was. One the log ends inside (`last`) is kept
        whatever it says: the process was printing an error when the log stopped."""
        if not self.in_tb:
            return
        self.in_tb = False
        found = _RAISE.match(self.raise_line or "")
        kind = found.group(1) if found else CUT
        message = (found.group(2) or "").strip("\"' )(") if found else self.frame
        cause = self._by_frames(_cause(kind, message[:MESSAGE_CHARS], self.first + self.at, True))
        if found or cause.failure_class != "other" or (self.chain and self.chain_open) or self.fatal or last:
            self._link(cause)  # a traceback chained to the one before, or a worker's death, is kept

    def _note_handled(self, warning: bool = False, record: str = "") -> None:
        """At a chain's first traceback: whether the record before it says it was handled
        (a chained traceback follows "During handling ...", not a record). A warning-level
        record counts only before a lone exception line (log4j's WARN and its exception): a
        Python traceback after some warning may be the interpreter's own, of an error that
        ended the process. And whether the record it is printed in (`record`, the header's own
        line before `Traceback`) or after says a process or thread of the server died of it."""
        if not (self.chain and self.chain_open):
            self.handled = _handled(self.before, warning)
            self.fatal = FATAL_RECORD.search(record or self.before) is not None

    def _open(self, i: int, frame: str, record: str = "") -> None:
        self._note_handled(record=record)
        self.in_tb, self.raise_line, self.frame, self.at, self.indent = True, None, frame, i, 0
        self.modules = int(frame.endswith("in <module>"))
        self.capturing = CAPTURE_FRAME.search(frame) is not None

    def _by_frames(self, cause: Cause) -> Cause:
        """An error of no finer class, named by where it was raised: inside a CUDA graph's
        capture (causes.CAPTURE_FRAME), in torch.compile's or Triton's packages (causes.FRAMES),
        or in a module's body that another module's body was importing (an import that failed)."""
        if cause.failure_class != "other":
            return cause
        cls = "cuda_graph_capture" if self.capturing else class_of_frame(self.frame)
        if cls == "other" and self.modules >= 2 and self.frame.endswith("in <module>"):
            cls = "import_error"  # cpython: importlib runs the module's code, its frame is `<module>`
        return replace(cause, failure_class=cls, message=cause.message or self.frame)

    def _link(self, cause: Cause) -> None:
        if not (self.chain and self.chain_open):
            self.close()
        self.chain.append(cause)
        self.chain_open = False

    def close(self) -> None:
        _close(self.chain, self.out, self.handled, self.fatal)

    def lived_on(self, text: str) -> None:
        """A request answered after the tracebacks read so far: the server lived on, so none
        of them ended it, even one logged as a worker's death (a test that provokes one)."""
        if ANSWERED.search(text):
            self.out = [replace(c, fatal=False, handled=True) if c.traceback else c for c in self.out]
            self.fatal, self.handled = False, bool(self.chain) or self.handled  # the chain still open


def _exception_at(text: str, prev: str, in_traceback: bool) -> tuple[str, str] | None:
    """The exception a traceback ends with, if `text` is it: after a header and frames, or,
    in a cut excerpt (or a server that printed only the exception), a line that starts
    with an exception's name (`...Error: `)."""
    if not text or text[0].isspace():
        return None
    found = _EXC_LINE.match(text.rstrip())
    if found is None:
        return None
    if not in_traceback and not _NAMED.fullmatch(found.group(1)):
        return None  # a cut excerpt or a lone error line: named as exceptions are (not a dotted logger name)
    return found.group(1), (found.group(2) or "").strip()[:MESSAGE_CHARS]


def _flat_frame(stripped: str, prev: str) -> bool:
    """A frame of a traceback pasted flat (its indentation lost): a `File "..."` line, or
    the source line after one."""
    return stripped.startswith('File "') or prev.lstrip().startswith('File "')


def _cause(kind: str, message: str, line_no: int, traceback: bool) -> Cause:
    cls, _ = class_of(kind, message)
    return Cause(kind, message, line_no, cls, traceback)


def _close(chain: list[Cause], out: list[Cause], handled: bool = False, fatal: bool = False) -> None:
    """A finished chain: its root, or the first link whose class is finer than `other`."""
    if not chain:
        return
    named = [c for c in chain if c.failure_class != "other"]
    pick = named[0] if named else chain[0]
    out.append(
        Cause(
            pick.type,
            pick.message,
            pick.line_no,
            pick.failure_class,
            True,
            tuple(c.type for c in chain),
            handled,
            fatal,
        )
    )
    chain.clear()


def root_of(causes: Sequence[Cause], start: int = 0, end: int | None = None) -> Cause | None:
    """The error that explains lines start..end: the last one of a finer class than `other`
    there; else a process's death that an error after it reports; else the last error (a
    death after an error is its fallout)."""
    inside = [c for c in causes if c.line_no >= start and (end is None or c.line_no <= end)]
    errors = [c for c in inside if c.type not in DEATHS]
    named = [c for c in errors if c.failure_class != "other"]
    if named:
        return named[-1]
    deaths = [c for c in inside if c.type in DEATHS and c.failure_class != "other"]
    if deaths and (not errors or deaths[-1].line_no < errors[-1].line_no):
        return deaths[-1]  # a process died, and an error reports it (torchrun's ChildFailedError)
    # a death after an error is its fallout; a traceback cut before its exception says less than
    # any error that names itself (its frames are what is left of it)
    pick = [c for c in errors if c.type != CUT] or errors or inside
    return pick[-1] if pick else None
