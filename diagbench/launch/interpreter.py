"""The Python a command runs under, found as the kernel and `env` would find it.

argv[0] itself when it is a Python; a script's shebang (the kernel passes what follows the
interpreter's path as one word, and runs a script named there in turn, a few levels deep);
`env`, in argv or in a shebang, with its options applied as GNU env applies them (`-S`
splits its string, `-u NAME` unsets, `-i` empties the environment, `-C DIR` moves, and
`NAME=VALUE` sets, so `env -S PATH=/opt/bin:${PATH} python3` finds the python3 of /opt/bin,
the one that runs); a venv's console script without a readable shebang: its venv's python.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
from collections.abc import Mapping, Sequence
from pathlib import Path

from diagbench.safefiles import read_head

__all__ = ["EnvRun", "env_command", "find_interpreter"]

_PYTHON_NAME = re.compile(r"^(python|pypy)[0-9.]*$")
_DEPTH = 5  # the kernel follows a script's interpreter 4 levels deep (BINPRM_MAX_RECURSION)
_ASSIGN = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")
_EXPAND = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")
_ARG_OPTIONS = {
    **{"-u": "unset", "--unset": "unset", "-C": "chdir", "--chdir": "chdir"},
    **{"-S": "split", "--split-string": "split"},
}
_FLAGS = ("-0", "--null", "-v", "--debug", "--list-signal-handling")
_SIGNAL_OPTIONS = ("--default-signal", "--ignore-signal", "--block-signal")

EnvRun = tuple[list[str], dict[str, str], Path]  # the command's argv, its environment, its folder


def find_interpreter(argv: Sequence[str], env: Mapping[str, str], cwd: Path, depth: int = 0) -> Path | None:
    """The Python a command runs under: argv[0], its shebang's, its `env`'s or its venv's; None if not Python."""
    if not argv or depth > _DEPTH:
        return None
    program = _resolve(argv[0], env, cwd)
    if program is None:
        return None
    if program.name == "env":
        run = env_command(argv[1:], env, cwd)
        return find_interpreter(*run, depth + 1) if run is not None else None
    if _PYTHON_NAME.match(program.name):
        return program
    shebang = _shebang(program)
    if shebang is not None:
        return find_interpreter([*shebang, str(program), *argv[1:]], env, cwd, depth + 1)
    sibling = program.parent / "python"  # a venv's bin/ console script without a readable shebang
    if (program.parent.parent / "pyvenv.cfg").is_file() and sibling.exists():
        return sibling
    return None


def _resolve(word: str, env: Mapping[str, str], cwd: Path) -> Path | None:
    if "/" in word:
        path = Path(word) if Path(word).is_absolute() else cwd / word
        return path if path.is_file() else None
    found = shutil.which(word, path=env.get("PATH", os.defpath))
    return Path(found) if found else None


def _shebang(program: Path) -> list[str] | None:
    """A script's interpreter and, as Linux passes it, the rest of its line as one word."""
    try:
        first = read_head(program, 512).split(b"\n", 1)[0]
    except OSError:
        return None
    if not first.startswith(b"#!"):
        return None
    line = first[2:].decode("utf-8", "replace").strip()
    interpreter, _, rest = line.replace("\t", " ").partition(" ")
    rest = rest.strip()
    return [interpreter, rest] if rest else [interpreter] if interpreter else None


def env_command(args: Sequence[str], env: Mapping[str, str], cwd: Path) -> EnvRun | None:
    """What `env ARGS` runs under `env` in `cwd`: its argv, environment and folder; None when it
    runs no command (it would print the environment) or its options cannot be read."""
    words, environ, folder = list(args), dict(env), cwd
    while words and words[0].startswith("-") and words[0] != "-":
        word = words.pop(0)
        if word == "--":
            break
        actions = _option(word, words)
        if actions is None:
            return None
        for kind, value in actions:
            if kind == "ignore":
                environ = {}
            elif kind == "unset":
                environ.pop(value, None)
            elif kind == "chdir":
                folder = folder / value
            elif kind == "split":
                words = _split(value, env) + words
    if words and words[0] == "-":  # `env - cmd`: as -i
        words, environ = words[1:], {}
    while words and _ASSIGN.match(words[0]):
        name, _, value = words.pop(0).partition("=")
        environ[name] = value
    return (words, environ, folder) if words else None


def _option(word: str, rest: list[str]) -> list[tuple[str, str]] | None:
    """What one option word of env does (its argument taken from `rest` when it is the next
    word); None for an option env does not have."""
    name, eq, attached = word.partition("=")
    if word in _FLAGS or name in _SIGNAL_OPTIONS:
        return []
    if word == "--ignore-environment":
        return [("ignore", "")]
    if name.startswith("--"):
        if name not in _ARG_OPTIONS:
            return None
        value = attached if eq else (rest.pop(0) if rest else None)
        return None if value is None else [(_ARG_OPTIONS[name], value)]
    return _short(word[1:], rest)


def _short(letters: str, rest: list[str]) -> list[tuple[str, str]] | None:
    """Bundled short options (`-iS...`, `-vu NAME`): flags, then at most one taking an argument."""
    actions = []
    for i, letter in enumerate(letters):
        if letter == "i":
            actions.append(("ignore", ""))
        elif letter in "0v":
            continue
        elif f"-{letter}" in _ARG_OPTIONS:
            value = letters[i + 1 :] or (rest.pop(0) if rest else None)
            return None if value is None else [*actions, (_ARG_OPTIONS[f"-{letter}"], value)]
        else:
            return None
    return actions


def _split(text: str, env: Mapping[str, str]) -> list[str]:
    """`-S`'s string as env splits it: quotes and escapes like a shell's words, `${NAME}` expanded."""
    expanded = _EXPAND.sub(lambda m: env.get(m.group(1), ""), text)
    try:
        return shlex.split(expanded, comments=True)
    except ValueError:
        return expanded.split()
