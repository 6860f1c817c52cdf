"""A command line as people paste it: the environment words in front, then the argv.

`A=1 B=2 cmd ...` sets variables the shell's way; `env A=1 -u B cmd ...` the env(1) way,
where `-u NAME` (or `--unset=NAME`) unsets one, so a side may run without a variable the
parent has. diagbench reads both, and prints the `env -u` form itself, so what it prints
pastes back. env's other options (`-i`, `-C DIR`, `-S`, ...) change more than variables
and are refused rather than half-understood.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Sequence

from diagbench.errors import UserError

__all__ = ["ENV_WORD", "Env", "split_command"]

ENV_WORD = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*)=(.*)$", re.DOTALL)
_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_UNSET = re.compile(r"^(?:-u|--unset=)(.+)$", re.DOTALL)
_ENV_PROGRAMS = ("env", "/usr/bin/env", "/bin/env")

Env = dict[str, "str | None"]  # None: unset (`env -u NAME`)


def split_command(text: str, env_terms: Sequence[str], side: str) -> tuple[tuple[str, ...], Env]:
    """One pasted command line: its argv, and the variables its leading `NAME=value` words,
    `env` words and --SIDE-env set (None: unset by `env -u NAME`)."""
    try:
        words = shlex.split(text)
    except ValueError as exc:
        raise UserError(f"--{side}: cannot split the command like a shell would: {exc} (close the quote)") from None
    env: Env = {}
    start, through_env = _environment(words, env, side)
    command = words[start:]
    if not command:
        raise UserError(f"--{side}: no command to run (write it after any NAME=value words)")
    if through_env and command[0].startswith("-"):
        raise UserError(
            f"--{side}: env would run {command[0]!r} as the command "
            "(write env's -u NAME before its NAME=value words: env -u A B=1 cmd ...)"
        )
    for term in env_terms:
        found = ENV_WORD.match(term)
        if not found:
            raise UserError(f"--{side}-env {term}: expected NAME=VALUE (e.g. --{side}-env TORCHINDUCTOR_CUDAGRAPHS=1)")
        env[found[1]] = found[2]
    return tuple(command), env


def _environment(words: Sequence[str], env: Env, side: str) -> tuple[int, bool]:
    """Read the leading `NAME=value` and `env ...` words into `env`: where the command starts,
    and whether an `env` word came before it."""
    i, through_env = 0, False
    while i < len(words):
        if found := ENV_WORD.match(words[i]):
            env[found[1]] = found[2]
            i += 1
        elif words[i] in _ENV_PROGRAMS:
            i, through_env = _env_options(words, i + 1, env, side), True
        else:
            break
    return i, through_env


def _env_options(words: Sequence[str], i: int, env: Env, side: str) -> int:
    """env(1)'s options after the word `env` (only -u NAME and --unset=NAME): where they end."""
    while i < len(words) and words[i].startswith("-"):
        word = words[i]
        if word == "--":  # the end of env's options; NAME=value words may follow
            return i + 1
        if word in ("-u", "--unset"):
            name = words[i + 1] if i + 1 < len(words) else ""
            i += 2
        elif found := _UNSET.match(word):
            name = found[1]
            i += 1
        else:
            raise UserError(
                f"--{side}: env {word}: not supported; isolate reads env's -u NAME, --unset=NAME and NAME=value "
                "(each launch inherits diagbench's environment: unset what must not be there with -u NAME)"
            )
        if not _NAME.match(name):
            shown = word if name in word else f"{word} {name}".strip()
            raise UserError(f"--{side}: env {shown}: expected a variable name to unset (env -u NAME cmd ...)")
        env[name] = None
    return i
