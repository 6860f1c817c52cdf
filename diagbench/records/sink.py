"""The one way out: everything diagbench writes or prints is blanked here, when written.

Three kinds of sink, one redaction (`records.redact`, with every secret this process has
learned and those of its own environment):

- a document: what the terminal shows (`render.console`, `cli.app.write_out`), a report file
  (table, Markdown, JSON, JUnit, HTML, the issue text), a stacks file, a traceback: `document`,
  `write_document`;
- a record: JSON data (`result.json`, the manifest, verdicts, isolation, triage): `record`,
  applied by `records.store.write_json` to every string value;
- the server's log, as it streams: `StreamBlanker`, used by `launch.logfile`: the values the run
  knows are blanked in the bytes before they reach `server.log`, a value split across two reads
  too. Shapes (`hf_...`) and names (`api_key=X`) are not matched there: they need a regular
  expression over every byte (about 60 MB/s, a flooding server writes faster), and any reader
  finds them again without the spec; a value the run knows cannot be found again without it.

So a run read later without its spec (moved, edited, never given: `triage CMD`) shows no secret
the run knew: the files hold none. `tests/records/test_sink_door.py` holds the door: only the
modules it lists write files or standard output, and each goes through here.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

from diagbench.jsonvalue import JSON
from diagbench.records.redact import Redactor, learned
from diagbench.safefiles import write_file

__all__ = ["StreamBlanker", "document", "message", "record", "secrets", "write_document"]

try:  # installed with diagbench where the platform has wheels (pyproject's markers)
    import hyperscan
except ImportError:  # pragma: no cover - exercised where hyperscan is absent
    hyperscan = None  # type: ignore[assignment]  # each form is searched for on its own

_current = Redactor()


def secrets() -> Redactor:
    """The redaction every sink applies: the rules, with every secret value this process knows."""
    global _current
    known = learned()
    if known != _current.known:
        _current = Redactor(known)
    return _current


def document(text: str) -> str:
    """A document as it may be shown or written: known values (in every written form), token
    shapes, `Bearer X`, URL passwords and secret query parameters blanked."""
    return secrets().text(text)


def message(text: str) -> str:
    """A message quoting what a user gave (a file's value, a command line): a document, and
    secrets by their names too (`HF_TOKEN=X`, `--api-key X`), as a log line is blanked."""
    return secrets().log(text)


def record(data: JSON) -> JSON:
    """JSON data as it may be written: every string value through `document` (keys as written)."""
    return secrets().values(data)


def write_document(path: Path, text: str, append: bool = False, follow: bool = False) -> None:
    """Write (or append to) a document file, blanked, through the files door
    (`safefiles.write_file`). Unless `follow` (a path the user named, `--junit /dev/stderr`
    too), never through a link, never a FIFO waited on (one planted in a run directory
    handed over), nothing truncated: replaced whole. OSError as the OS says it."""
    write_file(path, document(text).encode("utf-8"), append=append, follow=follow)


class StreamBlanker:
    """Known secret values blanked out of a byte stream as it passes: a value split across two
    chunks too (the end of a chunk that could begin one is held until the next chunk or `flush`).
    Memory: at most the longest form held back. Each blank keeps the line breaks the value held,
    so line numbers in the file stay those the scanner counted. Cost: one hyperscan pass over
    each chunk for every form of every value (GB/s); without hyperscan, one search per form."""

    def __init__(self, values: Iterable[str]):
        forms = Redactor(frozenset(values)).forms  # longest first
        self.forms = [(f.encode("utf-8", "surrogateescape"), b.encode()) for f, b in forms]
        self.longest = max((len(f) for f, _ in self.forms), default=0)
        self.finder = _Finder([f for f, _ in self.forms])
        self.held = b""

    def feed(self, data: bytes) -> bytes:
        """What of `data` (and what was held) may be written now."""
        if not self.forms:
            return data
        if self.held:
            data, self.held = self.held + data, b""
        data = self.blank(data)
        keep = self._could_begin(data)
        if keep:
            data, self.held = data[:-keep], data[-keep:]
        return data

    def flush(self) -> bytes:
        """What is held (the stream ended: it begins no secret now)."""
        held, self.held = self.held, b""
        return held

    def blank(self, data: bytes) -> bytes:
        """A whole piece of text (a copy of the deciding line) blanked, nothing held."""
        for index in self.finder.present(data):
            form, blank = self.forms[index]
            data = data.replace(form, blank)
        return data

    def _could_begin(self, data: bytes) -> int:
        """The length of the longest end of `data` that begins some form (0 if none)."""
        best = 0
        tail = data[-(self.longest - 1) :] if self.longest > 1 else b""
        for form, _ in self.forms:
            part = tail[-(len(form) - 1) :] if len(form) > 1 else b""
            start = part.find(form[:1])
            while start != -1 and len(part) - start > best:
                if form.startswith(part[start:]):
                    best = len(part) - start
                    break
                start = part.find(form[:1], start + 1)
        return best


class _Finder:
    """Which of some byte strings a chunk holds, in their order: one hyperscan pass for them all
    where hyperscan is installed (a database of literals, one report per string), else a search each."""

    def __init__(self, needles: list[bytes]):
        self.needles = needles
        self.db: Any = None
        if hyperscan is None or not needles:
            return
        try:
            db = hyperscan.Database(mode=hyperscan.HS_MODE_BLOCK)
            expressions = [b"".join(b"\\x%02x" % byte for byte in needle) for needle in needles]  # NUL too
            flags = [hyperscan.HS_FLAG_SINGLEMATCH] * len(needles)
            db.compile(expressions=expressions, ids=list(range(len(needles))), elements=len(needles), flags=flags)
            self.scratch, self.db = hyperscan.Scratch(db), db
        except hyperscan.error:  # a value hyperscan cannot take (too long): searched for one at a time
            self.db = None

    def present(self, data: bytes) -> list[int]:
        if self.db is None:
            return [index for index, needle in enumerate(self.needles) if needle in data]
        found: list[int] = []
        self.db.scan(data, match_event_handler=lambda i, *_: found.append(i), scratch=self.scratch)
        return sorted(found)
