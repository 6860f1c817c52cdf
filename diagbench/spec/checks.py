"""Checks of the words inside a spec's values: `{placeholders}` and environment variable names.

A mistake here is recorded (not raised): the value is still usable, so the rest of its part
is checked too.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Sequence

from diagbench.yamlsrc import Src

__all__ = [
    "COMMAND_PLACEHOLDERS",
    "ENV_PLACEHOLDERS",
    "PROGRAM",
    "PROGRAM_NAME",
    "check_env_name",
    "check_placeholders",
]

COMMAND_PLACEHOLDERS = ("port", "python", "bin:NAME")  # filled in the command and in axis args
ENV_PLACEHOLDERS = ("port",)  # filled in env values and ready.http
_PLACEHOLDER = re.compile(r"(?<!\$)\{([A-Za-z_][A-Za-z0-9_]*)\}")  # ${VAR} is the shell's, not ours
PROGRAM = re.compile(r"\{bin:([^{}]*)\}")  # an installed program, found on the launching machine
PROGRAM_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._+-]*$")  # a file name: never a path
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def check_placeholders(src: Src, text: str, known: Sequence[str]) -> None:
    """Every `{name}` in `text` must be one that is filled here."""
    for found in _PLACEHOLDER.finditer(text):
        name = found.group(1)
        if name not in known:
            src.sink.add(src.error(f"unknown placeholder '{{{name}}}'", _placeholder_fix(name, known)))
    for found in PROGRAM.finditer(text):
        if "bin:NAME" not in known:
            fix = "a program is named only in server.command and in axis args"
            src.sink.add(src.error(f"'{found.group(0)}' cannot be filled here", fix))
        elif not PROGRAM_NAME.match(found.group(1)):
            fix = "name the program as PATH knows it, e.g. {bin:vllm}; give a path as the command itself"
            src.sink.add(src.error(f"'{found.group(0)}': expected a program name", fix))


def _placeholder_fix(name: str, known: Sequence[str]) -> str:
    close = difflib.get_close_matches(name, known, n=1, cutoff=0.6)
    if close:
        return f"did you mean '{{{close[0]}}}'?"
    return "placeholders here: " + ", ".join(f"{{{k}}}" for k in known)


def check_env_name(src: Src, name: str) -> None:
    """A name a process environment can carry and a shell can name."""
    if not _ENV_NAME.match(name):
        src.sink.add(
            src.error(
                f"invalid environment variable name '{name}'", "use letters, digits and _, not starting with a digit"
            )
        )
