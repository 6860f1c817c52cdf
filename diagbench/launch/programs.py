"""`{bin:NAME}` in a command: a server program as installed on the machine that launches it.

A shipped spec cannot know where vLLM (or any server) lives on each machine, so it names the
program and this module finds it when the command is built, on the machine that launches:
the variable `DIAGBENCH_BIN_<NAME>` (a path; NAME upper-cased, every other character `_`)
when it is set, else NAME on the PATH the server will see. Not found, the word stays NAME,
and the checks before a launch say so in one line (`diagbench plan` only notes it).
"""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import Mapping

from diagbench.spec.checks import PROGRAM

__all__ = ["fill_programs", "find_program", "missing_program", "server_path", "variable"]


def variable(name: str) -> str:
    """The variable that points `{bin:NAME}` at a path: `DIAGBENCH_BIN_VLLM` for vllm."""
    return "DIAGBENCH_BIN_" + re.sub(r"[^A-Za-z0-9]", "_", name).upper()


def find_program(name: str, path: str | None) -> str | None:
    """Where `{bin:name}` points here: `$DIAGBENCH_BIN_<NAME>`, else `name` on `path`, else None."""
    given = os.environ.get(variable(name))
    if given:
        return given
    return shutil.which(name, path=path)


def fill_programs(token: str, path: str | None) -> str:
    """`token` with each `{bin:NAME}` replaced by the program found, or by NAME when there is none."""
    return PROGRAM.sub(lambda m: find_program(m.group(1), path) or m.group(1), token)


def missing_program(token: str, path: str | None) -> str | None:
    """Why a `{bin:NAME}` in `token` names no program here (one line with the fix), or None."""
    for found in PROGRAM.finditer(token):
        name, var = found.group(1), variable(found.group(1))
        given = os.environ.get(var)
        if given and not (os.path.isfile(given) and os.access(given, os.X_OK)):
            return f"{var}={given} is not an executable file ({{bin:{name}}} in server.command): fix or unset it"
        if find_program(name, path) is None:
            return (
                f"{name} is not installed here: {{bin:{name}}} in server.command is ${var}, or else {name}"
                f" on PATH; install {name}, or set {var} to its path"
            )
    return None


def server_path(server_env: Mapping[str, str], cell_env: Mapping[str, str | None]) -> str | None:
    """The PATH the server will see (an axis or server.env may set it)."""
    if "PATH" in cell_env:
        return cell_env["PATH"]
    return server_env.get("PATH", os.environ.get("PATH"))
