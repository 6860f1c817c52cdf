"""`--executor KIND` and every executor plugin's own options (`--KIND-...`), made
from the registry (execute/executors.py): a command decorated here takes them as one
`where: ExecutorSpec`, the settings the command line asked for."""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from enum import Enum
from typing import Annotated

import typer

from diagbench.cli.app import guarded
from diagbench.cli.conventions import typer_annotation
from diagbench.execute.executors import all_options, kinds

__all__ = ["Executor", "with_executor_options"]

Executor = Enum("Executor", {kind: kind for kind in kinds()}, type=str)  # type: ignore[misc]  # the registry's kinds


def _name(flag: str) -> str:
    return flag.lstrip("-").replace("-", "_")


def _parameters() -> list[inspect.Parameter]:
    kind = inspect.Parameter(
        "executor",
        inspect.Parameter.POSITIONAL_OR_KEYWORD,
        default=None,
        annotation=Annotated[
            Executor | None,
            typer.Option(metavar="|".join(kinds()), help="where attempts run (default: the spec's; local)"),
        ],
    )
    own = [
        inspect.Parameter(
            _name(o.flag),
            inspect.Parameter.POSITIONAL_OR_KEYWORD,
            default=None,
            annotation=Annotated[
                list[str] | None if o.many else str | None,
                typer.Option(o.flag, metavar=o.metavar, help=o.help),
            ],
        )
        for _, o in all_options()
    ]
    return [kind, *own]


def with_executor_options(command: Callable[..., None]) -> Callable[..., None]:
    """`command` with `--executor` and each plugin's options in place of its `where` parameter."""
    signature = inspect.signature(command)
    names = list(signature.parameters)
    at = names.index("where")  # the options take its place, in --help too
    kept = [
        p.replace(annotation=typer_annotation(p.annotation, command))
        for p in signature.parameters.values()
        if p.name != "where"
    ]
    shown = [*kept[:at], *_parameters(), *kept[at:]]

    @functools.wraps(command)
    def wrapper(*args: object, **kwargs: object) -> None:
        from diagbench.spec.executor import command_line_settings

        kind = kwargs.pop("executor", None)
        values = {o.key: (o.flag, kwargs.pop(_name(o.flag), None)) for _, o in all_options()}
        where = guarded(lambda: command_line_settings(kind.value if isinstance(kind, Executor) else None, values))
        command(*args, **kwargs, where=where)

    wrapper.__signature__ = signature.replace(parameters=shown)  # type: ignore[attr-defined]
    wrapper.__annotations__ = {p.name: p.annotation for p in shown}
    return wrapper
