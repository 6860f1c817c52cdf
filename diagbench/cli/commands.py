"""Which module defines each command, and the app's commands built only when asked for.

typer builds every registered command (each signature evaluated) before it parses a word, so
importing every command module up front made each command start as slowly as the heaviest:
`classify` loaded the scheduler, the executor plugins and YAML for `run`'s options. Here the
app knows each command by name alone; its module is imported and its click command built
when it is run, completed or listed (`diagbench -h` builds them all, as before)."""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterator, Mapping, MutableMapping
from typing import Any

import typer
from typer.main import get_command_from_info, get_command_name

__all__ = ["COMMAND_MODULES", "LazyCommands", "registered_command"]

# the command -> its module, diagbench/cli/MODULE.py (tests/cli/test_cli_conventions.py checks it)
COMMAND_MODULES = {
    "init": "init",
    "run": "run",
    "plan": "inspect",
    "report": "inspect",
    "diff": "inspect",
    "isolate": "isolate",
    "probe": "probe",
    "triage": "triage",
    "limit": "limit",
    "debug": "debug",
    "classify": "inspect",
    "logs": "logs",
    "signatures": "inspect",
    "remedies": "triage",
    "cleanup": "cleanup",
    "schema": "schema",
    "worker": "worker",
}


class LazyCommands(MutableMapping[str, Any]):
    """A group's `commands`: every name of COMMAND_MODULES (and any command given or added),
    each one built by `build(name)` the first time it is looked up."""

    def __init__(self, given: Mapping[str, Any], build: Callable[[str], Any]) -> None:
        self._build = build
        self._built = dict(given)

    def __getitem__(self, name: str) -> Any:
        if name not in self._built:
            if name not in COMMAND_MODULES:
                raise KeyError(name)
            self._built[name] = self._build(name)
        return self._built[name]

    def __contains__(self, name: object) -> bool:
        return name in self._built or name in COMMAND_MODULES  # without building it

    def __setitem__(self, name: str, command: Any) -> None:
        self._built[name] = command

    def __delitem__(self, name: str) -> None:
        del self._built[name]

    def __iter__(self) -> Iterator[str]:  # one order, whatever was built already
        yield from COMMAND_MODULES
        yield from (name for name in self._built if name not in COMMAND_MODULES)

    def __len__(self) -> int:
        return len(self._built.keys() | COMMAND_MODULES.keys())


def registered_command(app: typer.Typer, name: str) -> Any:
    """`name`'s click command, built as typer builds it from what its module registered on
    `app` (the module imported here)."""
    importlib.import_module(f"diagbench.cli.{COMMAND_MODULES[name]}")
    for info in app.registered_commands:
        if (info.name or get_command_name(info.callback.__name__ if info.callback else "")) == name:
            return get_command_from_info(
                info, pretty_exceptions_short=app.pretty_exceptions_short, rich_markup_mode=app.rich_markup_mode
            )
    raise KeyError(name)
