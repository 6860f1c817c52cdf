"""Mistakes a spec's command likely makes, said by `plan` and `run` before any launch: a port of
its own while diagbench hands each cell another `{port}`, a `$NAME` no shell will fill in.

A command with no `{port}` is warned about where it listens somewhere: it names a port, the
readiness check asks the handed-out port (`ready.http`), or it is a server diagbench knows
(which listens on its default port). A program that names no port and is not probed over HTTP
(a script, a test's fake server) loses nothing by leaving `{port}` out.

Each warning ends in a fix whose YAML (between backticks) can be pasted as it is."""

from __future__ import annotations

import json
import re
import shlex
from collections.abc import Iterator

from diagbench.logs.server_names import guess_server
from diagbench.spec.load import Spec

__all__ = ["command_warnings", "fixed_port"]

_DOLLAR = re.compile(r"\$\{?([A-Za-z_][A-Za-z0-9_]*)\}?")
_PORT_OPTION = re.compile(r"^--?[A-Za-z-]*port(?:=(\d+))?$")
_NUMBER = re.compile(r"^\d{4,5}$")


def command_warnings(spec: Spec) -> list[str]:
    """What the spec's command likely gets wrong about ports and variables (none: it looks right)."""
    return [*_port_warning(spec), *_dollar_warnings(spec)]


def fixed_port(argv: tuple[str, ...]) -> str | None:
    """The port a command names for itself (`--port 8123`, `--port=8123`, or a lone number such as
    `http.server 8123`), or None."""
    tokens = [t for token in argv for t in (shlex.split(token) if " " in token else [token])]
    for i, token in enumerate(tokens):
        match = _PORT_OPTION.match(token)
        if match and match.group(1):
            return match.group(1)
        if match and i + 1 < len(tokens) and tokens[i + 1].isdigit():
            return tokens[i + 1]
    numbers = [t for t in tokens[1:] if _NUMBER.match(t) and 1024 <= int(t) <= 65535]
    return numbers[-1] if numbers else None


def _texts(spec: Spec) -> Iterator[str]:
    """Every text diagbench fills `{port}` into: the command, the axes' args, env values, ready.http."""
    s = spec.server
    yield from s.command
    yield from s.env.values()
    for cell in spec.cells:
        yield from cell.args
        yield from (v for v in cell.env.values() if v is not None)
    if s.ready_http:
        yield s.ready_http


def _port_warning(spec: Spec) -> list[str]:
    s = spec.server
    if s.port is not None or any("{port}" in text for text in _texts(spec)):
        return []
    port = fixed_port(s.command)
    listening = port is not None or (s.ready_http or "").startswith("/") or s.kind or guess_server(s.command)
    if not listening:  # a program that listens on no port (a script, a fake server) needs no {port}
        return []
    argv = tuple(re.sub(r"\$\{?PORT\}?(?![A-Za-z0-9_])", "{port}", t) for t in s.command)  # $PORT meant ours
    command = " ".join(argv) if s.shell else _joined(argv)
    if "{port}" in command:
        listens = "where $PORT says, which nothing sets"
        fixed, keep = command, ""
    elif port is None:
        listens = "wherever it listens"
        fixed = f"{command} --port {{port}}"
        keep = ""
    else:
        listens = f"on {port}, its own port"
        fixed = re.sub(rf"(?<![\d]){port}(?![\d])", "{port}", command)
        keep = f", or `port: {port}` to launch every cell on that one port"
    return [
        "server.command has no {port} while diagbench hands each cell a free port (port: auto): the "
        f"readiness check and the port check look at that port, the server listens {listens}, and a "
        f"second cell finds it taken. Write `command: {json.dumps(fixed)}`{keep}"
    ]


def _dollar_warnings(spec: Spec) -> list[str]:
    s = spec.server
    if s.shell:
        return []
    texts = [*s.command, *(a for cell in spec.cells for a in cell.args)]
    names = sorted({m.group(0): m.group(1) for t in texts for m in _DOLLAR.finditer(t)}.items())
    out = []
    for written, name in names:
        instead = "`{port}` for the port diagbench hands out" if name == "PORT" else "the value itself"
        out.append(
            f"server.command passes {written} to the server as written: no shell runs the command (shell: "
            f"false), so nothing fills in ${name}. Write {instead}, or set `shell: true` to have /bin/sh expand it"
        )
    return out


def _joined(argv: tuple[str, ...]) -> str:
    """argv as one line, quoted only where a word needs it (`{port}` left bare)."""
    return " ".join(t if re.fullmatch(r"[\w@%+=:,./{}-]+", t) else shlex.quote(t) for t in argv)
