"""What every command's help follows: `-h`, readable metavars, and the exit codes in words."""

from __future__ import annotations

import textwrap
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import typer
from typer.core import TyperArgument, TyperGroup, TyperOption

from diagbench.vocab import ExitCode

__all__ = [
    "EXIT_CODES",
    "HELP_OPTIONS",
    "PLACEHOLDERS",
    "READING_ORDER",
    "SEARCH_EXITS",
    "ReadableGroup",
    "UsageError",
    "complete_only",
    "exit_codes",
    "plain_words",
    "typer_annotation",
    "usage_message",
]

HELP_OPTIONS = {"help_option_names": ["-h", "--help"]}

# `diagbench -h` lists commands in the order people meet them, not in import order
READING_ORDER = (
    "run",
    "plan",
    "report",
    "diff",
    "isolate",
    "probe",
    "triage",
    "classify",
    "signatures",
    "remedies",
    "cleanup",
    "schema",
)

# \b keeps the lines as written (help text is otherwise re-flowed into one paragraph)
EXIT_CODES = "\b\nExit codes:\n" + "\n".join(
    f"  {code.value:>3}  {words}"
    for code, words in (
        (ExitCode.OK, "the run completed and every expect held"),
        (
            ExitCode.EXPECT_VIOLATED,
            "an expect was violated or left unchecked (with --strict, also a hypothesis not supported)",
        ),
        (ExitCode.USAGE, "the spec, the command line or a run directory is unusable"),
        (ExitCode.HARNESS, "diagbench itself failed (a bug: please report it)"),
        (ExitCode.INTERRUPTED, "interrupted (Ctrl-C, SIGTERM); resume with --resume RUN"),
    )
)


# what every searching command (isolate, triage, limit, debug) means by its other exit codes
SEARCH_EXITS = {2: "bad usage", 3: "diagbench failed", 130: "interrupted"}


def exit_codes(meanings: Mapping[int, str], more: str = "") -> str:
    """A command's exit codes in words, as its help's epilog: `Exit codes: 0 ...; 1 ...`, wrapped
    at 100 columns and kept as written (`\b`), then `more` (a paragraph of its own)."""
    words = "Exit codes: " + "; ".join(f"{code} {what}" for code, what in meanings.items()) + "."
    return "\b\n" + "\n".join(textwrap.wrap(words, 100)) + (f"\n\b\n{more}" if more else "")


def typer_annotation(annotation: object, command: Callable[..., None]) -> object:
    """An annotation as the object typer reads (`from __future__ import annotations` made it
    text), for the decorators that rewrite a command's parameters. One that names a type
    imported only for mypy stays text: `where`, which with_executor_options replaces."""
    if not isinstance(annotation, str):
        return annotation
    try:
        return eval(annotation, command.__globals__)
    except NameError:
        return annotation


# one word for one kind of value, whatever the command: `--runs-dir DIR` everywhere, never RUNS_DIR
PLACEHOLDERS = {
    "runs_dir": "DIR",
    "run_id": "ID",
    "gpus": "LIST",
    "parallel": "N",
    "repeat": "N",
    "timeout": "D",
    "grace": "D",
    "stall": "D",
    "signatures": "PACK,...",
    "server": "NAME",
    "ready": "REGEX",
    "http": "PATH",
    "good": "CMD",
    "bad": "CMD",
    "good_env": "NAME=VALUE",
    "bad_env": "NAME=VALUE",
    "only": "AXIS=LABEL",
}


class ReadableGroup(TyperGroup):
    """The app's command group: every parameter without a metavar of its own gets a plain
    word in capitals (`--run-id RUN_ID`, `SPEC`) instead of a type (`<str>`, `{spec}`),
    and choices read `[table|md|json]`. Options added later follow the same rule."""

    def __init__(self, **attrs: Any) -> None:
        super().__init__(**attrs)
        for command in self.commands.values():
            plain_words(command)

    def invoke(self, ctx: Any) -> Any:
        """A command line click cannot parse (a missing argument, an unknown option, a bad
        choice) gets diagbench's one-line message, not click's generic three lines."""
        try:
            return super().invoke(ctx)
        except UsageError as exc:
            if isinstance(exc, _UsageMessage):
                raise
            raise _UsageMessage(usage_message(exc), getattr(exc, "ctx", None)) from None

    def list_commands(self, ctx: Any) -> list[str]:
        rank = {name: index for index, name in enumerate(READING_ORDER)}
        return sorted(self.commands, key=lambda name: (rank.get(name, len(rank)), name))


# click's UsageError, wherever this typer takes click from (its own copy since 0.2x)
UsageError: type[Exception] = typer.BadParameter.__mro__[1]


def _whole_option_names() -> None:
    """Help text wrapped at spaces only: click's wrapper also breaks after a hyphen inside a word,
    and `-h` showed `(--KIND-` / `arg=...)` and `[default: no-fresh-` / `caches]`, names
    no one can copy. click's `wrap_text` takes its TextWrapper from `_textwrap` when called."""
    import importlib

    textwrap = importlib.import_module(UsageError.__module__.rsplit(".", 1)[0] + "._textwrap")
    wrapper = textwrap.TextWrapper
    if getattr(wrapper, "whole_words", False):
        return

    class WholeWords(wrapper):  # type: ignore[misc, valid-type]  # click's own, found at run time
        whole_words = True

        def __init__(self, *args: object, **kwargs: object) -> None:
            super().__init__(*args, **{**kwargs, "break_on_hyphens": False})

    setattr(textwrap, "TextWrapper", WholeWords)  # noqa: B010  # a module found at run time


_whole_option_names()


class _UsageMessage(UsageError):  # type: ignore[misc, valid-type]
    """Shown as one line on stderr, `diagbench: ...`, exit 2 (as every usage mistake)."""

    def show(self, file: Any = None) -> None:
        from diagbench.records import sink
        from diagbench.render.text import visible

        typer.echo(sink.document(f"diagbench: {visible(self.message)}"), err=True)  # it may quote a value given


def usage_message(exc: Any) -> str:
    """`plan: missing SPEC (the experiment's YAML spec); usage: diagbench plan [OPTIONS] SPEC;
    more: diagbench plan -h`: what is wrong, where, and how it is written."""
    ctx = exc.ctx
    what = _missing(exc) if type(exc).__name__ == "MissingParameter" else exc.format_message()
    what = str(what[:1].lower() + what[1:]).rstrip(".")
    if ctx is None:
        return what
    names: list[str] = []
    while ctx.parent is not None:  # the command's own words, however diagbench was started (python -m)
        names.insert(0, ctx.info_name)
        ctx = ctx.parent
    ctx, path = exc.ctx, " ".join(["diagbench", *names])
    usage = " ".join(ctx.command.collect_usage_pieces(ctx))
    return f"{' '.join(names) + ': ' if names else ''}{what}; usage: {path} {usage}; more: {path} -h"


def _missing(exc: Any) -> str:
    param = exc.param
    if param is None:
        return str(exc.format_message())
    if isinstance(param, TyperOption):
        name = f"{param.opts[0]} {param.metavar}" if param.metavar else param.opts[0]
    else:
        name = param.human_readable_name
    helped = getattr(param, "help", None)
    return f"missing {name}" + (f" ({helped})" if helped else "")


class _PlainArgument(TyperArgument):
    """An argument shown as `SPEC` (or `[SPEC]` when optional), not `{spec}` and `spec <path>`."""

    def _usage_display_name(self) -> str:
        name = self.human_readable_name + ("..." if self.nargs != 1 else "")
        return name if self.required else f"[{name}]"

    def make_metavar(self, ctx: Any, *, usage: bool = False) -> str:
        """The same for typer below 0.29 (held there: 0.29 imports pydantic for every command)."""
        return self._usage_display_name() if usage else self.human_readable_name

    def display_type_rich(self, ctx: Any) -> str | None:
        return None


def plain_words(command: Any) -> None:
    """`command`'s parameters named as ReadableGroup says (a command built later gets this too)."""
    for param in command.params:
        _plain_metavar(param)
        if type(param) is TyperArgument:
            param.__class__ = _PlainArgument


def _plain_metavar(param: Any) -> None:
    if param.metavar is not None or getattr(param, "is_flag", False) or not param.name:
        return
    described = getattr(param, "type_descriptor", None)
    choices = described.choices if described is not None and described.is_choice else None
    if choices:
        param.metavar = "[" + "|".join(str(getattr(c, "value", c)) for c in choices) + "]"
    else:
        param.metavar = PLACEHOLDERS.get(param.name, param.name.upper())


def complete_only(ctx: Any, incomplete: str) -> list[str]:
    """`--only` completes to the AXIS=LABEL pairs of the spec given before it."""
    from diagbench.errors import DiagbenchError
    from diagbench.spec.load import load_spec

    # an option still waiting for its value stops the parse: the spec is then among the raw args
    spec = ctx.params.get("spec") or next((a for a in ctx.args if not a.startswith("-")), None)
    if not spec:
        return []
    try:
        loaded = load_spec(Path(spec))
    except (DiagbenchError, OSError):
        return []
    pairs = [f"{axis.name}={level.label}" for axis in loaded.axes for level in axis.levels]
    return [p for p in pairs if p.startswith(incomplete)]
