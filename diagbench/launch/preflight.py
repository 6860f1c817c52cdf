"""Before any launch: is the program there, and the working directory? Checked once for
every cell, so a setup mistake is said before the run instead of as a `launch_error` in
every cell (the launch itself checks again: the file system may change meanwhile)."""

from __future__ import annotations

import os
import shutil
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from diagbench.launch.command import build_command
from diagbench.launch.programs import missing_program, server_path
from diagbench.spec.load import ServerSpec
from diagbench.spec.matrix import Cell

__all__ = ["Problem", "executable_problem", "preflight"]


@dataclass(frozen=True)
class Problem:
    """Why some cells cannot start, and which."""

    message: str
    cells: tuple[str, ...]
    not_installed: bool = False  # a `{bin:NAME}` found nothing here: the spec is fine, this machine lacks it

    def describe(self, selected: int) -> str:
        if len(self.cells) == selected:
            return f"{self.message}; every cell would end launch_error"
        return f"{self.message}; cell(s) {'; '.join(self.cells)} would end launch_error"


def preflight(server: ServerSpec, cells: Sequence[Cell]) -> list[Problem]:
    """The problems that would stop these cells at launch, each with the cells it stops."""
    if not server.cwd.is_dir():
        return [Problem(f"working directory {server.cwd} does not exist (fix server.cwd)", _ids(cells))]
    stopped: dict[tuple[str, bool], list[str]] = {}
    for cell in cells:
        path = server_path(server.env, cell.env)
        missing = missing_program(" ".join((*server.command, *cell.args)), path)
        message = missing
        if message is None and not server.shell:  # /bin/sh looks the program up; its exit 127 says when it could not
            message = executable_problem(build_command(server, cell, 0)[0], path, server.cwd)
        if message is not None:
            stopped.setdefault((message, missing is not None), []).append(cell.id)
    return [Problem(message, tuple(ids), absent) for (message, absent), ids in stopped.items()]


def executable_problem(program: str, path: str | None, cwd: Path) -> str | None:
    """Why `program` could not be executed from `cwd` with this PATH, or None."""
    if "/" not in program:
        if shutil.which(program, path=path) is None:
            return f"executable '{program}' not found on PATH (install it or give its full path)"
        return None
    target = cwd / program  # a relative path is taken from the server's working directory
    if not target.exists():
        return f"executable '{program}' not found (install it or fix server.command)"
    if target.is_dir() or not os.access(target, os.X_OK):
        return f"'{program}' is not executable (chmod +x it or run it through its interpreter)"
    return None


def _ids(cells: Sequence[Cell]) -> tuple[str, ...]:
    return tuple(cell.id for cell in cells)
