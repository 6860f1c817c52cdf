"""A remedy's change applied to one launch: the new argv and env, and the minimal diff.

A change applies only where it changes something: `--enforce-eager` is not added twice,
`--enable-torch-compile` is not removed from a launch without it, and halving an option
the launch does not set needs the server's default to halve.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from diagbench.isolate.factors import Config, shown_command
from diagbench.triage.remedies import Change, Scale

__all__ = ["Applied", "Env", "Launch", "apply_all", "apply_change"]

Env = Mapping[str, "str | None"]  # None: unset
_NUMBER = re.compile(r"^-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?$")


@dataclass(frozen=True)
class Launch:
    """One launch: its argv (with `{port}`) and the variables it sets (None: unsets)."""

    argv: tuple[str, ...]
    env: Mapping[str, str | None]

    def shown(self) -> str:
        """As one pasteable line, secrets blanked (`isolate.factors.shown_command`)."""
        return shown_command(Config(self.argv, self.env, {}))


@dataclass(frozen=True)
class Applied:
    launch: Launch
    diff: tuple[str, ...]  # `+ --disable-cuda-graph`, `- --enable-torch-compile`, `~ --max-model-len 512 -> 256`


def apply_change(launch: Launch, change: Change) -> Applied | None:
    """`launch` with `change` applied, or None when the change would change nothing."""
    argv, env, diff = list(launch.argv), dict(launch.env), []
    if change.add and change.add[0] not in argv and not _find(argv, (change.add[0],)):
        argv += change.add
        diff.append("+ " + " ".join(change.add))
    for name in change.remove:
        argv, removed = _remove(argv, name)
        diff += [f"- {' '.join(words)}" for words in removed]
    for name, value in change.set.items():
        argv, line = _set(argv, (name,), value)
        diff += line
    if change.scale is not None:
        argv, env, line = _scale(argv, env, change.scale)
        diff += line
    for name, value in change.env.items():
        if env.get(name) != value:
            env[name] = value
            diff.append(f"+ {name}={value}")
    for name in change.unset:
        if env.get(name) is not None:
            env[name] = None
            diff.append(f"- {name}")
    return Applied(Launch(tuple(argv), env), tuple(diff)) if diff else None


def apply_all(launch: Launch, changes: Sequence[Change]) -> Applied | None:
    """Several changes in turn (a combination); None when any of them changes nothing."""
    diff: list[str] = []
    for change in changes:
        applied = apply_change(launch, change)
        if applied is None:
            return None
        launch, diff = applied.launch, diff + list(applied.diff)
    return Applied(launch, tuple(diff))


def _find(argv: Sequence[str], names: Sequence[str]) -> int | None:
    """Where an option is given (`--x`, or `--x=v`), the last time."""
    found = None
    for i, word in enumerate(argv):
        if word in names or any(word.startswith(n + "=") for n in names if n.startswith("--")):
            found = i
    return found


def _value_at(argv: Sequence[str], i: int) -> tuple[str | None, int]:
    """The value of the option at `i` and how many words it spans (1 for a bare flag)."""
    word = argv[i]
    if "=" in word and word.startswith("--"):
        return word.split("=", 1)[1], 1
    # a following word that is no option is its value (`--torch-compile-max-bs 8`); a number
    # always is (`--x -1`)
    if i + 1 < len(argv) and (not argv[i + 1].startswith("-") or _NUMBER.match(argv[i + 1])):
        return argv[i + 1], 2
    return None, 1


def _remove(argv: list[str], name: str) -> tuple[list[str], list[list[str]]]:
    removed = []
    while (i := _find(argv, (name,))) is not None:
        _, span = _value_at(argv, i)
        removed.append(argv[i : i + span])
        argv = argv[:i] + argv[i + span :]
    return argv, removed[::-1]


def _set(argv: list[str], names: Sequence[str], value: str) -> tuple[list[str], list[str]]:
    i = _find(argv, names)
    if i is None:
        return [*argv, names[0], value], [f"+ {names[0]} {value}"]
    old, span = _value_at(argv, i)
    if old == value:
        return argv, []
    name = argv[i].split("=", 1)[0]
    return [*argv[:i], name, value, *argv[i + span :]], [f"~ {name} {old} -> {value}"]


def _scale(
    argv: list[str], env: dict[str, str | None], scale: Scale
) -> tuple[list[str], dict[str, str | None], list[str]]:
    name = scale.names[0]
    if scale.env:
        written = env.get(name)
        new = _scaled(written, scale)
        if new is None:
            return argv, env, []
        env[name] = new
        return argv, env, [f"~ {name}={written} -> {new}" if written is not None else f"+ {name}={new}"]
    i = _find(argv, scale.names)
    old = _value_at(argv, i)[0] if i is not None else None
    new = _scaled(old, scale)
    if new is None:
        return argv, env, []
    argv, line = _set(argv, scale.names, new)
    return argv, env, line


def _scaled(written: str | None, scale: Scale) -> str | None:
    """The scaled value, or None: not written and no default, not a number, or unchanged."""
    if written is None:
        return None if scale.default is None else scale.apply(scale.default)
    if not _NUMBER.match(written):
        return None
    return scale.apply(float(written))
