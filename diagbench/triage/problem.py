"""What a triage launches: the pasted command, the server rules, the server's name and the
remedies it may try; recorded under a spec for the manifest, as an isolation is."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from diagbench.errors import UserError
from diagbench.isolate.factors import Config, shown_command
from diagbench.isolate.pasted import split_command
from diagbench.isolate.problem import ServerRules, server_spec
from diagbench.jsonvalue import JSON
from diagbench.logs.server_names import SERVERS, guess_server, known_server
from diagbench.spec.load import ServerSpec, Spec
from diagbench.spec.ready import ReadyRequest
from diagbench.triage.apply import Launch
from diagbench.triage.remedies import REMEDY_SERVERS, Catalogue, load_catalogue

__all__ = ["TriageProblem", "from_command", "server_word"]


@dataclass(frozen=True)
class TriageProblem:
    spec: Spec
    launch: Launch
    server: str | None  # given (--server) or read from the command; else detected from the log
    catalogue: Catalogue
    price: int = 0  # requests per remedy that comes up (0: start-up time only)
    request: ReadyRequest | None = None  # what --price sends (default: the server's remedy file's)

    @property
    def server_spec(self) -> ServerSpec:
        return self.spec.server

    def shown(self, launch: Launch | None = None) -> str:
        return (launch or self.launch).shown()


def from_command(
    command: str, server: str | None, rules: ServerRules, remedies: Sequence[Path], price: int, cwd: Path
) -> TriageProblem:
    argv, env = split_command(command, (), "command")
    if not any("{port}" in word for word in (*argv, *(v for v in env.values() if v))):  # OLLAMA_HOST=...:{port}
        raise UserError(
            "the command has no {port}: write {port} where it takes its port (each launch gets a free one), "
            "e.g. ... --port {port}"
        )
    name = server_word("--server", server) if server else guess_server(argv)
    catalogue = load_catalogue(remedies)
    launch = Launch(argv, env)
    request: dict[str, JSON] = {
        "command": shown_command(Config(argv, env, {})),
        "server": name,
        "remedies": [str(p) for p in remedies],
    }
    request |= {"ready": rules.ready, "http": rules.http, "price": price}
    # a server the log reader knows decides by its own ready lines (uvicorn's means vLLM's only for vLLM)
    serving = dataclasses.replace(server_spec(rules, cwd), kind=name if name in SERVERS else None)
    spec = Spec.of_request("triage", "diagbench triage CMD", cwd, request, serving)
    return TriageProblem(spec, launch, name, catalogue, price)


def server_word(option: str, word: str) -> str:
    """A server's name as remedies and trackers know it (`llama.cpp` is llamacpp), or a usage error."""
    if word in REMEDY_SERVERS:
        return word
    if (name := known_server(word)) is not None:
        return name
    raise UserError(f"{option} {word}: unknown server (expected one of: {', '.join(REMEDY_SERVERS)})")
