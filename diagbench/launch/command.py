"""What a launch runs: its argv, its environment, and the URL its readiness probe asks."""

from __future__ import annotations

import os
import shlex
import sys
from pathlib import Path

from diagbench.launch.programs import fill_programs, server_path
from diagbench.launch.tags import Tag
from diagbench.spec.load import ServerSpec
from diagbench.spec.matrix import Cell

__all__ = ["build_command", "build_env", "probe_url"]


def build_command(server: ServerSpec, cell: Cell, port: int | str) -> tuple[str, ...]:
    path = server_path(server.env, cell.env)

    def fill(token: str) -> str:
        return fill_programs(token.replace("{port}", str(port)).replace("{python}", sys.executable), path)

    if server.shell:
        extra = " ".join(shlex.quote(fill(t)) for t in cell.args)
        return (fill(server.command[0]) + (" " + extra if extra else ""),)
    return tuple(fill(t) for t in (*server.command, *cell.args))


def build_env(
    server: ServerSpec, cell: Cell, port: int, tag: Tag, caches: Path | None = None
) -> tuple[dict[str, str], dict[str, str | None]]:
    """The full environment, and the changes made to the inherited one (for the record)."""
    changes: dict[str, str | None] = {"PYTHONUNBUFFERED": "1"}  # so Python servers' lines arrive as written
    if caches is not None:  # compile caches of this attempt alone: no cell reuses another's kernels
        changes.update({var: str(caches / var.lower()) for var in server.fresh_caches})
    changes.update({k: v.replace("{port}", str(port)) for k, v in server.env.items()})
    changes.update({k: (v.replace("{port}", str(port)) if v is not None else None) for k, v in cell.env.items()})
    env = dict(os.environ)
    for key, value in changes.items():
        if value is None:
            env.pop(key, None)
        else:
            env[key] = value
    env.update(tag.env())  # whose this tree is: teardown and a later cleanup find it by these
    return env, changes


def probe_url(ready_http: str, port: int) -> str:
    """A path is asked of 127.0.0.1:{port}; a full URL (say http://[::1]:{port}/health) as written."""
    if ready_http.startswith("/"):
        return f"http://127.0.0.1:{port}{ready_http}"
    return ready_http.replace("{port}", str(port))
