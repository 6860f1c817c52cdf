"""`--good-deps` / `--bad-deps`: an environment as pinned requirements, whichever way it is given.

DEPS is an interpreter (its installed distributions are asked for, never changed), a
requirements or lock file in pip's format (`pip freeze`, `uv pip compile`, `pip-compile`),
or the words `"pkg==ver pkg==ver ..."`. Each package is keyed by its normalised name
(PEP 503), so `Typing_Extensions` and `typing-extensions` are one package.

A lock file's `--index-url`/`-i` and `--extra-index-url` are honoured: the environments are
built from those indexes (and keyed by them), since the versions it pins may exist nowhere
else. Its other options (`--find-links`, `--trusted-host`, `--no-index`, `-r`, `-c`) are
refused with a message: dropping them would build from somewhere the file did not say. What
becomes a requirement line for uv holds no line break and no option of its own: a
distribution's `direct_url.json` (written by whoever built it) could otherwise add an
`--index-url` to the file uv reads.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from diagbench.errors import UserError
from diagbench.launch.environment import ask_all
from diagbench.records.redact import Redactor
from diagbench.safefiles import read_input

__all__ = ["Deps", "Pin", "normalise", "read_deps"]

MAX_DEPS_BYTES = 16 << 20  # a lock file of thousands of hashed pins is a few MB
_NAME = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)(\[[^\]]*\])?\s*(.*)$")
_PLAIN_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")
_PIN = re.compile(r"^==\s*([^\s;,]+)\s*$")
_SPECIFIER = re.compile(r"^(===|==|!=|~=|<=|>=|<|>|;|@\s)")  # what may follow a name (PEP 508)
_URL = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://[^\s\x00-\x1f\x7f\\\"'<>`]+$")  # one URL: no space, no control
_INDEX_OPTIONS = {"-i": "default", "--index-url": "default", "--extra-index-url": "extra"}
_REFUSED_OPTIONS = ("-f", "--find-links", "--trusted-host", "--no-index", "-r", "--requirement", "-c", "--constraint")


def normalise(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


@dataclass(frozen=True)
class Pin:
    """One package of an environment: the requirement line that installs it, and its version."""

    name: str  # as written
    line: str  # `name==1.2.3`, `name @ git+https://...@sha`, or the line as written
    version: str  # `1.2.3`, a commit, or the specifier as written


@dataclass(frozen=True)
class Deps:
    """An environment: its packages by normalised name, where they came from, its interpreter
    (if one), and the indexes a lock file named: (`default` or `extra`, URL)."""

    source: str
    pins: Mapping[str, Pin]
    python: Path | None = None
    indexes: tuple[tuple[str, str], ...] = ()


def read_deps(option: str, given: str, cwd: Path) -> Deps:
    """DEPS as written after `option`."""
    text = given.strip()
    if not text:
        raise UserError(f"{option}: empty (give an interpreter, a requirements file, or 'pkg==ver pkg==ver')")
    if "://" in text:
        raise UserError(
            f"{option} {Redactor.of().log(text)}: a URL is not read (download the requirements file and give its "
            "path, or write 'pkg==ver pkg==ver')"
        )
    path = Path(text).expanduser()
    path = path if path.is_absolute() else cwd / path
    if " " not in text and os.path.lexists(path):
        if path.is_file() and os.access(path, os.X_OK) and not path.name.endswith((".txt", ".lock", ".in")):
            return _from_interpreter(option, path)
        lines, indexes = _from_file(option, path)
        return Deps(text, lines, None, indexes)
    if "==" not in text and ("/" in text or text.endswith(".txt")):
        raise UserError(f"{option} {text}: no such file (give an interpreter, a requirements file, or 'pkg==ver')")
    return Deps(text, _from_words(option, text.split()))


def _from_file(option: str, path: Path) -> tuple[dict[str, Pin], tuple[tuple[str, str], ...]]:
    try:
        text = read_input(path, MAX_DEPS_BYTES).decode("utf-8", errors="replace")  # a FIFO, /dev/zero: refused
    except OSError as exc:
        raise UserError(
            f"{option} {path}: {exc.strerror} (give a requirements file, an interpreter, or 'pkg==ver')"
        ) from None
    lines = text.splitlines()
    return _from_lines(option, lines, path), _indexes(lines, path)


def _from_interpreter(option: str, python: Path) -> Deps:
    facts = ask_all([python])[python]  # asked once per process: the isolation's manifest asks it too
    if "error" in facts:
        raise UserError(f"{option} {python}: could not be asked what it has installed ({facts['error']})")
    dists = [d for d in facts.get("distributions") or [] if isinstance(d, dict) and "name" in d and "version" in d]
    pins = {normalise(str(d["name"])): _pin_of(d, python) for d in dists}
    return Deps(str(python), pins, python)


def _pin_of(dist: Mapping[str, Any], python: Path) -> Pin:
    """The requirement line that installs what the interpreter has. Its name, version and
    origin were written by whoever built the distribution: a part that could make the line
    say more than one requirement (a line break, a space or an option in a URL) is refused."""
    name, version, origin = str(dist["name"]), str(dist["version"]), dist.get("origin") or {}
    if not _PLAIN_NAME.fullmatch(name) or not re.fullmatch(r"[A-Za-z0-9.+!_-]+", version):
        raise UserError(f"{python}: the installed distribution {name!r} {version!r} has no plain name and version")
    kind = origin.get("kind")
    if kind in ("vcs", "local", "url"):
        url = _plain_url(str(origin.get("url")), name, python)
        if kind == "vcs" and origin.get("commit"):
            commit = _plain_url(f"{origin.get('vcs')}+{url}@{origin['commit']}", name, python)
            return Pin(name, f"{name} @ {commit}", str(origin["commit"])[:12])
        if kind == "local" and origin.get("editable"):
            return Pin(name, f"-e {url}", version)
        return Pin(name, f"{name} @ {url}", version)
    return Pin(name, f"{name}=={version}", version)


def _plain_url(url: str, name: str, python: Path) -> str:
    if not _URL.fullmatch(url):
        shown = Redactor.of().log(url)[:200].encode("unicode_escape").decode()
        raise UserError(
            f"{python}: {name} was installed from {shown!r}, which is no plain URL (a line break, a space or an "
            "option in it): reinstall it, or give --good-deps/--bad-deps as a requirements file"
        )
    return url


def _from_words(option: str, words: Sequence[str]) -> dict[str, Pin]:
    """`pkg==ver pkg==ver`: each word one requirement, a name and its specifier."""
    for word in words:
        match = _NAME.match(word)
        if match is None or word.startswith("-") or (match.group(3) and not _SPECIFIER.match(match.group(3))):
            raise UserError(f"{option} {word!r}: expected a requirement such as 'pkg==1.2.3'")
    return _from_lines(option, list(words), None)


def _indexes(lines: Sequence[str], path: Path) -> tuple[tuple[str, str], ...]:
    """The indexes a lock file names (`--index-url`, `-i`, `--extra-index-url`), in order."""
    found: list[tuple[str, str]] = []
    for number, raw in enumerate(lines, 1):
        words = raw.split(" #", 1)[0].strip().replace("=", " ", 1).split() if raw.strip().startswith("-") else []
        if words and words[0] in _INDEX_OPTIONS:
            if len(words) != 2 or not _URL.fullmatch(words[1]):
                raise UserError(f"{path}:{number}: {words[0]} needs one URL (e.g. {words[0]} https://pypi.org/simple)")
            found.append((_INDEX_OPTIONS[words[0]], words[1]))
    return tuple(found)


def _from_lines(option: str, lines: list[str], path: Path | None) -> dict[str, Pin]:
    pins: dict[str, Pin] = {}
    for number, raw in enumerate(lines, 1):
        line = raw.split(" #", 1)[0].strip().rstrip("\\").strip()
        where = f"{path}:{number}" if path is not None else f"{option} {raw!r}"
        first = line.split("=", 1)[0].split()[0] if line.startswith("-") else ""
        if first in _REFUSED_OPTIONS:
            raise UserError(
                f"{where}: {first} is not supported here (diagbench builds only from the indexes named "
                "by --index-url/--extra-index-url or UV_INDEX_URL): remove it, or pin from an index"
            )
        if not line or line.startswith("#") or first in (*_INDEX_OPTIONS, "--hash"):
            continue
        match = _NAME.match(line)
        if match is None or line.startswith("-"):
            raise UserError(f"{where}: expected a requirement such as 'pkg==1.2.3', got {line!r}")
        name, rest = match.group(1), match.group(3).split("--hash", 1)[0].strip()
        pinned = _PIN.match(rest)
        pins[normalise(name)] = Pin(name, line.split("--hash", 1)[0].strip(), pinned.group(1) if pinned else rest)
    if not pins:
        raise UserError(f"{option}: no package in it (expected lines such as 'pkg==1.2.3')")
    return pins
