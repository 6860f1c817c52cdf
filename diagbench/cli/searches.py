"""What the searching commands (isolate, triage, limit, debug) share at the face: the launch-rule
options taken as one `rules: ServerRules`, the sweep before the first launch, a search run under
signals with its live progress, and the ending (the view, the reason, the exit code)."""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Annotated, NoReturn, Protocol, TypeVar

import typer

from diagbench.cli.app import err, guarded, show
from diagbench.cli.conventions import typer_annotation
from diagbench.errors import UserError
from diagbench.jsonvalue import as_text
from diagbench.vocab import ExitCode

if TYPE_CHECKING:
    from diagbench.execute.cancel import Cancel
    from diagbench.isolate.problem import ServerRules
    from diagbench.records.store import RunDir
    from diagbench.render.formats import Rendering

__all__ = [
    "Closable",
    "Finished",
    "Found",
    "finish",
    "launch_rules",
    "search_under_signals",
    "sweep_first",
    "with_launch_rules",
]

P = TypeVar("P", bound="Closable")
R = TypeVar("R")

# the six options every searching command takes, in this order in its --help
_RULE_OPTIONS = (
    ("ready", Annotated[str | None, typer.Option(help="regex of the ready line (default: the packs')")], None),
    ("http", Annotated[str | None, typer.Option(help="ready when GET 127.0.0.1:{port}PATH answers 200")], None),
    ("signatures", Annotated[str | None, typer.Option(help="packs or files, comma-separated (default: all)")], None),
    ("timeout", Annotated[str | None, typer.Option(help="launch -> ready, e.g. 8m (default 10m)")], None),
    ("grace", Annotated[str | None, typer.Option(help="SIGTERM -> SIGKILL (default 10s)")], None),
    (
        "fresh_caches",
        Annotated[bool, typer.Option(help="each launch compiles from empty Inductor/Triton caches")],
        False,
    ),
)


class Closable(Protocol):
    def close(self) -> None: ...


class _Status(Protocol):
    @property
    def exit_code(self) -> int: ...


class Found(Protocol):
    """What a search found (isolation.json, triage.json, limit.json, debug.json): its status and reason."""

    @property
    def status(self) -> _Status: ...

    @property
    def reason(self) -> str: ...


class Finished(Protocol):
    """A search's result: where it recorded, and diagbench's own failures on the way."""

    @property
    def run_dir(self) -> RunDir: ...

    @property
    def harness_errors(self) -> Sequence[str]: ...


def with_launch_rules(command: Callable[..., None]) -> Callable[..., None]:
    """`command` with --ready, --http, --signatures, --timeout, --grace and --fresh-caches in place
    of its `rules` parameter, which it receives as one checked `ServerRules`."""
    signature = inspect.signature(command)
    at = list(signature.parameters).index("rules")
    kept = [p.replace(annotation=typer_annotation(p.annotation, command)) for p in signature.parameters.values()]
    kept = [p for p in kept if p.name != "rules"]
    options = [
        inspect.Parameter(name, inspect.Parameter.POSITIONAL_OR_KEYWORD, default=default, annotation=annotation)
        for name, annotation, default in _RULE_OPTIONS
    ]
    shown = [*kept[:at], *options, *kept[at:]]

    @functools.wraps(command)
    def wrapper(*args: object, **kwargs: object) -> None:
        ready, http, signatures, timeout, grace = (as_text(kwargs.pop(name)) for name, _, _ in _RULE_OPTIONS[:5])
        fresh = kwargs.pop("fresh_caches") is True
        rules = guarded(lambda: launch_rules(ready, http, signatures, timeout, grace, fresh))
        command(*args, **kwargs, rules=rules)

    wrapper.__signature__ = signature.replace(parameters=shown)  # type: ignore[attr-defined]
    wrapper.__annotations__ = {p.name: p.annotation for p in shown}
    return wrapper


def launch_rules(
    ready: str | None,
    http: str | None,
    signatures: str | None,
    timeout: str | None,
    grace: str | None,
    fresh_caches: bool = False,
) -> ServerRules:
    """The launch-rule options as one `ServerRules`; a duration that is not one is a usage error."""
    from diagbench.isolate.problem import ServerRules

    return ServerRules(
        ready=ready,
        http=http,
        signatures=tuple(n.strip() for n in (signatures or "").split(",") if n.strip()),
        timeout=_duration("--timeout", timeout),
        grace=_duration("--grace", grace),
        fresh_caches=fresh_caches,
    )


def _duration(name: str, value: str | None) -> float | None:
    from diagbench.yamlsrc import parse_duration

    if value is None:
        return None
    seconds = parse_duration(value)
    if seconds is None:
        raise UserError(f"{name} {value}: expected a duration like 90s, 8m or 1h")
    return seconds


def sweep_first(cancel: Cancel, who: str = "diagbench isolate") -> None:
    """Before launching: stop what a diagbench that died left running (never a live one's)."""
    from diagbench.execute.sweep import sweep_host
    from diagbench.render.cleanup import describe_sweep

    for line in describe_sweep(guarded(lambda: sweep_host(who, cancel.urgent))):
        err.print(f"diagbench: {line}", markup=False, highlight=False)


def search_under_signals(progress_of: Callable[[], P], search: Callable[[P, Cancel], R]) -> R:
    """Run a search with its live progress. A signal stops it in order: the running launches are
    torn down and recorded, its document is written with what was known, and the command exits 130
    (a second signal hurries it)."""
    from diagbench.execute.cancel import Cancel, stop_on_signals

    cancel = Cancel()
    with stop_on_signals(cancel):
        sweep_first(cancel)
        progress = progress_of()
        try:
            return guarded(lambda: search(progress, cancel))
        finally:
            progress.close()


def finish(view: Rendering, found: Found, result: Finished) -> NoReturn:
    """The view on standard output, the reason when the search found nothing, then the exit code
    (diagbench's own failures first)."""
    show(view)
    exit_code = found.status.exit_code
    if exit_code != ExitCode.OK and found.reason:
        err.print(f"diagbench: {found.reason} (the records are in {result.run_dir.path})", markup=False)
    if result.harness_errors:
        for line in result.harness_errors:
            err.print(f"diagbench failed in {line}", markup=False)
        raise typer.Exit(ExitCode.HARNESS)
    raise typer.Exit(exit_code)
