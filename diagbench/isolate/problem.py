"""What an isolation launches: the server rules (ready, packs, timeout), the factors, and a
spec for the manifest; from two command lines or from a spec's axes."""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from pathlib import Path

from diagbench.errors import SpecError, UserError
from diagbench.isolate.axes import axis_space
from diagbench.isolate.factors import CommandSpace, Config, Space, derive, shown_command
from diagbench.jsonvalue import JSON, JSONObject
from diagbench.logs.signatures import Kind, Signature, builtin_packs, load_packs
from diagbench.spec.load import COMPILE_CACHE_VARS, DEFAULT_GRACE_S, DEFAULT_TIMEOUT_S, ServerSpec, Spec

__all__ = ["Problem", "ServerRules", "command_problem", "from_commands", "from_spec", "server_spec"]


@dataclass(frozen=True)
class Problem:
    """One isolation to run: the spec it is recorded under, its server rules and its factors."""

    spec: Spec
    space: Space
    run_name: str = "isolate"  # the run id's tail

    @property
    def server(self) -> ServerSpec:
        return self.spec.server

    def shown(self, applied: Collection[str]) -> str:
        """One configuration as one pasteable line: the server's command and env, then the factors'."""
        config = self.space.configuration(applied)
        env = {**self.server.env, **config.env}
        return shown_command(Config((*self.server.command, *config.args), env, config.params))

    def usable_parallel(self, parallel: int | None) -> int | None:
        """Launches at once need a port each: `{port}` in both commands (a spec's `port: auto` is
        checked with its slots). Without it, asking for more than one is a mistake, and the
        default (one per GPU slot) falls back to one at a time."""
        command = _command_space(self.space)
        if command is None or _has_port(command):
            return parallel
        if parallel is not None and parallel > 1:
            raise UserError(
                f"--parallel {parallel}: put {{port}} where each command takes its port, so launches do not share one"
            )
        return 1


@dataclass(frozen=True)
class ServerRules:
    """`--ready`, `--http`, `--signatures`, `--timeout`, `--grace`, `--fresh-caches` of the command-line form."""

    ready: str | None = None
    http: str | None = None
    signatures: tuple[str, ...] = ()  # default: every built-in pack
    timeout: float | None = None
    grace: float | None = None
    fresh_caches: bool = False


def from_commands(
    good: str, bad: str, good_env: Sequence[str], bad_env: Sequence[str], rules: ServerRules, cwd: Path
) -> Problem:
    """Two pasted command lines (with `{port}`) and their environments."""
    return command_problem(derive(good, bad, good_env, bad_env), rules, cwd, {})


def command_problem(space: Space, rules: ServerRules, cwd: Path, extra: JSONObject) -> Problem:
    """An isolation between two command lines (and, for packages, two environments: `extra` says which)."""
    _need_factors(space)
    server = _server(rules, cwd)
    if server.ready_http is not None and server.ready_http.startswith("/") and not _has_port(_command_space(space)):
        raise UserError("--http asks 127.0.0.1:{port}: put {port} where each command takes its port")
    request: dict[str, JSON] = {
        "good": shown_command(space.configuration(())),
        "bad": shown_command(space.configuration([f.name for f in space.factors])),
        "ready": rules.ready,
        "http": rules.http,
        "signatures": list(server.packs),
        "timeout_s": server.timeout,
        "grace_s": server.grace,
        "fresh_caches": rules.fresh_caches,
        **extra,
    }
    return Problem(Spec.of_request("isolate", "diagbench isolate --good ... --bad ...", cwd, request, server), space)


def from_spec(spec: Spec, good: str, bad: str, timeout: float | None, grace: float | None) -> Problem:
    """Two cells of a spec, named by their labels; the spec gives the server and its rules."""
    space = axis_space(spec.axes, good, bad)
    _need_factors(space)
    server = dataclasses.replace(
        spec.server,
        timeout=spec.server.timeout if timeout is None else timeout,
        grace=spec.server.grace if grace is None else grace,
    )
    # an isolation judges no hypotheses and checks no expectations: its probes are not the matrix's cells
    plain = dataclasses.replace(spec, server=server, hypotheses=(), expectations=())
    return Problem(plain, space, f"{spec.name}-isolate")


def _need_factors(space: Space) -> None:
    if not space.factors:
        raise UserError("the good and the bad launch are the same: nothing to isolate (check --good and --bad)")


def _command_space(space: Space) -> CommandSpace | None:
    """The command lines of a space: its own, or those beside a package isolation's environments."""
    if isinstance(space, CommandSpace):
        return space
    command = getattr(space, "command", None)
    return command if isinstance(command, CommandSpace) else None


def _has_port(space: CommandSpace | None) -> bool:
    if space is None:
        return True
    lines = (space.good, space.bad)
    return all(any("{port}" in w for w in (*line.words, *line.env.values()) if w) for line in lines)


def server_spec(rules: ServerRules, cwd: Path) -> ServerSpec:
    """The server rules of a pasted command line (each launch's whole argv is its cell's)."""
    return _server(rules, cwd)


def _server(rules: ServerRules, cwd: Path) -> ServerSpec:
    packs = rules.signatures or tuple(builtin_packs())
    try:
        signatures = load_packs(list(packs), cwd)
    except SpecError as exc:
        if exc.line is not None:  # a pack file's own mistake names its file and line
            raise
        raise UserError(f"--signatures: {exc.message}" + (f" ({exc.fix})" if exc.fix else "")) from None
    if rules.ready is not None:
        try:
            re.compile(rules.ready)
        except re.error as exc:
            raise UserError(f"--ready {rules.ready!r}: invalid regular expression: {exc}") from None
        signatures = [s for s in signatures if s.kind is not Kind.READY]  # the user's ready line replaces the packs'
        signatures.append(Signature("spec.ready", Kind.READY, rules.ready, pack="spec"))
    if rules.http is not None and not rules.http.startswith(("/", "http://", "https://")):
        raise UserError(
            f"--http {rules.http}: expected a path starting with / (or a full http:// URL); write /{rules.http}"
        )
    if rules.ready is None and rules.http is None and not any(s.kind is Kind.READY for s in signatures):
        raise UserError(
            "no ready condition: none of the chosen signature packs has a ready line "
            "(pass --ready REGEX or --http PATH)"
        )
    return ServerSpec(
        command=(),  # each probe's whole argv is its cell's
        shell=False,
        env={},
        cwd=cwd,
        port=None,  # a free port per launch, as {port}
        ready_log=rules.ready,
        ready_http=rules.http,
        packs=tuple(packs),
        signatures=tuple(signatures),
        timeout=DEFAULT_TIMEOUT_S if rules.timeout is None else rules.timeout,
        grace=DEFAULT_GRACE_S if rules.grace is None else rules.grace,
        fresh_caches=COMPILE_CACHE_VARS if rules.fresh_caches else (),
    )
