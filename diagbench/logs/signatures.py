"""Signature packs: data files of ready, failure and phase patterns.

A pack is a YAML file (built-in ones live in `diagbench/logs/packs/`; users add their own
by path). Each signature has an id, a kind, a pattern, and for failures a class and a
priority. Patterns match one line; `{prefix}` stands for the per-rank and container
prefixes real multi-process logs put before a line (`[rank0]:`, `(VllmWorker pid=7)`,
`vllm-1  | `), so anchored patterns still match behind them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from enum import Enum
from importlib import resources
from pathlib import Path

from diagbench.errors import SpecError
from diagbench.vocab import FAILURE_CLASSES
from diagbench.yamlsrc import Src, load_document, suggest

PREFIX = (
    r"(?:\[rank\d+\]:\s*"
    r"|\([A-Za-z_]\w*(?: [\w=.:]+)*? pid=\d+(?:, ip=[\d.:]+)?\)\s*"
    r"|[\w.-]+-\d+\s+\|\s"
    r"|\[\d{4}-\d\d-\d\d[ T][\d:.]+(?: [A-Z]{2}\d+)*\]\s*"
    r"|(?:DEBUG|INFO|WARNING|ERROR|CRITICAL) \d\d-\d\d [\d:.]+ \[?[\w.]+:\d+\] )*"  # vLLM's logger
)
DEFAULT_PRIORITY = 50
_SIGNATURE_KEYS = ("id", "kind", "class", "pattern", "priority", "settles", "weak", "requires", "phase", "source")


class Kind(str, Enum):
    READY = "ready"
    FAILURE = "failure"
    PHASE = "phase"


@dataclass(frozen=True)
class Signature:
    """One pattern and what a line matching it means."""

    id: str
    kind: Kind
    pattern: str
    failure_class: str | None = None
    priority: int = DEFAULT_PRIORITY
    settles: bool = False  # this line ends the failure story: decide without waiting
    weak: bool = False  # decides nothing live; names the failure only if the log ends undecided
    requires: tuple[str, ...] = ()  # ready only once one of these other signatures has matched
    phase: str | None = None  # phase name, may use the pattern's named groups: "capture bs={bs}"
    pack: str = ""
    source: str = ""
    compiled: re.Pattern[bytes] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "compiled", re.compile(expand(self.pattern).encode()))

    def phase_name(self, found: re.Match[bytes]) -> str:
        groups = {k: v.decode(errors="replace") for k, v in found.groupdict().items() if v}
        template = self.phase or ""
        try:
            return template.format(**groups)
        except (KeyError, IndexError):
            return template.split(" ")[0]


def expand(pattern: str) -> str:
    return pattern.replace("{prefix}", PREFIX)


def builtin_packs() -> list[str]:
    folder = resources.files("diagbench.logs") / "packs"
    return sorted(p.name[:-5] for p in folder.iterdir() if p.name.endswith(".yaml"))


def load_packs(names: list[str], base: Path) -> list[Signature]:
    """Load built-in packs by name and user packs by path (relative to `base`)."""
    out: list[Signature] = []
    for name in names:
        out.extend(load_pack(name, base))
    return out


def load_pack(name: str, base: Path) -> list[Signature]:
    if "/" in name or name.endswith((".yaml", ".yml")):
        path = Path(name) if Path(name).is_absolute() else base / name
    else:
        if name not in builtin_packs():
            raise SpecError("signatures", None, "", f"unknown pack '{name}'", suggest(name, builtin_packs()))
        path = Path(str(resources.files("diagbench.logs") / "packs" / f"{name}.yaml"))
    root, _ = load_document(path)
    entries = root.mapping(("pack", "description", "signatures"))
    pack = entries["pack"].string() if "pack" in entries else path.stem
    if "signatures" not in entries:
        raise root.error("missing key 'signatures'", "list the pack's signatures under 'signatures:'")
    return [parse_signature(item, pack) for item in entries["signatures"].items()]


def parse_signature(src: Src, pack: str) -> Signature:
    keys = src.mapping(_SIGNATURE_KEYS)
    for need in ("id", "kind", "pattern"):
        if need not in keys:
            raise src.error(f"missing key '{need}'")
    kind_text = keys["kind"].string()
    try:
        kind = Kind(kind_text)
    except ValueError:
        raise keys["kind"].error(f'expected one of ready, failure, phase, got "{kind_text}"') from None
    failure_class = None
    if kind is Kind.FAILURE:
        failure_class = failure_class_of(keys["class"]) if "class" in keys else "other"
    return Signature(
        id=keys["id"].string(),
        kind=kind,
        pattern=regex_of(keys["pattern"]),
        failure_class=failure_class,
        priority=keys["priority"].integer() if "priority" in keys else DEFAULT_PRIORITY,
        settles=keys["settles"].boolean() if "settles" in keys else False,
        weak=keys["weak"].boolean() if "weak" in keys else False,
        requires=tuple(r.string() for r in keys["requires"].items_or_one()) if "requires" in keys else (),
        phase=keys["phase"].string() if "phase" in keys else (None if kind is not Kind.PHASE else "running"),
        pack=pack,
        source=keys["source"].text() if "source" in keys else "",
    )


def failure_class_of(src: Src) -> str:
    word = src.string("a failure class")
    if word not in FAILURE_CLASSES:
        raise src.error(f'unknown failure class "{word}"', suggest(word, FAILURE_CLASSES))
    return word


def regex_of(src: Src) -> str:
    text = src.string("a regular expression")
    try:
        re.compile(expand(text).encode())
    except re.error as exc:
        raise src.error(
            f"invalid regular expression {text!r}: {exc}", "escape ( ) [ ] . * + ? with a backslash"
        ) from None
    return text
