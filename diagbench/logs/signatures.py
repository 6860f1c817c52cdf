"""Signature packs: data files of ready, failure, phase and marker patterns.

A pack is a YAML file (built-in ones live in `diagbench/logs/packs/`; users add their own
by path). Each signature has an id, a kind, a pattern, and for failures a class and a
priority. A pack may name the server that prints its lines (`server: vllm`): its markers
(kind `marker`) tell that server's logs apart, and its ready lines marked `needs_server`
count only once the log is known to be that server's. Patterns match one line;
`{prefix}` stands for the per-rank, container, timestamp and logger prefixes real
multi-process logs put before a line (`[rank0]:`, `(VllmWorker pid=7)`, `vllm-1  | `,
`[1,0]<stderr>:`), so anchored patterns still match behind them.

Parsed packs are cached on disk (cache.py), keyed by each file's path, size and mtime, so
a command that only classifies a log does not import or run the YAML parser.
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass, field, fields
from enum import Enum
from pathlib import Path
from typing import TYPE_CHECKING, Any

from diagbench.errors import DiagbenchError, SpecError
from diagbench.jsonvalue import JSON
from diagbench.logs.cache import cached_packs, store_packs
from diagbench.logs.guard import Guarded, LineMatch, line_regex
from diagbench.vocab import FAILURE_CLASSES, FailureClass

if TYPE_CHECKING:
    from diagbench.yamlsrc import Src

__all__ = [
    "DEFAULT_PRIORITY",
    "PREFIX",
    "Cause",
    "Kind",
    "Signature",
    "builtin_packs",
    "expand",
    "failure_class_of",
    "load_pack",
    "load_packs",
    "pack_path",
    "parse_pack",
    "parse_signature",
    "regex_of",
    "server_of",
]

PREFIX = (
    r"(?:\[rank\d+\]:\s*"  # torch elastic, per rank
    r"|\[\d+,\d+\]<(?:stdout|stderr|stddiag)>:\s*"  # mpirun --tag-output
    # vLLM's logger `(APIServer pid=7)`, `(VllmWorker-0 pid=7)` (multiproc_executor.py names its
    # workers so until they set their title); Ray's `(pid=7)`, `(RayWorkerWrapper pid=7, ip=...)`,
    # `(ServeReplica:app:Deployment pid=7)` (ray/_private/worker.py print_worker_logs)
    r"|\((?:[A-Za-z_][\w:.-]*(?: [\w=.:-]+)*? )?pid=\d+(?:, ip=[\w.:]+)?\)\s*"
    r"|[\w.-]+\s+\|\s"  # docker compose: `vllm-1  | `, `ollama  | `
    r"|\[\d{4}-\d\d-\d\d[ T][\d:.,]+(?: [A-Z]{2}\d+)*\]\s*"  # SGLang: `[2025-05-12 08:03:12 TP0] `
    # llama.cpp's --log-timestamps and --log-prefix: `0.00.184.752 I ` (common/log.cpp, minutes.seconds.ms.us)
    r"|\d+\.\d\d\.\d{3}\.\d{3} (?:[IWED] )?"
    r"|(?:DEBUG|INFO|WARNING|ERROR|CRITICAL) \d\d-\d\d [\d:.]+ \[?[\w.]+:\d+\] "  # vLLM's logger
    r"|\d{4}-\d\d-\d\dT[\d:.]+(?:Z|[+-]\d\d:?\d\d)\s+(?:std(?:out|err) [FP] )?"  # kubectl --timestamps, CRI, CloudWatch
    # journald / syslog: classic `Jul 25 14:36:08` (`-o short`, `short-precise`), ISO 8601
    # (`-o short-iso`, `short-iso-precise`) and RFC 3339 (rsyslog's file format), then `host unit[pid]: `
    r"|(?:[A-Z][a-z]{2} [ \d]\d [\d:]{8}(?:\.\d+)?|\d{4}-\d\d-\d\dT[\d:.]+(?:Z|[+-]\d\d:?\d\d))"
    r" [\w.-]+ [\w./@-]+(?:\[\d+\])?: "
    # glog: Triton, TensorRT-LLM's C++ side; torch's logging (a path: `torch/_dynamo/convert_frame.py:2415]`,
    # then a compile id `[0/0] `: torch/_logging/_internal.py TorchLogsFormatter)
    r"|[IWEF]\d{4} [\d:.]+\s+\d+ [\w./-]+:\d+\] (?:\[!?[\d/_]+\] )?"
    r"|> ?"  # a log pasted as a Markdown quote
    r")*"
)
DEFAULT_PRIORITY = 50
_SIGNATURE_KEYS = (
    "id",
    "kind",
    "class",
    "pattern",
    "priority",
    "settles",
    "weak",
    "cause",
    "requires",
    "needs_server",
    "after_ready",
    "handled",
    "retry",
    "phase",
    "source",
)


class Cause(str, Enum):
    """Where a generic (class `other`) failure line's own error is printed."""

    ABOVE = "above"  # a wrapper after its traceback ("See root cause above"): the last error before it
    BELOW = "below"  # `logger.exception("...")` prints the traceback after: the first error after it
    HERE = "here"  # the line is the error itself (pydantic's `Value error, ...`)


class Kind(str, Enum):
    READY = "ready"
    FAILURE = "failure"
    PHASE = "phase"
    MARKER = "marker"  # a line only this pack's server prints: names the server that wrote the log


@dataclass(frozen=True)
class Signature:
    """One pattern and what a line matching it means."""

    id: str
    kind: Kind
    pattern: str
    failure_class: FailureClass | None = None
    priority: int = DEFAULT_PRIORITY  # failures: which one names the launch; markers: how sure a detection is
    settles: bool = False  # this line ends the failure story: decide without waiting
    weak: bool = False  # decides nothing live; names the outcome only if the log ends undecided
    cause: Cause = Cause.ABOVE  # for class `other`: where the error that explains this line is
    requires: tuple[str, ...] = ()  # counts only once one of these other signatures has matched
    phase: str | None = None  # phase name, may use the pattern's named groups: "capture bs={bs}"
    pack: str = ""
    source: str = ""
    server: str | None = None  # the server whose pack this is
    needs_server: bool = False  # ready only once the log is known to be `server`'s
    after_ready: bool = False  # a failure that still counts after the ready line: a port bound after it
    handled: bool = False  # opens a log record that reports an error the program went on from (see `record_of`)
    retry: bool = False  # a phase line saying the server tries again what just failed: the open failure is set aside
    vetted: bool = False  # a built-in pack's: plain `re`; anyone else's runs under a time budget (logs/guard.py)
    _compiled: re.Pattern[bytes] | Guarded | None = field(default=None, init=False, repr=False, compare=False)

    @property
    def compiled(self) -> re.Pattern[bytes] | Guarded:
        """The pattern for one line; compiled on first use (most never confirm a line)."""
        if self._compiled is None:
            object.__setattr__(self, "_compiled", line_regex(expand(self.pattern).encode(), self.id, self.vetted))
        assert self._compiled is not None
        return self._compiled

    def record_of(self, found: LineMatch) -> bytes | None:
        """For a `handled` line: the header its logger puts on every line of the record (the
        pattern's group `record`); failure lines holding it are part of what was handled."""
        return found.groupdict().get("record") or None

    def phase_name(self, found: LineMatch) -> str:
        groups = {k: v.decode(errors="replace") for k, v in found.groupdict().items() if v}
        template = self.phase or ""
        try:
            return template.format(**groups)
        except (KeyError, IndexError):
            return template.split(" ")[0]

    def to_json(self) -> dict[str, JSON]:
        """For the pack cache."""
        return {k: (v.value if isinstance(v, Enum) else v) for k, v in vars(self).items() if not k.startswith("_")}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Signature:
        """Back from the pack cache: enums and tuples as the fields' defaults have them."""
        values = {**data, "kind": Kind(data["kind"])}
        for f in fields(cls):
            if f.name in values and isinstance(f.default, Enum | tuple):
                values[f.name] = type(f.default)(values[f.name])
        return cls(**values)


def expand(pattern: str) -> str:
    return pattern.replace("{prefix}", PREFIX)


def _packs_folder() -> Path:
    """The built-in packs: package data beside this module, a folder on disk (an installed
    wheel or a checkout): the pack cache and every message name the file. (For a package on
    disk this is the folder importlib.resources finds; importing it, and zipfile with it,
    cost every `classify` 4 ms of start-up.)"""
    folder = Path(__file__).parent / "packs"
    if not folder.is_dir():  # a zipped install: nothing to stat, cache or name
        raise DiagbenchError(
            f"the built-in signature packs are not files on disk ({folder}): install diagbench unzipped"
        )
    return folder


def builtin_packs() -> list[str]:
    return sorted(p.name[:-5] for p in _packs_folder().iterdir() if p.name.endswith(".yaml"))


def pack_path(name: str, base: Path) -> Path:
    """A built-in pack by name, or a user's pack file by path (relative to `base`)."""
    if "/" in name or name.endswith((".yaml", ".yml")):
        return Path(name) if Path(name).is_absolute() else base / name
    if name not in builtin_packs():
        from diagbench.yamlsrc import suggest

        raise SpecError("signatures", None, "", f"unknown pack '{name}'", suggest(name, builtin_packs()))
    return _packs_folder() / f"{name}.yaml"


def load_packs(names: list[str], base: Path) -> list[Signature]:
    """Load built-in packs by name and user packs by path (relative to `base`)."""
    paths = [pack_path(name, base) for name in names]
    if (cached := cached_packs(paths)) is not None:
        return [Signature.from_json(item) for item in cached]
    out = [sig for path in paths for sig in parse_pack(path)]
    store_packs(paths, [s.to_json() for s in out])
    return out


def load_pack(name: str, base: Path) -> list[Signature]:
    return load_packs([name], base)


def parse_pack(path: Path) -> list[Signature]:
    from diagbench.yamlsrc import load_document

    root, _ = load_document(path, what="signature pack")
    entries = root.mapping(("pack", "description", "server", "signatures"))
    pack = entries["pack"].string() if "pack" in entries else path.stem
    server = server_of(entries["server"]) if "server" in entries else None
    if "signatures" not in entries:
        raise root.error("missing key 'signatures'", "list the pack's signatures under 'signatures:'")
    vetted = path.resolve().parent == _packs_folder().resolve()  # a built-in pack, reviewed and tested
    return [
        dataclasses.replace(parse_signature(item, pack, server), vetted=vetted)
        for item in entries["signatures"].items()
    ]


def server_of(src: Src) -> str:
    from diagbench.logs.server_names import SERVERS
    from diagbench.yamlsrc import suggest

    word = src.string("a server name")
    if word not in SERVERS:
        raise src.error(f'unknown server "{word}"', suggest(word, list(SERVERS)))
    return word


def parse_signature(src: Src, pack: str, server: str | None = None) -> Signature:
    keys = src.mapping(_SIGNATURE_KEYS)
    for need in ("id", "kind", "pattern"):
        if need not in keys:
            raise src.error(f"missing key '{need}'")
    kind_text = keys["kind"].string()
    try:
        kind = Kind(kind_text)
    except ValueError:
        raise keys["kind"].error(f'expected one of ready, failure, phase, marker, got "{kind_text}"') from None
    failure_class = None
    if kind is Kind.FAILURE:
        failure_class = failure_class_of(keys["class"]) if "class" in keys else FailureClass.OTHER
    needs_server = keys["needs_server"].boolean() if "needs_server" in keys else False
    if needs_server and server is None:
        raise keys["needs_server"].error("needs_server needs a pack that names its server", "add `server: NAME`")
    pattern = regex_of(keys["pattern"])
    handled = keys["handled"].boolean() if "handled" in keys else False
    if handled and "(?P<record>" not in pattern:
        raise keys["handled"].error("a handled line needs its record's header as a group", "add (?P<record>...)")
    retry = keys["retry"].boolean() if "retry" in keys else False
    if retry and kind is not Kind.PHASE:
        raise keys["retry"].error("retry is for phase lines", "use kind: phase, with the phase the retry runs")
    port_in_use = failure_class == FailureClass.PORT_IN_USE
    return Signature(
        id=keys["id"].string(),
        kind=kind,
        pattern=pattern,
        failure_class=failure_class,
        priority=keys["priority"].integer() if "priority" in keys else DEFAULT_PRIORITY,
        settles=keys["settles"].boolean() if "settles" in keys else False,
        weak=keys["weak"].boolean() if "weak" in keys else False,
        cause=_cause(keys["cause"]) if "cause" in keys else Cause.ABOVE,
        requires=tuple(r.string() for r in keys["requires"].items_or_one()) if "requires" in keys else (),
        phase=keys["phase"].string() if "phase" in keys else (None if kind is not Kind.PHASE else "running"),
        pack=pack,
        source=keys["source"].text() if "source" in keys else "",
        server=server,
        needs_server=needs_server,
        # a port is only found taken when it is bound, and some servers bind after their ready line
        after_ready=keys["after_ready"].boolean() if "after_ready" in keys else port_in_use,
        handled=handled,
        retry=retry,
    )


def _cause(src: Src) -> Cause:
    word = src.string("above, below or here")
    try:
        return Cause(word)
    except ValueError:
        raise src.expected("above, below or here") from None


def failure_class_of(src: Src) -> FailureClass:
    from diagbench.yamlsrc import suggest

    word = src.string("a failure class")
    failure_class = FailureClass.of(word)
    if failure_class is None:
        raise src.error(f'unknown failure class "{word}"', suggest(word, FAILURE_CLASSES))
    return failure_class


def regex_of(src: Src) -> str:
    text = src.string("a regular expression")
    try:
        re.compile(expand(text).encode())
    except re.error as exc:
        raise src.error(
            f"invalid regular expression {text!r}: {exc}", "escape ( ) [ ] . * + ? with a backslash"
        ) from None
    return text
