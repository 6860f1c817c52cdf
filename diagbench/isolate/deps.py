"""`--good-deps` / `--bad-deps`: an environment as pinned requirements, whichever way it is given.

DEPS is an interpreter (its installed distributions are asked for, never changed), a
requirements or lock file in pip's format (`pip freeze`, `uv pip compile`, `pip-compile`),
or the words `"pkg==ver pkg==ver ..."`. Each package is keyed by its normalised name
(PEP 503), so `Typing_Extensions` and `typing-extensions` are one package.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from diagbench.errors import UserError
from diagbench.launch.environment import ask_interpreter

_NAME = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)(\[[^\]]*\])?\s*(.*)$")
_PIN = re.compile(r"^==\s*([^\s;,]+)\s*$")
_SKIPPED_OPTIONS = ("--hash", "-i", "--index-url", "--extra-index-url", "-f", "--find-links", "--trusted-host")


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
    """An environment: its packages by normalised name, where they came from, and its interpreter (if one)."""

    source: str
    pins: Mapping[str, Pin]
    python: Path | None = None


def read_deps(option: str, given: str, cwd: Path) -> Deps:
    """DEPS as written after `option`."""
    text = given.strip()
    if not text:
        raise UserError(f"{option}: empty (give an interpreter, a requirements file, or 'pkg==ver pkg==ver')")
    path = Path(text).expanduser()
    path = path if path.is_absolute() else cwd / path
    if " " not in text and path.is_file():
        if os.access(path, os.X_OK) and not path.name.endswith((".txt", ".lock", ".in")):
            return _from_interpreter(option, path)
        return Deps(text, _from_lines(option, path.read_text(encoding="utf-8", errors="replace").splitlines(), path))
    if "==" not in text and ("/" in text or text.endswith(".txt")):
        raise UserError(f"{option} {text}: no such file (give an interpreter, a requirements file, or 'pkg==ver')")
    return Deps(text, _from_lines(option, text.split(), None))


def _from_interpreter(option: str, python: Path) -> Deps:
    facts = ask_interpreter(python)
    if "error" in facts:
        raise UserError(f"{option} {python}: could not be asked what it has installed ({facts['error']})")
    pins = {normalise(d["name"]): _pin_of(d) for d in facts.get("distributions") or []}
    return Deps(str(python), pins, python)


def _pin_of(dist: Mapping[str, Any]) -> Pin:
    name, version, origin = str(dist["name"]), str(dist["version"]), dist.get("origin") or {}
    kind = origin.get("kind")
    if kind == "vcs" and origin.get("commit"):
        commit = str(origin["commit"])
        return Pin(name, f"{name} @ {origin.get('vcs')}+{origin.get('url')}@{commit}", commit[:12])
    if kind == "local" and origin.get("editable"):
        return Pin(name, f"-e {origin.get('url')}", version)
    if kind in ("local", "url"):
        return Pin(name, f"{name} @ {origin.get('url')}", version)
    return Pin(name, f"{name}=={version}", version)


def _from_lines(option: str, lines: list[str], path: Path | None) -> dict[str, Pin]:
    pins: dict[str, Pin] = {}
    for number, raw in enumerate(lines, 1):
        line = raw.split(" #", 1)[0].strip().rstrip("\\").strip()
        if not line or line.startswith("#") or line.startswith(_SKIPPED_OPTIONS):
            continue
        where = f"{path}:{number}" if path is not None else f"{option} {raw!r}"
        match = _NAME.match(line)
        if match is None or line.startswith("-"):
            raise UserError(f"{where}: expected a requirement such as 'pkg==1.2.3', got {line!r}")
        name, rest = match.group(1), match.group(3).split("--hash", 1)[0].strip()
        pinned = _PIN.match(rest)
        pins[normalise(name)] = Pin(name, line.split("--hash", 1)[0].strip(), pinned.group(1) if pinned else rest)
    if not pins:
        raise UserError(f"{option}: no package in it (expected lines such as 'pkg==1.2.3')")
    return pins
