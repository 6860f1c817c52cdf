"""The spec: YAML text -> a validated `Spec`; every mistake names file:line and field."""

from __future__ import annotations

import hashlib
import re
import shlex
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

from diagbench.errors import UserError
from diagbench.jsonvalue import JSON, JSONObject
from diagbench.logs.decision import ReadyRule
from diagbench.logs.server_names import READY_ALSO, SERVERS, known_server
from diagbench.logs.signatures import Kind, Signature, builtin_packs
from diagbench.logs.watch import SETTLE_S
from diagbench.spec.checks import COMMAND_PLACEHOLDERS, ENV_PLACEHOLDERS, check_env_name, check_placeholders
from diagbench.spec.executor import ExecutorSpec, parse_executor
from diagbench.spec.gpus import GpuRequest, parse_gpus_key, parse_gpus_per_attempt
from diagbench.spec.hypotheses import Expectation, Hypothesis, parse_expectations, parse_hypotheses
from diagbench.spec.matrix import Axis, Cell, parse_matrix
from diagbench.spec.packs import assemble_signatures, parse_pack_names
from diagbench.spec.ready import PriceLoad, Ready, ReadyRequest, parse_ready
from diagbench.spec.stackskeys import STACKS_DEFAULT, STACKS_WHEN, parse_stacks, stacks_when
from diagbench.yamlsrc import Src, load_document, suggest

__all__ = [
    "COMPILE_CACHE_VARS",
    "DEFAULT_GRACE_S",
    "DEFAULT_MAX_LOG",
    "DEFAULT_TIMEOUT_S",
    "MIN_MAX_LOG",
    "STACKS_DEFAULT",
    "STACKS_WHEN",
    "ServerSpec",
    "Spec",
    "load_spec",
]

DEFAULT_TIMEOUT_S = 600.0  # SGLang's own DEFAULT_TIMEOUT_FOR_SERVER_LAUNCH
DEFAULT_GRACE_S = 10.0
DEFAULT_MAX_LOG = 1 << 30  # server.log keeps its head and last part past this (a flooding server)
MIN_MAX_LOG = 64 << 10
_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(B|KB|MB|GB|KiB|MiB|GiB)?\s*$")
_SIZE_UNITS = {None: 1, "B": 1, "KB": 10**3, "MB": 10**6, "GB": 10**9, "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30}
_TOP_KEYS = ("name", "description", "server", "matrix", "expect", "hypotheses", "gpus", "executor")
_SERVER_KEYS = (
    "command",
    "shell",
    "env",
    "cwd",
    "port",
    "ready",
    "signatures",
    "failures",
    "timeout",
    "grace",
    "settle",
    "fresh_caches",
    "max_log",
    "gpus",
    "nodes",
    "kind",
    "stall",
    "stacks",
    "spin",
)
T = TypeVar("T")
F = TypeVar("F")
# compile caches that carry kernels (and their autotune results) from one launch to the next
COMPILE_CACHE_VARS = ("TORCHINDUCTOR_CACHE_DIR", "TRITON_CACHE_DIR", "VLLM_CACHE_ROOT")


@dataclass(frozen=True)
class ServerSpec:
    command: tuple[str, ...]  # argv; with shell, one string
    shell: bool
    env: Mapping[str, str]
    cwd: Path
    port: int | None  # None: a free port per cell
    ready_log: str | None
    ready_http: str | None
    packs: tuple[str, ...]
    signatures: tuple[Signature, ...]  # packs + the spec's own failures (+ ready.log)
    timeout: float
    grace: float
    settle: float = SETTLE_S  # how long a failure line waits for a wrapper line to name it
    fresh_caches: tuple[str, ...] = ()  # variables pointed at a new empty folder for each attempt
    max_log: int = DEFAULT_MAX_LOG  # bytes of server.log before only its head and last part are kept
    gpus: int | None = None  # GPUs per attempt; None: 1 where GPUs are handed out, else 0
    kind: str | None = None  # which server this is (vllm, sglang, ...): its own ready lines decide
    ready_request: ReadyRequest | None = None  # must succeed before ready (a one-token completion)
    stall: float | None = None  # no log line and no work in the tree for this long: a stalled timeout
    stacks: str = STACKS_DEFAULT  # when the tree's stacks are taken: on-timeout | always | never
    nodes: int = 1  # nodes one attempt spans (an executor that can place them: one process per node)
    faulthandler: bool = False  # Python servers dump their own stacks on SIGUSR2 (server.stacks: faulthandler)
    price: PriceLoad | None = None  # a short load sent once ready, before teardown (triage --price)
    flight_recorder: bool = False  # PyTorch's flight recorder armed, each rank's dump read (stacks: flight-recorder)
    spin: float | None = None  # every rank at the same waiting frame this long: a stall however busy the host

    @property
    def stacks_word(self) -> str:
        """server.stacks as written: when, or the opt-in that also says on-timeout."""
        return "faulthandler" if self.faulthandler else "flight-recorder" if self.flight_recorder else self.stacks

    @property
    def ready_rule(self) -> ReadyRule:
        """ready.log and/or ready.http; with neither, the packs' ready lines."""
        return ReadyRule(
            log=self.ready_log is not None or self.ready_http is None,
            http=self.ready_http is not None,
            http_path=self.ready_http or "",
            request=self.ready_request.label if self.ready_request else "",
        )


@dataclass(frozen=True)
class Spec:
    name: str
    description: str
    path: Path
    text: str
    sha256: str
    server: ServerSpec
    axes: tuple[Axis, ...]
    cells: tuple[Cell, ...]
    expectations: tuple[Expectation, ...] = ()
    hypotheses: tuple[Hypothesis, ...] = field(default=())
    gpus: GpuRequest | None = None  # the GPUs to use when --gpus is not given (None: all that are visible)
    executor: ExecutorSpec = field(default_factory=ExecutorSpec)  # where attempts run (the command line can override)

    @classmethod
    def of_request(
        cls,
        word: str,
        description: str,
        cwd: Path,
        request: JSONObject,
        server: ServerSpec,
        cells: tuple[Cell, ...] = (),
    ) -> Spec:
        """The spec a command builds from its arguments (`isolate`, `probe`, `triage`): its text,
        for the manifest, is `{word: request}` as YAML; it has no axes."""
        import yaml  # a command's own spec only: `classify` never pays for YAML

        text = yaml.safe_dump({word: request}, sort_keys=False)
        return cls(
            name=word,
            description=description,
            path=cwd / word,
            text=text,
            sha256=hashlib.sha256(text.encode()).hexdigest(),
            server=server,
            axes=(),
            cells=cells,
        )

    def to_json(self) -> dict[str, JSON]:
        """The spec as loaded, for the manifest (labels as written)."""
        s = self.server
        return {
            "name": self.name,
            "description": self.description,
            "path": str(self.path),
            "server": {
                "command": list(s.command),
                "shell": s.shell,
                "env": dict(s.env),
                "cwd": str(s.cwd),
                "port": s.port if s.port is not None else "auto",
                "ready": {
                    "log": s.ready_log,
                    "http": s.ready_http,
                    "request": s.ready_request.to_json() if s.ready_request else None,
                },
                "signatures": list(s.packs),
                "timeout_s": s.timeout,
                "grace_s": s.grace,
                "settle_s": s.settle,
                "fresh_caches": list(s.fresh_caches),
                "max_log": s.max_log,
                "gpus": s.gpus,
                "nodes": s.nodes,
                "kind": s.kind,
                "stall_s": s.stall,
                "stacks": s.stacks_word,
                "spin_s": s.spin,
            },
            "gpus": self.gpus.to_json() if self.gpus else None,
            "matrix": {
                a.name: {
                    "kind": a.kind.value,
                    "target": list(a.target),
                    "values": {lv.label: lv.value for lv in a.levels},
                }
                for a in self.axes
            },
            "expect": [e.to_json() for e in self.expectations],
            "executor": self.executor.to_json(),
        }


def load_spec(path: Path, text: str | None = None) -> Spec:
    """Read and check a spec; every mistake found is reported at once, in line order.
    `text` stands in for the file's content (a run's recorded copy, for `run --resume RUN`)."""
    document, text = load_document(path, text)
    root = document.collecting()
    problems = root.sink
    keys = root.mapping(_TOP_KEYS)
    for need in ("name", "server", "matrix"):
        root.missing(keys, need, _MISSING_FIX[need])

    def part(key: str, parse: Callable[[Src], T], fallback: F) -> T | F:
        return root.attempt(lambda: parse(keys[key]), fallback) if key in keys else fallback

    name = part("name", Src.string, "")
    description = part("description", Src.text, "")
    server = part("server", lambda s: _parse_server(s, path.resolve().parent), None)
    matrix = part("matrix", parse_matrix, None)
    axes, cells = (matrix.axes, matrix.cells) if matrix else (None, None)  # None: broken, skip what needs it
    expectations = part("expect", lambda s: parse_expectations(s, axes, cells), ())
    hypotheses = part("hypotheses", lambda s: parse_hypotheses(s, axes, cells), ())
    gpus = part("gpus", parse_gpus_key, None)
    executor = part("executor", parse_executor, ExecutorSpec())
    problems.raise_found(str(path))
    assert server is not None and matrix is not None  # no mistake recorded: every part was parsed
    if not matrix.cells:
        raise UserError("the matrix is empty: every cell is excluded")
    return Spec(
        name=name,
        description=description,
        path=path,
        text=text,
        sha256=hashlib.sha256(text.encode()).hexdigest(),
        server=server,
        axes=tuple(matrix.axes),
        cells=tuple(matrix.cells),
        expectations=expectations,
        hypotheses=hypotheses,
        gpus=gpus,
        executor=executor,
    )


_MISSING_FIX = {
    "name": "add e.g. `name: compile-isolation`",
    "server": "add a `server:` section with at least `command:`",
    "matrix": "add a `matrix:` section with at least one axis",
}


def _parse_server(src: Src, base: Path) -> ServerSpec:
    """The server section, each key checked on its own; Broken if any was wrong."""
    keys = src.mapping(_SERVER_KEYS)
    mark = src.sink.mark()

    def get(key: str, parse: Callable[[Src], T], default: F) -> T | F:
        return src.attempt(lambda: parse(keys[key]), default) if key in keys else default

    src.missing(keys, "command", "e.g. command: python3 -m sglang.launch_server --port {port}")
    shell = get("shell", Src.boolean, False)
    ready_mark = src.sink.mark()
    ready = get("ready", parse_ready, Ready())
    ready_ok = src.sink.clean_since(ready_mark)
    packs = get("signatures", parse_pack_names, None) if "signatures" in keys else tuple(builtin_packs())
    signatures = None if packs is None else assemble_signatures(src, keys, packs, base, ready.log)
    kind = get("kind", _parse_kind, None)
    if signatures is not None and ready_ok and ready.log is None and ready.http is None:
        _check_ready_condition(src, signatures, kind)
    server = ServerSpec(
        command=get("command", lambda c: _parse_command(c, shell), ()),
        shell=shell,
        env=get("env", _parse_env, {}),
        cwd=get("cwd", lambda c: base / c.string(), base),
        port=get("port", _parse_port, None),
        ready_log=ready.log,
        ready_http=ready.http,
        packs=packs or (),
        signatures=tuple(signatures or ()),
        timeout=get("timeout", Src.duration, DEFAULT_TIMEOUT_S),
        grace=get("grace", Src.duration, DEFAULT_GRACE_S),
        settle=get("settle", Src.duration, SETTLE_S),
        fresh_caches=get("fresh_caches", _parse_fresh_caches, ()),
        max_log=get("max_log", _parse_size, DEFAULT_MAX_LOG),
        gpus=get("gpus", parse_gpus_per_attempt, None),
        kind=kind,
        ready_request=ready.request,
        stall=get("stall", Src.duration, None),
        stacks=stacks_when(get("stacks", parse_stacks, STACKS_DEFAULT)),
        nodes=get("nodes", _parse_nodes, 1),
        faulthandler=get("stacks", parse_stacks, "") == "faulthandler",
        flight_recorder=get("stacks", parse_stacks, "") == "flight-recorder",
        spin=get("spin", Src.duration, None),
    )
    src.sink.settle(mark)
    return server


def _check_ready_condition(src: Src, signatures: list[Signature], kind: str | None) -> None:
    if not any(_decides_ready(s, kind) for s in signatures):
        whose = f" of {kind}" if kind else ""
        src.sink.add(
            src.error(
                f"no ready condition: none of the chosen signature packs has a ready line{whose}",
                "set server.ready.log (a regex) or server.ready.http (a path such as /health)",
            )
        )


def _parse_command(src: Src, shell: bool) -> tuple[str, ...]:
    if src.is_list():
        items = src.items()
        argv = tuple(item.string("a command word") for item in items)
        if not argv:
            raise src.error("expected a command, got an empty list")
        for item, word in zip(items, argv, strict=True):
            check_placeholders(item, word, COMMAND_PLACEHOLDERS)
        return (shlex.join(argv),) if shell else argv
    text = src.string("a command")
    check_placeholders(src, text, COMMAND_PLACEHOLDERS)
    if shell:
        return (text,)
    try:
        argv = tuple(shlex.split(text))
    except ValueError as exc:
        raise src.error(f"cannot split the command like a shell would: {exc}", "close the quote") from None
    return argv


def _parse_env(src: Src) -> dict[str, str]:
    env = {}
    for name, value in src.mapping().items():
        check_env_name(value, name)
        env[name] = value.text("a string value")
        check_placeholders(value, env[name], ENV_PLACEHOLDERS)
    return env


def _parse_fresh_caches(src: Src) -> tuple[str, ...]:
    """`true` for the usual compile caches, or a list of the variables to isolate."""
    if not src.is_list():
        return COMPILE_CACHE_VARS if src.boolean() else ()
    names = []
    for item in src.items():
        names.append(item.string("a variable name"))
        check_env_name(item, names[-1])
    return tuple(names)


def _decides_ready(sig: Signature, kind: str | None) -> bool:
    """A ready line that can decide a live launch of this kind of server."""
    if sig.kind is not Kind.READY or sig.weak:
        return False
    return kind is None or sig.server is None or sig.server in (kind, *READY_ALSO.get(kind, ()))


def _parse_kind(src: Src) -> str:
    """server.kind: a server diagbench knows (vllm, sglang, tgi, ...)."""
    word = src.string("a server name")
    if (name := known_server(word)) is None:
        raise src.error(f'unknown server "{word}"', suggest(word, list(SERVERS)))
    return name


def _parse_size(src: Src) -> int:
    """`1GiB`, `500MB`, `64KiB`, or a number of bytes; at least 64 KiB."""
    found = _SIZE.match(src.text("a size like 1GiB or 500MB"))
    size = int(float(found.group(1)) * _SIZE_UNITS[found.group(2)]) if found else 0
    if size < MIN_MAX_LOG:
        raise src.expected("a size of at least 64KiB, like 1GiB, 500MB or 64KiB")
    return size


def _parse_port(src: Src) -> int | None:
    if src.text("auto or a port number") == "auto":
        return None
    port = src.integer("auto or a port number")
    if not 1 <= port <= 65535:
        raise src.expected("auto or a port number from 1 to 65535")
    return port


def _parse_nodes(src: Src) -> int:
    """`server.nodes: N`: the nodes one attempt spans (1, the default: one host)."""
    count = src.integer("a number of nodes (1 or more)")
    if count < 1:
        raise src.expected("a number of nodes (1 or more)")
    return count
