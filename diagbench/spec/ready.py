"""The spec's `server.ready`: a ready line, an HTTP 200, and a real request that must succeed.

`ready.request` is readiness by a real generation, as SGLang's `/health_generate` and its
warm-up request are: a server can answer `GET /health` and still fail its first request
(vLLM on the CPU with an unsupported head size does exactly that).
"""

from __future__ import annotations

import json
from dataclasses import dataclass

import yaml

from diagbench.jsonvalue import JSON
from diagbench.spec.checks import ENV_PLACEHOLDERS, check_placeholders
from diagbench.yamlsrc import Src

__all__ = [
    "DEFAULT_PRICE_BUDGET_S",
    "DEFAULT_REQUEST_TIMEOUT_S",
    "ISOLATE_READY_FIX",
    "LAST_LINE_CHARS",
    "READY_FIX",
    "PriceLoad",
    "Ready",
    "ReadyRequest",
    "parse_ready",
    "parse_request",
    "timeout_hint",
]

DEFAULT_REQUEST_TIMEOUT_S = 60.0  # one generation on a cold server; a CPU takes seconds
_METHODS = ("GET", "POST", "PUT")
_REQUEST_KEYS = ("method", "path", "json", "status", "timeout")


@dataclass(frozen=True)
class ReadyRequest:
    """A request that must get `status` back before the server counts as ready."""

    method: str
    path: str  # a path on 127.0.0.1:{port}, or a full URL
    body: JSON = None  # sent as JSON when not None
    status: int = 200
    timeout: float = DEFAULT_REQUEST_TIMEOUT_S

    @property
    def label(self) -> str:
        return f"{self.method} {self.path}"

    def to_json(self) -> dict[str, JSON]:
        fields = {"method": self.method, "path": self.path, "json": self.body, "status": self.status}
        return {**fields, "timeout_s": self.timeout}


@dataclass(frozen=True)
class Ready:
    """What `ready:` asks for; all None means the packs' ready lines decide."""

    log: str | None = None
    http: str | None = None
    request: ReadyRequest | None = None


def parse_ready(src: Src) -> Ready:
    keys = src.mapping(("log", "http", "request"), what="a mapping with log, http and/or request")
    if not keys:
        raise src.error("expected log, http and/or request", "e.g. ready: {log: 'fired up and ready'}")
    log = keys["log"].regex() if "log" in keys else None
    http = _url_path(keys["http"]) if "http" in keys else None
    request = _parse_request(keys["request"]) if "request" in keys else None
    return Ready(log, http, request)


def _url_path(src: Src) -> str:
    path = src.string("a URL path")
    if not path.startswith(("/", "http://", "https://")):
        raise src.expected("a URL path starting with / (or a full http:// URL)", f"write /{path}")
    check_placeholders(src, path, ENV_PLACEHOLDERS)  # a full URL may name {port}
    return path


def _parse_request(src: Src) -> ReadyRequest:
    example = "e.g. request: {path: /v1/completions, json: {prompt: hi, max_tokens: 1}}"
    keys = src.mapping(_REQUEST_KEYS, what="a mapping with path, and method, json, status, timeout")
    if "path" not in keys:
        raise src.error("missing key 'path'", example)
    body = _json_body(keys["json"]) if "json" in keys else None
    default_method = "GET" if body is None else "POST"
    method = keys["method"].string("an HTTP method").upper() if "method" in keys else default_method
    if method not in _METHODS:
        raise keys["method"].expected("GET, POST or PUT")
    status = keys["status"].integer("an HTTP status code") if "status" in keys else 200
    if not 100 <= status <= 599:
        raise keys["status"].expected("an HTTP status code from 100 to 599")
    timeout = keys["timeout"].duration() if "timeout" in keys else DEFAULT_REQUEST_TIMEOUT_S
    return ReadyRequest(method, _url_path(keys["path"]), body, status, timeout)


def _json_body(src: Src) -> JSON:
    """A YAML mapping or list (written as JSON), or a string of JSON text."""
    if src.is_mapping() or src.is_list():
        body: JSON = yaml.constructor.SafeConstructor().construct_document(src.node)  # JSON: checked below
        try:
            json.dumps(body)
        except (TypeError, ValueError) as exc:  # YAML dates and the like have no JSON form
            raise src.error(f"cannot be sent as JSON: {exc}", "quote the value") from None
        return body
    text = src.string("a mapping, a list, or a string of JSON")
    try:
        parsed: JSON = json.loads(text)
    except json.JSONDecodeError as exc:
        raise src.error(f"not valid JSON: {exc.msg} at character {exc.pos}", "write it as a YAML mapping") from None
    return parsed


def parse_request(src: Src) -> ReadyRequest:
    """A request written like `ready.request` (a triage's pricing request reads the same)."""
    return _parse_request(src)


DEFAULT_PRICE_BUDGET_S = 120.0  # a pricing load never holds a launch longer than this


@dataclass(frozen=True)
class PriceLoad:
    """A short load sent once a launch is ready, before its teardown: `count` requests, one
    after another, within `budget_s` (what triage's `--price N` measures per remedy)."""

    request: ReadyRequest
    count: int
    budget_s: float = DEFAULT_PRICE_BUDGET_S


LAST_LINE_CHARS = 160  # a timeout's reason quotes the log's last line up to this
READY_FIX = "add `ready: {log: ...}` or `{http: /}`"
ISOLATE_READY_FIX = f"{READY_FIX} (isolate: --ready REGEX or --http PATH)"


def timeout_hint(last_line: str, ready_log: str | None, ready_http: str | None, hung: bool = False) -> str:
    """What a `timeout` reason adds: the last line the server wrote, and the fix when no
    ready rule of the spec's could match (a server of a kind the packs do not know). `hung`:
    a server the packs recognise stalled on its way up: a hang, which no ready rule fixes."""
    line = last_line.strip()
    line = line if len(line) <= LAST_LINE_CHARS else line[: LAST_LINE_CHARS - 1] + "…"
    seen = f"the log's last line was '{line}'" if line else "the server wrote nothing"
    if hung:
        return f"{seen}: it hung on its way up (its stacks say where), not for want of a ready rule"
    if ready_log is None and ready_http is None:
        return f"no ready rule matched; {seen}: {READY_FIX}"
    if ready_log is not None:
        return f"ready.log /{ready_log}/ never matched; {seen}"
    return seen if line else ""  # an HTTP ready probe: what it last got says more than silence
