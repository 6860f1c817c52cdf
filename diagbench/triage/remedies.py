"""Remedies as data: per server, the changes to a launch that maintainers advise for a failure.

A remedy file (built-in ones in `diagbench/remedies/`, a user's by `--remedies FILE`) names
its server, the request that prices a launch that comes up, and its remedies. Each remedy
says which failures it is for (failure classes, signature ids, or `timeout`/`crashed`), the
change (add, remove, set, scale an option or a variable, unset a variable), what it gives
up, its expected cost (1 nearly free .. 5 a large loss) and where the advice comes from.
A user's remedy with a built-in id replaces it; new ids add to the list.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path

from diagbench.jsonvalue import JSON
from diagbench.logs.server_names import SERVERS
from diagbench.spec.ready import ReadyRequest, parse_request
from diagbench.vocab import FAILURE_CLASSES, OUTCOMES
from diagbench.yamlsrc import Src, load_document, suggest

__all__ = [
    "REMEDY_SERVERS",
    "Catalogue",
    "Change",
    "Remedy",
    "Scale",
    "builtin_files",
    "failure_word",
    "load_catalogue",
    "parse_file",
    "select_remedies",
]

# the servers a remedy may name: the log reader's, and diagbench's own two test servers
REMEDY_SERVERS = (*SERVERS, "refserver", "simulator")
_FILE_KEYS = ("server", "description", "price_request", "remedies")
_REMEDY_KEYS = ("id", "for", "change", "gives_up", "cost", "source")
_CHANGE_KEYS = ("add", "remove", "set", "scale", "env", "unset")
_SCALE_KEYS = ("option", "env", "by", "default", "integer", "min", "max", "digits")
MAX_NUMBER = 1e12  # an option's value or bound a remedy may name (no server setting is larger)
MAX_FACTOR = 1e3  # a scale's `by`: from a thousandth to a thousand times
MAX_DIGITS = 12


@dataclass(frozen=True)
class Scale:
    """Multiply an option's value (or a variable's) by `by`: halve `--cuda-graph-max-bs`."""

    names: tuple[str, ...]  # the option's spellings (`--ctx-size`, `-c`), or one variable
    env: bool
    by: float
    default: float | None = None  # the server's default, when the launch does not set it
    integer: bool = False
    low: float | None = None
    high: float | None = None
    digits: int = 3

    def apply(self, value: float) -> str | None:
        """The new value as written, or None when it would not change (already at a bound) or
        cannot be written (the launch's value times `by` is no finite number)."""
        new = value * self.by
        if not math.isfinite(new):
            return None
        new = max(new, self.low) if self.low is not None else new
        new = min(new, self.high) if self.high is not None else new
        text = str(int(new)) if self.integer else f"{round(new, self.digits):g}"
        old = str(int(value)) if self.integer else f"{round(value, self.digits):g}"
        return None if text == old else text


@dataclass(frozen=True)
class Change:
    """What a remedy does to a launch; each part only where it changes something."""

    add: tuple[str, ...] = ()  # words appended (a flag, or an option and its value)
    remove: tuple[str, ...] = ()  # flags or options (with their value) taken out
    set: Mapping[str, str] = field(default_factory=dict)  # option -> value, replaced or appended
    scale: Scale | None = None
    env: Mapping[str, str] = field(default_factory=dict)
    unset: tuple[str, ...] = ()

    def describe(self) -> list[str]:
        """For people, in the diff's words: `+ --enforce-eager`, `- --enable-torch-compile`,
        `~ --cuda-graph-max-bs x0.5`, `+ NCCL_P2P_DISABLE=1`, `- TORCHINDUCTOR_CUDAGRAPHS`."""
        out = [f"+ {' '.join(self.add)}"] if self.add else []
        out += [f"- {name}" for name in self.remove]
        out += [f"~ {name} {value}" for name, value in self.set.items()]
        if self.scale:
            default = f" (default {self.scale.default:g})" if self.scale.default is not None else ""
            out.append(f"~ {self.scale.names[0]} x{self.scale.by:g}{default}")
        out += [f"+ {name}={value}" for name, value in self.env.items()]
        return out + [f"- {name}" for name in self.unset]

    def to_json(self) -> dict[str, JSON]:
        data: dict[str, JSON] = {"add": list(self.add), "remove": list(self.remove), "set": dict(self.set)}
        data |= {"env": dict(self.env), "unset": list(self.unset)}
        if self.scale:
            s = self.scale
            data["scale"] = {"names": list(s.names), "env": s.env, "by": s.by, "default": s.default}
        return {k: v for k, v in data.items() if v}


@dataclass(frozen=True)
class Remedy:
    id: str
    server: str
    when: tuple[str, ...]  # failure classes, signature ids, outcome words
    change: Change
    gives_up: str
    cost: int
    source: str
    origin: str  # the file and line it was read from

    def applies_to(self, outcome: str, failure_class: str | None, signature: str | None) -> bool:
        return any(word in (outcome, failure_class, signature) for word in self.when)


@dataclass(frozen=True)
class Catalogue:
    """Every remedy known, and each server's pricing request."""

    remedies: tuple[Remedy, ...]
    requests: Mapping[str, ReadyRequest]

    def for_server(self, server: str | None) -> list[Remedy]:
        """A server's remedies; all of them when the server is not known."""
        return [r for r in self.remedies if server is None or r.server == server]


def builtin_files() -> list[Path]:
    folder = resources.files("diagbench") / "remedies"
    return sorted(Path(str(p)) for p in folder.iterdir() if p.name.endswith(".yaml"))


def load_catalogue(extra: Sequence[Path] = ()) -> Catalogue:
    """The built-in remedies, then each extra file's (its ids replace built-in ones)."""
    by_id: dict[str, Remedy] = {}
    requests: dict[str, ReadyRequest] = {}
    for path in [*builtin_files(), *extra]:
        server, request, remedies = parse_file(path)
        if request is not None:
            requests[server] = request
        for remedy in remedies:
            by_id.pop(remedy.id, None)  # a replaced remedy takes the user's place in the order
            by_id[remedy.id] = remedy
    return Catalogue(tuple(by_id.values()), requests)


def parse_file(path: Path) -> tuple[str, ReadyRequest | None, list[Remedy]]:
    root, _ = load_document(path, what="remedies file")
    keys = root.mapping(_FILE_KEYS)
    if "server" not in keys:
        raise root.error("missing key 'server'", f"name the server these remedies are for: {', '.join(REMEDY_SERVERS)}")
    server = _server(keys["server"])
    request = parse_request(keys["price_request"]) if "price_request" in keys else None
    if "remedies" not in keys:
        raise root.error("missing key 'remedies'", "list them under 'remedies:'")
    remedies = [_remedy(item, server) for item in keys["remedies"].items()]
    seen: set[str] = set()
    for remedy, item in zip(remedies, keys["remedies"].items(), strict=True):
        if remedy.id in seen:
            raise item.error(f"duplicate remedy id '{remedy.id}'", "give each remedy its own id")
        seen.add(remedy.id)
    return server, request, remedies


def _server(src: Src) -> str:
    word = src.string("a server name")
    if word not in REMEDY_SERVERS:
        raise src.error(f'unknown server "{word}"', suggest(word, list(REMEDY_SERVERS)))
    return word


def _remedy(src: Src, server: str) -> Remedy:
    keys = src.mapping(_REMEDY_KEYS)
    for need, example in (("id", "id: vllm.enforce-eager"), ("for", "for: [cuda_graph_capture]"), ("change", "")):
        if need not in keys:
            raise src.error(f"missing key '{need}'", example or "e.g. change: {add: [--enforce-eager]}")
    if "source" not in keys:
        raise src.error("missing key 'source'", "say where the advice comes from: the server's docs, code or a thread")
    cost = keys["cost"].integer("an integer from 1 to 5") if "cost" in keys else 3
    if not 1 <= cost <= 5:
        raise keys["cost"].expected("an integer from 1 (nearly free) to 5 (a large loss)")
    return Remedy(
        id=keys["id"].string("a remedy id"),
        server=server,
        when=tuple(failure_word(item) for item in keys["for"].items_or_one()),
        change=_change(keys["change"]),
        gives_up=keys["gives_up"].string() if "gives_up" in keys else "",
        cost=cost,
        source=keys["source"].string(),
        origin=f"{src.file}:{src.line}",
    )


def failure_word(src: Src) -> str:
    """What a remedy or a debug set is `for`: a failure class, a signature id or an outcome."""
    word = src.string("a failure class, a signature id or an outcome")
    if "." in word or word in FAILURE_CLASSES or word in OUTCOMES:
        return word
    raise src.error(
        f'"{word}" is no failure class, signature id or outcome', suggest(word, [*FAILURE_CLASSES, *OUTCOMES])
    )


def _change(src: Src) -> Change:
    keys = src.mapping(_CHANGE_KEYS, what="a mapping with add, remove, set, scale, env and/or unset")
    if not keys:
        raise src.error("expected at least one change", "e.g. change: {add: [--enforce-eager]}")
    words = {name: _words(keys[name], name) for name in ("add", "remove", "unset") if name in keys}
    return Change(
        add=words.get("add", ()),
        remove=words.get("remove", ()),
        set=_strings(keys["set"]) if "set" in keys else {},
        scale=_scale(keys["scale"]) if "scale" in keys else None,
        env=_strings(keys["env"]) if "env" in keys else {},
        unset=words.get("unset", ()),
    )


def _words(src: Src, name: str) -> tuple[str, ...]:
    """add's words (its first an option), remove's options, unset's variable names."""
    items = src.items_or_one()
    checked = {"add": items[:1], "remove": items}.get(name, [])
    for item in checked:
        if not item.string().startswith("-"):
            raise item.error(f'"{item.string()}" is not an option', "write the flag, e.g. --enforce-eager")
    return tuple(item.string() for item in items)


def _strings(src: Src) -> dict[str, str]:
    return {name: value.text() for name, value in src.mapping().items()}


def _scale(src: Src) -> Scale:
    keys = src.mapping(_SCALE_KEYS)
    if ("option" in keys) == ("env" in keys):
        raise src.error("expected one of 'option' or 'env'", "e.g. scale: {option: --cuda-graph-max-bs, by: 0.5}")
    if "by" not in keys:
        raise src.error("missing key 'by'", "the factor, e.g. by: 0.5 to halve")
    target = keys["option"] if "option" in keys else keys["env"]
    by = _number(keys["by"])
    if not 1 / MAX_FACTOR <= by <= MAX_FACTOR:
        raise keys["by"].expected(f"a factor from {1 / MAX_FACTOR:g} to {MAX_FACTOR:g}", "e.g. by: 0.5 to halve")
    digits = keys["digits"].integer() if "digits" in keys else 3
    if not 0 <= digits <= MAX_DIGITS:
        raise keys["digits"].expected(f"an integer from 0 to {MAX_DIGITS}")
    return Scale(
        names=tuple(s.string() for s in target.items_or_one()),
        env="env" in keys,
        by=by,
        default=_number(keys["default"]) if "default" in keys else None,
        integer=keys["integer"].boolean() if "integer" in keys else False,
        low=_number(keys["min"]) if "min" in keys else None,
        high=_number(keys["max"]) if "max" in keys else None,
        digits=digits,
    )


def _number(src: Src) -> float:
    """A finite number of sane size (`1e400` reads as infinity: no setting is that)."""
    text = src.text("a number")
    try:
        value = float(text)
    except ValueError:
        raise src.expected("a number") from None
    if not math.isfinite(value) or abs(value) > MAX_NUMBER:
        raise src.expected(f"a number from {-MAX_NUMBER:g} to {MAX_NUMBER:g}")
    return value


def select_remedies(server: str | None, word: str | None, extra: Sequence[Path] = ()) -> list[Remedy]:
    """`diagbench remedies [--server S] [--class C]`: the remedies that match, in file order."""
    from diagbench.errors import UserError
    from diagbench.logs.server_names import known_server

    name = server if server in REMEDY_SERVERS else (known_server(server) if server else None)
    if server and name is None:
        raise UserError(f"--server {server}: unknown server (expected one of: {', '.join(REMEDY_SERVERS)})")
    if word and "." not in word and word not in FAILURE_CLASSES and word not in OUTCOMES:
        hint = suggest(word, [*FAILURE_CLASSES, *OUTCOMES])
        raise UserError(f"--class {word}: unknown failure class" + (f" ({hint})" if hint else ""))
    chosen = load_catalogue(extra).for_server(name)
    return [r for r in chosen if word is None or word in r.when]
