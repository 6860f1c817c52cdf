"""Secrets never reach a record or a screen: the one place that blanks them, used by every sink
(`records.sink`). What looks secret is `diagbench.sensitive`'s: a secret name (`HF_TOKEN`,
`--api-key X`; not `MAX_TOKENS`), a token shape (`hf_...`, `sk-...`, JWTs, a URL's password, a
secret query parameter), a flag or an assignment inside a value (`EXTRA_ARGS: "--api-key X"`), a
JSON body's secret key. A value found secret by name is learned for the whole process (`learned`)
and blanked wherever it appears, in every form it is written out in, when it has MIN_KNOWN_CHARS
or more (a shorter one only in its own slot: `API_KEY: "e"` must not blank every e). Up to 9
digits after a secret-looking name in a server's words are a count (`#new-token: 5`), not a
secret. docs/explanation/security.md lists it all."""

from __future__ import annotations

import json
import os
import re
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING

from diagbench import safetext
from diagbench.jsonvalue import JSON, JSONObject
from diagbench.records.typed import build, plain
from diagbench.sensitive import REDACTED, SECRET_URL, SHAPE, secret_flag, secret_name, tokens

if TYPE_CHECKING:
    from diagbench.logs.classify import Classification
    from diagbench.records.record import AttemptRecord
    from diagbench.spec.load import ServerSpec, Spec

__all__ = [
    "MIN_CUT_CHARS",
    "MIN_KNOWN_CHARS",
    "Redactor",
    "environ_secrets",
    "learn",
    "learned",
    "redact",
    "redact_argv",
    "redact_classification",
    "redact_record",
    "run_redactor",
    "server_redactor",
    "spec_redactor",
]

MIN_KNOWN_CHARS = 8  # shorter secrets are blanked in their slot only, never as a substring
MIN_CUT_CHARS = 4  # the least of a secret, left at a cut end of a clipped text, that is blanked

_BEARER = re.compile(r"(?i:(bearer|basic))(\s+)[A-Za-z0-9._~+/-]{8,}=*")
# the scheme starts where a run of scheme characters starts: one way to match, tried once per run (started at
# any letter it rescanned a long word from each letter: quadratic); a quote or `<` ends the URL (JSON, HTML)
_URL_PASSWORD = re.compile(r"((?<![A-Za-z0-9+.-])[0-9+.-]*[A-Za-z][A-Za-z0-9+.-]*://[^/\s:@]*:)[^/\s@\"<>]+(@)")
# a query parameter (`?token=X`, `&api_key=X`): its name starts after `?` or `&` and holds neither
_QUERY = re.compile(r"(?<=[?&])(?P<name>[\w.%-]+)=(?P<value>[^&#\s'\"<>]+)")
_VALUE = re.compile(r"'[^']*'|\"[^\"]*\"|[^\s'\",;)}\]]+")
# a flag and what separates it from its value: `--f X`, `--f=X`, and a printed list's `'--f', 'X'`
_FLAG_NAME = re.compile(r"(?<![\w-])(?P<name>--?[A-Za-z][\w-]*)(?:=|['\"]?,?[ \t]+)")
_PAIR_NAME = re.compile(r"(?<![\w.-])(?P<q>['\"]?)(?P<name>[A-Za-z_][\w.-]*)(?P=q)\s*[=:]\s*")
_PARTIAL_SHAPE_AT_END = re.compile(
    r"(?:hf_|api_org_|sk-|[sr]k_live_|[sr]k_test_|gh[pousr]_|github_pat_|glpat-|nvapi-|xox[abprs]-"
    r"|pypi-AgE|AIza|AKIA|eyJ)[A-Za-z0-9_.-]*$"
)
_LOWER_ESCAPES = re.compile(r"%[0-9A-F]{2}")  # `%2F` as some clients write it: `%2f`
_COUNT = re.compile(r"[+-]?[0-9]{1,9}(?:\.[0-9]+)?")  # `#new-token: 5`: a count or an id, not a secret
_PLACEHOLDER = re.compile(r"^\{\w+\}$")  # an args template's "{value}" is not a secret itself
_BLANKED_QUERY = REDACTED + "&"  # `?token=<redacted>&n=1`: blanked by `text`, the parameters after it kept
_NOT_A_SECRET = frozenset({"none", "null", "nil", "false", "true", "bearer", "basic", REDACTED.lower()})
_ASSIGN = re.compile(r"\b([A-Za-z_]\w*)=(\"[^\"]*\"|'[^']*'|[^\s\"',;]+)")  # NAME=value in a setup line


@dataclass(frozen=True)
class Redactor:
    """Blanks secrets out of text, argv and env; knows some secret values by heart."""

    known: frozenset[str] = field(default=frozenset())  # secret values, each MIN_KNOWN_CHARS or longer

    @classmethod
    def of(
        cls,
        envs: Iterable[Mapping[str, str | None]] = (),
        argvs: Iterable[Sequence[str]] = (),
        urls: Iterable[str] = (),
        bodies: Iterable[JSON] = (),
    ) -> Redactor:
        """Learn the secret values set by name in these environments, command lines, URLs' queries
        and JSON bodies (for the whole process too), with diagbench's own environment's."""
        values, argvs = _env_values(list(envs)), list(argvs)
        values.update(v for argv in argvs for v in _flag_values(argv))
        values.update(_url_passwords(w for a in argvs for w in a))
        values.update(m["value"] for url in urls for m in _QUERY.finditer(url) if secret_name(m["name"]))
        values.update(v for body in bodies for v in _json_secrets(body, secret=False))
        found = _worth_knowing(values)
        learn(found)
        return cls(found | environ_secrets())

    @cached_property
    def forms(self) -> tuple[tuple[str, str], ...]:
        """Each known value in every form it is written in, longest first, and its blank (line breaks kept)."""
        found = {form: REDACTED + "".join(c for c in form if c in "\r\n") for v in self.known for form in _forms(v)}
        return tuple(sorted(found.items(), key=lambda item: len(item[0]), reverse=True))

    def text(self, text: str) -> str:
        """Known values (in every form) and secret shapes, wherever they are in `text`."""
        for form, blank in self.forms:
            if form in text:
                text = text.replace(form, blank)
        text = _sub_tokens(SHAPE, text, lambda _: REDACTED)
        text = SECRET_URL.sub(_blank_secret_url, text)
        text = _sub_tokens(_BEARER, text, lambda m: f"{m.group(1)}{m.group(2)}{REDACTED}")
        text = _QUERY.sub(_blank_query_value, text)
        return _URL_PASSWORD.sub(lambda m: f"{m.group(1)}{REDACTED}{m.group(2)}", text)

    def command(self, text: str) -> str:
        """A command line as one string (shell: true): also `--api-key X` inside it."""
        return _blank_values(self.text(text), _FLAG_NAME)

    def log(self, text: str) -> str:
        """A server's own words: also `api_key='X'`, `HF_TOKEN=X`, `"token": "X"` inside them."""
        return _blank_values(self.command(text), _PAIR_NAME)

    def cut(self, text: str) -> str:
        """A clipped line or a log's tail: also the part of a secret or a token shape left at a cut end."""
        text = _sub_tokens(_PARTIAL_SHAPE_AT_END, self.log(text), lambda _: REDACTED)
        for value in self.known:
            if k := _overlap(text, value[:-1], at_end=True):
                text = text[:-k] + REDACTED
            if k := _overlap(text, value[1:], at_end=False):
                text = REDACTED + text[k:]
        return text

    def argv(self, argv: Sequence[str]) -> list[str]:
        """Secret flags' values blanked (`--f X`, `--f=X`), and inside a word (`-e HF_TOKEN=X`)."""
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
        """Secret-named variables blanked (an unset stays None), and secrets inside other values."""
        return {k: None if v is None else REDACTED if secret_name(k) and v else self.log(v) for k, v in env.items()}

    def json(self, body: JSON) -> JSON:
        """A JSON body with secret-named keys' values blanked at any depth, other strings through `text`."""
        return _json_blanked(body, self.text, secret=False)

    def deep(self, data: JSONObject) -> dict[str, JSON]:
        """Every string value inside nested JSON data, through `text` (keys are left as written)."""
        return {k: _deep(v, self.text) for k, v in data.items()}

    def values(self, data: JSON) -> JSON:
        """JSON data of any kind (a list of verdicts too) with every string value through `text`."""
        return _deep(data, self.text)


# -- what this process knows ------------------------------------------------------------

_learned: frozenset[str] = frozenset()
_learning = threading.Lock()
_environ: tuple[tuple[tuple[str, str], ...], frozenset[str]] = ((), frozenset())


def learn(values: Iterable[str]) -> None:
    """Remember secret values for the rest of this process: every sink blanks them."""
    global _learned
    new = _worth_knowing(values) - _learned
    if new:
        with _learning:
            _learned = _learned | new


def learned() -> frozenset[str]:
    """Every secret value this process has learned, and those of its own environment."""
    return _learned | environ_secrets()


def environ_secrets() -> frozenset[str]:
    """The secret values of diagbench's own environment (inherited by every server), read again
    only when the environment changed."""
    global _environ
    items = tuple(os.environ.items())
    if items != _environ[0]:
        _environ = (items, _worth_knowing(_env_values([dict(items)])))
    return _environ[1]


def _env_values(envs: list[Mapping[str, str | None]]) -> set[str]:
    """What environments set secret: by a secret name, a secret flag inside a value, a URL's password."""
    values = {v for env in envs for k, v in env.items() if v and secret_name(k)}
    values.update(found for env in envs for v in env.values() if v for found in _flag_values([v]))
    values.update(_url_passwords(v for env in envs for v in env.values() if v))
    return values


def _sub_tokens(pattern: re.Pattern[str], text: str, blank: Callable[[re.Match[str]], str]) -> str:
    """`pattern.sub(blank, text)`, for the matches that begin a token (`sensitive.token_start`)."""
    out, pos = [], 0
    for found in tokens(pattern, text):
        out += [text[pos : found.start()], blank(found)]
        pos = found.end()
    return "".join(out) + text[pos:] if out else text


def _url_passwords(words: Iterable[str]) -> Iterable[str]:
    """The passwords of `scheme://user:password@host` URLs in these words, and each `user:password` as
    base64, as `Authorization: Basic` sends it (RFC 7617) and `curl -v` prints it."""
    import base64

    for word in words:
        for m in _URL_PASSWORD.finditer(word):
            password = word[m.end(1) : m.start(2)]
            user = m.group(1).rpartition("://")[2][:-1]
            yield password
            yield base64.b64encode(f"{user}:{password}".encode()).decode()


def _worth_knowing(values: Iterable[str]) -> frozenset[str]:
    """Values long enough to blank wherever they are; none that a blank itself holds."""
    return frozenset(v for v in values if len(v) >= MIN_KNOWN_CHARS and v not in REDACTED)


def _forms(value: str) -> set[str]:
    """A value as is, URL-quoted, JSON-, Python-, HTML-, XML- or Markdown-escaped, or shown with escapes."""
    import html  # here: html.entities and urllib cost every command's start-up, and most never learn a secret
    from urllib.parse import quote, quote_plus

    quoted = quote(value, safe="")
    forms = {value, quoted, _LOWER_ESCAPES.sub(lambda m: m.group().lower(), quoted), quote_plus(value)}
    forms |= {json.dumps(value)[1:-1], repr(value)[1:-1]}
    forms |= {json.dumps(value, ensure_ascii=False)[1:-1], html.escape(value), html.escape(value, quote=False)}
    forms |= {safetext.markdown(value), safetext.markdown_code(value), safetext.terminal(value, keep="")}
    return {f for f in forms if len(f) >= MIN_KNOWN_CHARS}


def _deep(data: JSON, scrub: Callable[[str], str]) -> JSON:
    if isinstance(data, str):
        return scrub(data)
    if isinstance(data, list):
        return [_deep(x, scrub) for x in data]
    if isinstance(data, dict):
        return {k: _deep(v, scrub) for k, v in data.items()}
    return data


def _json_blanked(data: JSON, scrub: Callable[[str], str], secret: bool) -> JSON:
    if isinstance(data, dict):
        return {k: _json_blanked(v, scrub, secret or secret_name(str(k))) for k, v in data.items()}
    if isinstance(data, list):
        return [_json_blanked(x, scrub, secret) for x in data]
    if secret and data is not None and data != "" and not isinstance(data, bool):
        return REDACTED
    return scrub(data) if isinstance(data, str) else data


def _json_secrets(data: JSON, secret: bool) -> Iterable[str]:
    """The string and number values a JSON body gives to secret-named keys."""
    if isinstance(data, dict):
        for k, v in data.items():
            yield from _json_secrets(v, secret or secret_name(str(k)))
    elif isinstance(data, list):
        for x in data:
            yield from _json_secrets(x, secret)
    elif secret and isinstance(data, str | int | float) and not isinstance(data, bool):
        yield str(data)


def _blank_secret_url(m: re.Match[str]) -> str:
    """A Slack webhook's path or a DSN's key blanked, the rest of the URL kept."""
    group = "secret" if m.group("secret") is not None else "user"
    start, end = m.span(group)
    return m.group()[: start - m.start()] + REDACTED + m.group()[end - m.start() :]


def _blank_query_value(m: re.Match[str]) -> str:
    if not secret_name(m["name"]) or not _is_value(m["value"]):
        return m.group()
    return f"{m['name']}={REDACTED}"


def _overlap(text: str, part: str, at_end: bool) -> int:
    """The longest prefix (MIN_CUT_CHARS or more) of `part` that `text` ends with (or suffix it starts with); 0."""
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
        if value is None or not _is_value(value.group()) or value.group().startswith(_BLANKED_QUERY):
            continue
        if names is _PAIR_NAME and _COUNT.fullmatch(value.group()):  # `#new-token: 5`, a server's count
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
                in_url = token.endswith("://", 0, m.start())  # `https://x-access-token:T@host`: T is the URL's password
                if secret_name(m.group("name")) and found and _is_value(found.group()) and not in_url:
                    yield found.group().strip("'\"")


def spec_redactor(spec: Spec) -> Redactor:
    """Secret values a spec sets by names or flags: in its cells, its executor's (`export HF_TOKEN=X`)."""
    said = [s.value if isinstance(s.value, list) else [s.value] for s in spec.executor.settings.values()]
    words = [w for ws in said for w in ws if isinstance(w, str)]
    pairs = [{m[1]: m[2].strip("'\"")} for w in words for m in _ASSIGN.finditer(w)]
    return server_redactor(spec.server, [*(c.env for c in spec.cells), *pairs], [*(c.args for c in spec.cells), words])


def server_redactor(
    server: ServerSpec, envs: Iterable[Mapping[str, str | None]] = (), argvs: Iterable[Sequence[str]] = ()
) -> Redactor:
    """What is secret in a server's launch and readiness: its command and env (and these cells'),
    its ready URLs' secret query parameters and its ready request's secret JSON keys."""
    request = server.ready_request
    urls = [u for u in (server.ready_http, request and request.path) if u]
    bodies = [request.body] if request and request.body is not None else []
    return Redactor.of([server.env, *envs], [server.command, *argvs], urls, bodies)


def run_redactor(where: str | None) -> Redactor:
    """What is secret in a run, for a report that reads its logs again: its spec's while the spec
    file is there, else diagbench's own environment's (the run's files were blanked when written)."""
    from diagbench.errors import DiagbenchError
    from diagbench.spec.load import load_spec

    if not where:
        return Redactor.of()
    try:
        return spec_redactor(load_spec(Path(where)))
    except (DiagbenchError, OSError, ValueError):  # moved, edited into a mistake: the shapes and names still apply
        return Redactor.of()


def redact_record(record: AttemptRecord, redactor: Redactor) -> AttemptRecord:
    """A record safe to write or show: its command, env, reason and deciding line blanked."""
    from diagbench.records.parts import Hang  # here: `classify --json` imports this module, not the parts

    evidence = record.evidence
    return replace(
        record,
        command=redactor.argv(record.command),
        env_changes=redactor.env(record.env_changes),
        reason=redactor.log(record.reason),
        evidence=replace(evidence, text=redactor.cut(evidence.text)) if evidence else None,  # clipped lines
        cause=replace(record.cause, message=redactor.cut(record.cause.message)) if record.cause else None,
        hang=build(Hang, redactor.deep(dict(plain(record.hang)))) if record.hang else None,  # frames, notes: argv
    )


def redact_classification(result: Classification, redactor: Redactor) -> Classification:
    """`classify`'s answer safe to print: its line, its cause's message and its ready line blanked."""
    cause, ready, evidence = result.cause, result.ready, result.evidence
    return replace(
        result,
        evidence=None if evidence is None else replace(evidence, text=redactor.cut(evidence.text)),
        cause=None if cause is None else replace(cause, message=redactor.cut(cause.message)),
        ready=None if ready is None else replace(ready, text=redactor.cut(ready.text)),
    )


def redact(env: Mapping[str, str | None]) -> dict[str, str | None]:
    """Env changes safe to write down (their secret values learned, with diagbench's own environment's)."""
    return Redactor.of([env]).env(env)


def redact_argv(argv: Sequence[str]) -> list[str]:
    """A command line safe to write down."""
    return Redactor.of(argvs=[argv]).argv(argv)
