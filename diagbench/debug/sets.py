"""Debug settings as data: per library (or server), the variables, options or wrapper that make
a failure say more, for the failures they help with, each with its source.

A debug-set file (built-in ones in `diagbench/debugsets/`, a user's by `--debug-sets FILE`)
names its server (`any`: every server) and its sets. Each set says which failures it is for
(failure classes, signature ids, or outcomes), its change (`env`, `set` an option, `add`
words, or `wrap` the command in a tool, opt-in), what it makes the log show (`why`), the lines
that show it (`finds`), and where the advice comes from. A user's set with a built-in id
replaces it. A debug setting turns on a library's own output: it may not load code into the
server (LD_PRELOAD, PYTHONPATH, ...) nor touch diagbench's own variables.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from diagbench.triage.remedies import REMEDY_SERVERS, Change, failure_word
from diagbench.yamlsrc import Src, load_document, suggest

__all__ = ["ANY", "MAX_FILE_BYTES", "DebugCatalogue", "DebugSet", "builtin_files", "load_sets"]

MAX_FILE_BYTES = 1 << 20  # a debug-set file is kilobytes (the contract says at most 1 MiB)

ANY = "any"  # a file for every server (a library's own variables)
_FILE_KEYS = ("server", "description", "sets")
_SET_KEYS = ("id", "for", "env", "set", "add", "wrap", "why", "finds", "pick", "source")
_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
# variables that make a process load or run other code, and diagbench's own: never a debug setting
_CODE = re.compile(r"^(LD_|DYLD_|DIAGBENCH_)")
_CODE_NAMES = frozenset(
    {
        "PATH",
        "PYTHONPATH",
        "PYTHONHOME",
        "PYTHONSTARTUP",
        "PYTHONUSERBASE",
        "PYTHONEXECUTABLE",
        "PYTHONBREAKPOINT",
        "PYTHONINSPECT",
        "PYTHONSAFEPATH",
        "BASH_ENV",
        "ENV",
        "PERL5LIB",
        "PERL5OPT",
        "RUBYOPT",
        "NODE_OPTIONS",
        "GCONV_PATH",
        "CUDA_INJECTION64_PATH",
        "CUDA_VISIBLE_DEVICES",
    }
)


@dataclass(frozen=True)
class DebugSet:
    id: str
    server: str  # a server's name, or `any`
    when: tuple[str, ...]  # failure classes, signature ids, outcome words
    change: Change  # env, set and add (applied as a remedy's change is)
    wrap: tuple[str, ...]  # a tool the command runs under (opt-in: --sanitizer), e.g. compute-sanitizer
    why: str  # what it makes the log show
    finds: tuple[str, ...]  # regexes of the lines it brings (the sharper line)
    pick: str  # `first` or `last` of those lines before the failure
    source: str
    origin: str  # the file and line it was read from

    def applies_to(self, outcome: str, failure_class: str | None, signature: str | None) -> bool:
        return any(word in (outcome, failure_class, signature) for word in self.when)

    def describe(self) -> list[str]:
        """The change in the diff's words: `+ CUDA_LAUNCH_BLOCKING=1`, `~ --log-level debug`, `wrap: ...`."""
        return [*self.change.describe(), *([f"wrap: {' '.join(self.wrap)}"] if self.wrap else [])]


@dataclass(frozen=True)
class DebugCatalogue:
    sets: tuple[DebugSet, ...]

    def choose(
        self, server: str | None, outcome: str, failure_class: str | None, signature: str | None, wrappers: bool
    ) -> list[DebugSet]:
        """The sets for this server (and every server's) and failure; wrappers only when asked for."""
        return [
            s
            for s in self.sets
            if s.server in (ANY, server)
            and s.applies_to(outcome, failure_class, signature)
            and (wrappers or not s.wrap)
        ]


def builtin_files() -> list[Path]:
    folder = resources.files("diagbench") / "debugsets"
    return sorted(Path(str(p)) for p in folder.iterdir() if p.name.endswith(".yaml"))


def load_sets(extra: Sequence[Path] = ()) -> DebugCatalogue:
    """The built-in sets, then each extra file's (its ids replace built-in ones, in their place)."""
    by_id: dict[str, DebugSet] = {}
    for path in [*builtin_files(), *extra]:
        for found in parse_file(path):
            by_id[found.id] = found
    return DebugCatalogue(tuple(by_id.values()))


def parse_file(path: Path) -> list[DebugSet]:
    root, _ = load_document(path, limit=MAX_FILE_BYTES, what="debug set")  # the inputs door: a regular file, bounded
    keys = root.mapping(_FILE_KEYS)
    if "server" not in keys:
        raise root.error("missing key 'server'", f"name the server these sets are for, or '{ANY}'")
    server = _server(keys["server"])
    if "sets" not in keys:
        raise root.error("missing key 'sets'", "list them under 'sets:'")
    found = [_set(item, server) for item in keys["sets"].items()]
    seen: set[str] = set()
    for one, item in zip(found, keys["sets"].items(), strict=True):
        if one.id in seen:
            raise item.error(f"duplicate set id '{one.id}'", "give each set its own id")
        seen.add(one.id)
    return found


def _server(src: Src) -> str:
    word = src.string("a server name")
    if word != ANY and word not in REMEDY_SERVERS:
        raise src.error(f'unknown server "{word}"', suggest(word, [ANY, *REMEDY_SERVERS]))
    return word


def _set(src: Src, server: str) -> DebugSet:
    keys = src.mapping(_SET_KEYS)
    for need, example in (("id", "id: cuda.launch-blocking"), ("for", "for: [illegal_memory_access]")):
        if need not in keys:
            raise src.error(f"missing key '{need}'", f"e.g. {example}")
    if "source" not in keys:
        raise src.error("missing key 'source'", "say where the advice comes from: the library's docs or source file")
    if not any(k in keys for k in ("env", "set", "add", "wrap")):
        raise src.error("expected a change: env, set, add or wrap", "e.g. env: {CUDA_LAUNCH_BLOCKING: '1'}")
    pick = keys["pick"].string() if "pick" in keys else "last"
    if pick not in ("first", "last"):
        raise keys["pick"].expected("first or last (which of the lines `finds` matches before the failure)")
    return DebugSet(
        id=keys["id"].string("a set id"),
        server=server,
        when=tuple(failure_word(item) for item in keys["for"].items_or_one()),
        change=Change(
            add=_words(keys["add"]) if "add" in keys else (),
            set=_options(keys["set"]) if "set" in keys else {},
            env=_env(keys["env"]) if "env" in keys else {},
        ),
        wrap=_wrapper(keys["wrap"]) if "wrap" in keys else (),
        why=keys["why"].string() if "why" in keys else "",
        finds=tuple(item.regex() for item in keys["finds"].items_or_one()) if "finds" in keys else (),
        pick=pick,
        source=keys["source"].string(),
        origin=f"{src.file}:{src.line}",
    )


def _env(src: Src) -> dict[str, str]:
    out = {}
    for name, value in src.mapping(what="a mapping of NAME: value").items():
        if not _NAME.match(name):
            raise value.error(f'"{name}" is not a variable name', "letters, digits and _, not starting with a digit")
        if _CODE.match(name) or name in _CODE_NAMES:
            raise value.error(
                f"{name} is not a debug setting: it changes what the server loads or where it runs",
                "a debug set turns on a library's own output (CUDA_LAUNCH_BLOCKING, NCCL_DEBUG, TORCH_LOGS, ...)",
            )
        out[name] = value.text()
    return out


def _options(src: Src) -> Mapping[str, str]:
    out = {}
    for name, value in src.mapping(what="a mapping of --option: value").items():
        if not name.startswith("-"):
            raise value.error(f'"{name}" is not an option', "write the flag, e.g. --log-level: debug")
        out[name] = value.text()
    return out


_SHELLS = frozenset(
    {
        "sh",
        "ash",
        "bash",
        "rbash",
        "dash",
        "zsh",
        "ksh",
        "mksh",
        "pdksh",
        "yash",
        "fish",
        "csh",
        "tcsh",
        "env",
        "busybox",
    }
)


def _wrapper(src: Src) -> tuple[str, ...]:
    """A tool the command runs under (compute-sanitizer), never a shell: diagbench runs none unasked."""
    words = _words(src)
    shell = next((w for w in words if w.rsplit("/", 1)[-1] in _SHELLS), None)  # nice sh -c: a shell too
    if shell is not None:
        raise src.error(
            f"{shell} is a shell, not a tool that runs the command",
            "a wrapper is a program such as compute-sanitizer; diagbench runs no shell unless a spec says shell: true",
        )
    return words


def _words(src: Src) -> tuple[str, ...]:
    words = tuple(item.text() for item in src.items_or_one())
    if not words or not words[0]:
        raise src.error("expected at least one word", "e.g. add: [--log-level, debug]")
    return words
