"""`diagbench init CMD`: a starting spec for a pasted command line, that `plan` accepts as printed.

The port becomes `{port}` (or is added where the server takes it), a server diagbench knows gets
`kind:` (its own ready lines decide), any other gets an HTTP ready rule to check; a timeout; one
factor to fill in. Strings are written as JSON strings, which YAML reads as they are."""

from __future__ import annotations

import json
import re
import shlex
from collections.abc import Sequence
from dataclasses import dataclass

from diagbench.errors import UserError
from diagbench.logs.server_names import SERVERS, guess_server, known_server
from diagbench.sensitive import holds_secret, looks_secret, secret_flag, secret_name

__all__ = ["Scaffold", "scaffold_spec"]

_ENV_WORD = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*)=(.*)$", re.S)
_PORT_OPTION = re.compile(r"^(--?[A-Za-z-]*port)(=\d+)?$")
_LONE_PORT = re.compile(r"^\d{4,5}$")
# where each server takes its port when the command names none (each server's --help)
_PORT_FLAG = {"lmdeploy": "--server-port", "triton": "--http-port", "ollama": "", "pytorch": ""}
# one factor worth trying first, with where the flag is defined
_FACTOR = {
    "vllm": ("eager", "--enforce-eager", "vllm/engine/arg_utils.py: EngineArgs.enforce_eager"),
    "sglang": (
        "compile",
        "--enable-torch-compile",
        "python/sglang/srt/server_args.py: ServerArgs.enable_torch_compile",
    ),
}
_TIMEOUT = {"vllm": "10m", "sglang": "10m", "trtllm": "20m"}  # compiles and graph captures take minutes


@dataclass(frozen=True)
class Scaffold:
    """The spec's text, and what it could not fill in itself (said on stderr)."""

    text: str
    notes: tuple[str, ...]


def scaffold_spec(command: str, server: str | None) -> Scaffold:
    """A spec for `command` (a line as pasted into a shell), `server` the kind (None: guessed)."""
    words = _split(command)
    env: dict[str, str] = {}
    while words and (found := _ENV_WORD.match(words[0])):
        env[found[1]] = found[2]
        words = words[1:]
    if not words:
        raise UserError("init: no command to run (write it after any NAME=value words)")
    guessed = guess_server(words)
    kind = _kind(server) if server is not None else guessed if guessed in SERVERS else None
    argv, replaced = _with_port(words, kind)
    notes = [] if replaced or kind else ["no port found in the command: put {port} where your server takes its port"]
    if not kind:
        notes.append("check ready.http: the path your server answers 200 once it is ready (or use ready.log)")
    argv, env = _without_secrets(argv, env, notes)
    if kind == "ollama":
        env["OLLAMA_HOST"] = "127.0.0.1:{port}"
    return Scaffold(_text(argv, env, kind), tuple(notes))


def _without_secrets(argv: list[str], env: dict[str, str], notes: list[str]) -> tuple[list[str], dict[str, str]]:
    """A secret is never written into a spec: a variable is left to the environment it inherits,
    a flag's value blanked for you to give again (said in `notes`)."""
    for name in [k for k, v in env.items() if secret_name(k) or holds_secret(v)]:
        del env[name]
        notes.append(f"{name} looks like a secret: left out of the spec; export it, the server inherits it")
    out = list(argv)
    for i, word in enumerate(out):
        flag, eq, value = word.partition("=")
        named = _ENV_WORD.match(word) and (secret_name(flag) or holds_secret(value))  # env NAME=X, docker -e
        if named or (secret_flag(flag) and eq):
            out[i] = f"{flag}=<your secret>"
        elif secret_flag(word) and i + 1 < len(out):
            out[i + 1] = "<your secret>"
        elif looks_secret(word):
            out[i] = "<your secret>"
        else:
            continue
        notes.append(f"{flag}: its secret value is not written into the spec: put it back where it says <your secret>")
    return out, env


def _split(command: str) -> list[str]:
    try:
        return shlex.split(command)
    except ValueError as exc:
        raise UserError(f"init: cannot split the command like a shell would: {exc} (close the quote)") from None


def _kind(word: str) -> str:
    if (name := known_server(word)) is None or name not in SERVERS:
        raise UserError(f"init --server {word}: unknown server (expected one of: {', '.join(SERVERS)})")
    return name


def _with_port(words: Sequence[str], kind: str | None) -> tuple[list[str], bool]:
    """argv with its port as {port}; a known server's port option added where none is given."""
    argv = list(words)
    for i, word in enumerate(argv):
        if "{port}" in word:
            return argv, True
        found = _PORT_OPTION.match(word)
        if found and found[2]:
            argv[i] = f"{found[1]}={{port}}"
            return argv, True
        if found and i + 1 < len(argv) and argv[i + 1].isdigit():
            argv[i + 1] = "{port}"
            return argv, True
    lone = [i for i, w in enumerate(argv[1:], 1) if _LONE_PORT.match(w) and 1024 <= int(w) <= 65535]
    if lone:
        argv[lone[-1]] = "{port}"
        return argv, True
    flag = _PORT_FLAG.get(kind or "", "--port") if kind else ""
    if flag:
        return [*argv, flag, "{port}"], True
    return argv, False


def _text(argv: Sequence[str], env: dict[str, str], kind: str | None) -> str:
    name = (kind or re.sub(r"[^A-Za-z0-9]+", "-", argv[0].rsplit("/", 1)[-1]).strip("-") or "server") + "-first-look"
    lines = [
        f"name: {name}",
        "description: What makes this launch fail? (diagbench init wrote this; edit it)",
        "server:",
        f"  command: [{', '.join(json.dumps(w) for w in argv)}]",
    ]
    if env:
        lines.append(f"  env: {{{', '.join(f'{k}: {json.dumps(v)}' for k, v in env.items())}}}")
    lines.append(_noted("  port: auto", "a free port per cell, written where {port} is"))
    if kind:
        lines.append(_noted(f"  kind: {kind}", f"{SERVERS[kind]}: its own ready lines decide"))
    else:
        lines.append(_noted("  ready: {http: /health}", "or {log: 'the line it prints when ready'}"))
    lines += [
        _noted(f"  timeout: {_TIMEOUT.get(kind or '', '5m')}", "launch -> ready; longer is a timeout"),
        "matrix:",
        "  # one factor to fill in: a flag, an option (args: [--opt, '{value}']) or an env var",
    ]
    if kind in _FACTOR:
        axis, flag, source = _FACTOR[kind]
        lines.append(f"  {axis}: {{flag: {flag}, values: [on, off]}}   # {source}")
    else:
        lines.append("  factor: {env: MY_SETTING, values: {before: '0', after: '1'}}")
    return "\n".join(lines) + "\n"


def _noted(line: str, comment: str) -> str:
    return f"{line.ljust(28)} # {comment}"
