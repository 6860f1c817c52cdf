"""What a limit search launches: the command, the option or variable it varies, the range,
and which end it looks for; each value's launch is the command with that value set."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from diagbench.errors import UserError
from diagbench.isolate.factors import Config, shown_command
from diagbench.isolate.problem import ServerRules
from diagbench.jsonvalue import JSON
from diagbench.limit.launches import command_spec, read_command
from diagbench.spec.load import Spec
from diagbench.spec.ready import ReadyRequest
from diagbench.triage.apply import Launch
from diagbench.triage.remedies import load_catalogue

__all__ = ["INT64", "Knob", "LimitProblem", "LimitRequest", "from_command", "parse_knob", "parse_range"]

INT64 = 2**63 - 1  # values are written for a server's parser: a signed 64-bit integer is the widest most take
_RANGE = re.compile(r"^\s*([-+]?[0-9]+)\s*\.\.\s*([-+]?[0-9]+)\s*$")
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_EXAMPLE = {False: "--vary --cuda-graph-max-bs=1..64", True: "--vary-env VLLM_CPU_KVCACHE_SPACE=1..8"}


@dataclass(frozen=True)
class Knob:
    """What is varied: an option of the command (`--max-bs`) or a variable (`env: True`)."""

    name: str
    env: bool

    @property
    def flag(self) -> str:
        return "--vary-env" if self.env else "--vary"


@dataclass(frozen=True)
class LimitProblem:
    spec: Spec
    launch: Launch  # the command as given (the option's own value, if any, is replaced)
    knob: Knob
    lo: int
    hi: int
    smallest: bool  # look for the smallest value that comes up (else the largest)
    server: str | None
    price: int = 0  # requests to each launch that comes up (0: start-up time only)
    request: ReadyRequest | None = None  # what --price sends

    def launch_at(self, value: int | str) -> Launch:
        """The command with the knob set to `value` (the option replaced where the command gives it)."""
        if self.knob.env:
            return Launch(self.launch.argv, {**self.launch.env, self.knob.name: str(value)})
        return Launch(_set_option(self.launch.argv, self.knob.name, str(value)), self.launch.env)

    def shown(self, value: int | None = None) -> str:
        """The command as one pasteable line: at `value`, else with `{value}` where it goes."""
        return self.launch_at("{value}" if value is None else value).shown()


@dataclass(frozen=True)
class LimitRequest:
    """The command line's words for a limit search."""

    command: str
    vary: Sequence[str] = ()  # `--vary OPT=LO..HI`
    vary_env: Sequence[str] = ()  # `--vary-env NAME=LO..HI`
    smallest: bool = False
    server: str | None = None
    price: int = 0
    remedies: Sequence[Path] = ()  # remedy files: their `price_request` is what --price sends


def from_command(given: LimitRequest, rules: ServerRules, cwd: Path) -> LimitProblem:
    """The command line, `--vary OPT=LO..HI` or `--vary-env NAME=LO..HI`, and the server's rules."""
    knob, lo, hi = parse_knob(given.vary, given.vary_env)
    pasted = read_command(given.command, given.server)
    if not knob.env:
        _need_once(pasted.launch.argv, knob.name)
    price, smallest = given.price, given.smallest
    request = load_catalogue(given.remedies).requests.get(pasted.server or "")
    shown = shown_command(Config(pasted.launch.argv, pasted.launch.env, {}))
    entry: dict[str, JSON] = {
        "command": shown,
        "server": pasted.server,
        knob.flag: f"{knob.name}={lo}..{hi}",
        "smallest": smallest,
    }
    entry |= {"ready": rules.ready, "http": rules.http, "price": price}
    spec = command_spec("limit", cwd, entry, rules, pasted.server)
    return LimitProblem(spec, pasted.launch, knob, lo, hi, smallest, pasted.server, price, request)


def parse_knob(vary: Sequence[str], vary_env: Sequence[str]) -> tuple[Knob, int, int]:
    """Exactly one `--vary OPT=LO..HI` or `--vary-env NAME=LO..HI`."""
    given = [(False, v) for v in vary] + [(True, v) for v in vary_env]
    if not given:
        raise UserError(f"nothing to vary: give --vary OPT=LO..HI or --vary-env NAME=LO..HI (e.g. {_EXAMPLE[False]})")
    if len(given) > 1:
        shown = ", ".join(f"{'--vary-env' if env else '--vary'} {v}" for env, v in given)
        raise UserError(f"one knob at a time: {shown} (a limit varies one option or one variable; run one limit each)")
    env, text = given[0]
    flag = "--vary-env" if env else "--vary"
    name, sep, span = text.rpartition("=") if ".." in text else text.partition("=")
    if not sep or not name:
        raise UserError(f"{flag} {text}: expected NAME=LO..HI, e.g. {_EXAMPLE[env]}")
    if env and not _ENV_NAME.match(name):
        raise UserError(f"{flag} {text}: '{name}' is not a variable name (letters, digits and _), e.g. {_EXAMPLE[env]}")
    if env and name.startswith("DIAGBENCH_"):
        raise UserError(f"{flag} {text}: DIAGBENCH_* variables are diagbench's own (it tags every launch with them)")
    if not env and (not name.startswith("-") or name.strip("-") == "" or any(c.isspace() or c == "=" for c in name)):
        raise UserError(
            f"{flag} {text}: '{name}' is not an option (write it as the command takes it, e.g. {_EXAMPLE[env]})"
        )
    lo, hi = parse_range(f"{flag} {text}", span)
    return Knob(name, env), lo, hi


def parse_range(where: str, text: str) -> tuple[int, int]:
    """`LO..HI`: two integers, LO at most HI, each a signed 64-bit integer."""
    found = _RANGE.match(text)
    if not found:
        raise UserError(f"{where}: expected a range of whole numbers LO..HI, e.g. 1..64 (got '{text}')")
    for word in (found[1], found[2]):  # int() refuses 4,300 digits and more: say it here
        if len(word.lstrip("+-").lstrip("0")) > len(str(INT64)):
            raise UserError(
                f"{where}: {word[:24]}... is beyond a 64-bit integer (at most {INT64}): a server could not read it"
            )
    lo, hi = int(found[1]), int(found[2])
    for bound in (lo, hi):
        if abs(bound) > INT64:
            raise UserError(
                f"{where}: {bound} is beyond a 64-bit integer (at most {INT64}): a server could not read it"
            )
    if lo > hi:
        raise UserError(
            f"{where}: LO {lo} is above HI {hi}: write the smaller first ({hi}..{lo}); "
            "--smallest looks for the smallest"
        )
    return lo, hi


def _need_once(argv: Sequence[str], name: str) -> None:
    """The option may be in the command once (its value is replaced) or not at all (it is added)."""
    at = [i for i, word in enumerate(argv) if word == name or word.startswith(name + "=")]
    if len(at) > 1:
        words = ", ".join(f"'{argv[i]}' (word {i + 1})" for i in at)
        raise UserError(
            f"--vary {name}: the command gives {name} {len(at)} times ({words}): give it once, or leave it out "
            "(limit sets it at each launch)"
        )


def _set_option(argv: Sequence[str], name: str, value: str) -> tuple[str, ...]:
    """`name value` in place of the option's own (`--x 8` or `--x=8`), or added at the end."""
    for i, word in enumerate(argv):
        if word.startswith(name + "="):
            return (*argv[:i], f"{name}={value}", *argv[i + 1 :])
        if word == name:
            has_value = i + 1 < len(argv) and _is_value(argv[i + 1])
            return (*argv[:i], name, value, *argv[i + 1 + has_value :])
    return (*argv, name, value)


def _is_value(word: str) -> bool:
    """The word after an option is its value unless it is another option (`-1` is a value)."""
    return not word.startswith("-") or re.fullmatch(r"-\d+(\.\d+)?", word) is not None
