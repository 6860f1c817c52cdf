"""Secrets never reach a record or a screen: the one place that blanks them, used everywhere
(manifest, spec text, records, plan, tables, Markdown, JUnit).

A value is secret (the predicates are in `diagbench.sensitive`)
- by name: an environment variable or a flag whose last word is a secret word (`HF_TOKEN`,
  `OPENAI_API_KEY`, `--api-key X`, `--hf-token=X`; not `MAX_TOKENS` or `--tokenizer`);
- by shape: `hf_...`, `sk-...`, `ghp_...`, `nvapi-...`, `AKIA...`, JWTs, `Bearer ...`, the
  password in `scheme://user:password@host`;
- by value: a value found secret by name is blanked wherever else it appears, but only when it
  is 8 characters or more: a short value is blanked in its own slot, never as a substring
  (an `API_KEY: "e"` must not blank every letter e).
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

import yaml

from diagbench.records.record import AttemptRecord
from diagbench.sensitive import REDACTED, SHAPE, secret_flag, secret_name, secret_template

if TYPE_CHECKING:
    from diagbench.spec.load import Spec

MIN_KNOWN_CHARS = 8  # shorter secrets are blanked in their slot only, never as a substring
MIN_CUT_CHARS = 4  # the least of a secret, left at a cut end of a clipped text, that is blanked

_BEARER = re.compile(r"(?i)\b(bearer|basic)(\s+)[A-Za-z0-9._~+/-]{8,}=*")
_URL_PASSWORD = re.compile(r"([A-Za-z][A-Za-z0-9+.-]*://[^/\s:@]*:)[^/\s@]+(@)")
_VALUE = re.compile(r"'[^']*'|\"[^\"]*\"|[^\s'\",;)}\]]+")
# a flag and what separates it from its value: `--f X`, `--f=X`, and a printed list's `'--f', 'X'`
_FLAG_NAME = re.compile(r"(?<![\w-])(?P<name>--?[A-Za-z][\w-]*)(?:=|['\"]?,?[ \t]+)")
_PAIR_NAME = re.compile(r"(?<![\w.-])(?P<q>['\"]?)(?P<name>[A-Za-z_][\w.-]*)(?P=q)\s*[=:]\s*")
_PARTIAL_SHAPE_AT_END = re.compile(
    r"(?<![A-Za-z0-9])(?:hf_|sk-|gh[pousr]_|github_pat_|glpat-|nvapi-|xox[abprs]-|AKIA|eyJ)[A-Za-z0-9_.-]*$"
)
_PLACEHOLDER = re.compile(r"^\{\w+\}$")  # an args template's "{value}" is not a secret itself
_NOT_A_SECRET = frozenset({"none", "null", "nil", "false", "true", "bearer", "basic", REDACTED.lower()})


@dataclass(frozen=True)
class Redactor:
    """Blanks secrets out of text, argv and env; knows some secret values by heart."""

    known: frozenset[str] = frozenset()  # secret values, each MIN_KNOWN_CHARS or longer

    @classmethod
    def of(cls, envs: Iterable[Mapping[str, str | None]] = (), argvs: Iterable[Sequence[str]] = ()) -> Redactor:
        """Learn the secret values set by name in these environments and command lines,
        and those of secret-named variables in diagbench's own environment (inherited by servers)."""
        values = {v for env in (*envs, os.environ) for k, v in env.items() if v and secret_name(k)}
        values.update(v for argv in argvs for v in _flag_values(argv))
        return cls(frozenset(v for v in values if len(v) >= MIN_KNOWN_CHARS and v != REDACTED))

    def text(self, text: str) -> str:
        """Known values and secret shapes, wherever they are in `text`."""
        text = SHAPE.sub(REDACTED, text)
        for value in sorted(self.known, key=len, reverse=True):
            if value in text:
                text = text.replace(value, REDACTED)
        text = _BEARER.sub(lambda m: f"{m.group(1)}{m.group(2)}{REDACTED}", text)
        return _URL_PASSWORD.sub(lambda m: f"{m.group(1)}{REDACTED}{m.group(2)}", text)

    def command(self, text: str) -> str:
        """A command line as one string (shell: true): also `--api-key X` inside it."""
        return _blank_values(self.text(text), _FLAG_NAME)

    def log(self, text: str) -> str:
        """A server's own words: also `api_key='X'`, `HF_TOKEN=X`, `"token": "X"` inside them."""
        return _blank_values(self.command(text), _PAIR_NAME)

    def cut(self, text: str) -> str:
        """A server's words cut from longer ones (a clipped line, a log's tail): also the part of
        a known secret or of a token shape left at either cut end."""
        text = _PARTIAL_SHAPE_AT_END.sub(REDACTED, self.log(text))
        for value in self.known:
            if k := _overlap(text, value[:-1], at_end=True):
                text = text[:-k] + REDACTED
            if k := _overlap(text, value[1:], at_end=False):
                text = REDACTED + text[k:]
        return text

    def argv(self, argv: Sequence[str]) -> list[str]:
        """The command line with the values of secret flags (`--f X`, `--f=X`) blanked, and
        secret assignments inside a word (`docker run -e HF_TOKEN=X`, `sh -c '... --f X'`)."""
        out: list[str] = []
        hide_next = False
        for token in argv:
            if hide_next and _is_value(token):
                out.append(REDACTED)
            elif secret_flag(token) and "=" in token:
                out.append(token.partition("=")[0] + "=" + REDACTED)
            else:
                out.append(self.log(token))
            hide_next = secret_flag(token) and "=" not in token
        return out

    def env(self, env: Mapping[str, str | None]) -> dict[str, str | None]:
        """Environment changes with secret-named variables blanked (an unset stays None)."""
        return {k: None if v is None else REDACTED if secret_name(k) and v else self.text(v) for k, v in env.items()}

    def deep(self, data: dict[str, Any]) -> dict[str, Any]:
        """Every string value inside nested JSON data, through `text` (keys are left as written)."""
        return {k: _deep(v, self.text) for k, v in data.items()}


def _deep(data: Any, scrub: Callable[[str], str]) -> Any:
    if isinstance(data, str):
        return scrub(data)
    if isinstance(data, list):
        return [_deep(x, scrub) for x in data]
    if isinstance(data, dict):
        return {k: _deep(v, scrub) for k, v in data.items()}
    return data


def _overlap(text: str, part: str, at_end: bool) -> int:
    """The longest piece (MIN_CUT_CHARS or more) of `part` that `text` ends with (a prefix of
    `part`) or starts with (a suffix of it); 0 if none."""
    for k in range(min(len(part), len(text)), MIN_CUT_CHARS - 1, -1):
        if (at_end and text.endswith(part[:k])) or (not at_end and text.startswith(part[-k:])):
            return k
    return 0


def _blank_values(text: str, names: re.Pattern[str]) -> str:
    """Blank the value after each secret name that `names` finds (`--api-key X`, `token: X`).
    Only the name is matched, so a quoted value (`sh -c '... --api-key X'`) is searched too."""
    out, pos = [], 0
    for m in names.finditer(text):
        if m.start() < pos or not secret_name(m.group("name")):
            continue
        value = _VALUE.match(text, m.end())
        if value is None or not _is_value(value.group()):
            continue
        quote = value.group()[0] if value.group()[0] in "'\"" else ""
        out += [text[pos : m.end()], f"{quote}{REDACTED}{quote}"]
        pos = value.end()
    return "".join(out) + text[pos:]


def _is_value(raw: str) -> bool:
    bare = raw.strip("'\"")
    return bool(bare) and bare.lower() not in _NOT_A_SECRET and not raw.startswith("-") and not _PLACEHOLDER.match(bare)


def _flag_values(argv: Sequence[str]) -> Iterable[str]:
    """The values a command line gives to secret flags and names (also inside one word)."""
    for index, token in enumerate(argv):
        if secret_flag(token) and "=" not in token and index + 1 < len(argv):
            yield argv[index + 1]
        for names in (_FLAG_NAME, _PAIR_NAME):
            for m in names.finditer(token):
                found = _VALUE.match(token, m.end())
                if secret_name(m.group("name")) and found and _is_value(found.group()):
                    yield found.group().strip("'\"")


def spec_redactor(spec: Spec) -> Redactor:
    """What is secret in a spec: the values set by secret names or flags, in any of its cells."""
    s = spec.server
    return Redactor.of([s.env, *(c.env for c in spec.cells)], [s.command, *(c.args for c in spec.cells)])


def redact_record(record: AttemptRecord, redactor: Redactor) -> AttemptRecord:
    """A record safe to write or show: its command, env, reason and deciding line blanked."""
    evidence = record.evidence
    return replace(
        record,
        command=redactor.argv(record.command),
        env_changes=redactor.env(record.env_changes),
        reason=redactor.log(record.reason),
        evidence=replace(evidence, text=redactor.cut(evidence.text)) if evidence else None,  # clipped lines
    )


def redact(env: Mapping[str, str | None]) -> dict[str, str | None]:
    """Env changes safe to write down (with what diagbench's own environment holds secret)."""
    return Redactor.of().env(env)


def redact_argv(argv: Sequence[str]) -> list[str]:
    """A command line safe to write down."""
    return Redactor.of(argvs=[argv]).argv(argv)


# -- a spec's text ----------------------------------------------------------------------


def redact_yaml(text: str, redactor: Redactor) -> str:
    """A spec's source with its secrets blanked where the YAML puts them: values of
    secret-named `env` entries, the values of an axis that sets a secret variable or flag,
    secret flags' values in commands; then known values and shapes anywhere (comments too).
    Each blanked scalar is rewritten in place, so the rest of the text stays as written."""
    try:
        root = yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.YAMLError:
        return redactor.log(text)
    walk = _SpecWalk(text, redactor)
    if root is not None:
        walk.node(root, secret=False)
    for start in sorted(walk.edits, reverse=True):
        end, replacement = walk.edits[start]
        text = text[:start] + replacement + text[end:]
    return redactor.text(text)


class _SpecWalk:
    """Finds the scalars of a composed spec that hold secrets, as text edits."""

    def __init__(self, text: str, redactor: Redactor):
        self.text, self.redactor = text, redactor
        self.edits: dict[int, tuple[int, str]] = {}  # start -> (end, replacement)

    def node(self, node: yaml.Node, secret: bool, argv: bool = False) -> None:
        """Walk `node`; `secret`: its scalars are secrets; `argv`: they are command words."""
        if isinstance(node, yaml.ScalarNode):
            self.scalar(node, secret, argv)
        elif isinstance(node, yaml.SequenceNode):
            hide_next = False
            for item in node.value:
                self.node(item, secret or hide_next, argv)
                hide_next = isinstance(item, yaml.ScalarNode) and secret_flag(item.value) and "=" not in item.value
        elif isinstance(node, yaml.MappingNode):
            pairs = [(str(k.value) if isinstance(k, yaml.ScalarNode) else "", v) for k, v in node.value]
            axis_secret = _secret_axis(dict(pairs))
            for key, value in pairs:
                if key == "env" and isinstance(value, yaml.MappingNode):
                    for name, entry in value.value:
                        self.node(entry, secret or secret_name(str(name.value)))
                else:
                    self.node(value, secret or (key == "values" and axis_secret), argv or key in _COMMAND_KEYS)

    def scalar(self, node: yaml.ScalarNode, secret: bool, argv: bool) -> None:
        value = str(node.value)
        if node.tag.endswith(":null") or not value:
            return
        if secret and not _PLACEHOLDER.match(value):
            new = REDACTED
        else:  # a command word may hold `HF_TOKEN=X`; prose (a claim) is left to the shapes
            new = self.redactor.log(value) if argv else self.redactor.command(value)
        if new == value:
            return
        start, end = node.start_mark.index, node.end_mark.index
        span = self.text[start:end]
        trailing = span[len(span.rstrip()) :]  # a block scalar's span ends with its line breaks
        self.edits[start] = (end, json.dumps(new) + trailing)  # JSON strings are YAML double-quoted scalars


_COMMAND_KEYS = ("command", "args")


def _secret_axis(keys: Mapping[str, yaml.Node]) -> bool:
    """A matrix axis (`{env: HF_TOKEN, values: ...}`, `{args: [--api-key, "{value}"], ...}`)
    whose values are secrets."""
    env, args = keys.get("env"), keys.get("args")
    if isinstance(env, yaml.ScalarNode) and secret_name(str(env.value)):
        return True
    if isinstance(args, yaml.SequenceNode):
        return secret_template([str(n.value) for n in args.value if isinstance(n, yaml.ScalarNode)])
    return isinstance(args, yaml.ScalarNode) and secret_template(str(args.value).split())
