"""The sink is one door: only the modules listed here write a file or standard output, and each
says why nothing of a secret passes it other than through `records.sink` (an AST walk of every
module, as tests/test_boundaries.py walks the imports)."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "diagbench"
STANDALONE = ("refserver", "simulator")  # servers diagbench launches, not diagbench itself
# module -> why what it writes passes the sink or cannot hold a secret
WRITERS = {
    "records/sink.py": "the sink: documents through `document`",
    "records/store.py": "write_json passes every record through sink.record; the run lock holds a pid",
    "launch/logfile.py": "server.log, through sink.StreamBlanker",
    "render/console.py": "the terminal: SafeStream and write_document pass sink.document; /dev/null for a terminal gone",
    "cli/fastpath.py": 'classify --json without typer: its document goes through write_document; "interrupted" is all it says',
    "cli/conventions.py": "a usage mistake's one line, through sink.document",
    "execute/cancel.py": "one byte to its own wake-up pipe",
    "launch/probes.py": "one byte to its own wake-up pipe",
    "isolate/run.py": "an empty file reserving a run id",
    "launch/ports.py": "lease files (a port and its owner); a warning naming the lease folder",
    "launch/shared.py": "lease files under a shared folder (pids, owners)",
    "launch/envs.py": "requirement lists uv reads: the index URLs as given (uv needs them), never shown; cache markers",
    "logs/cache.py": "the signature packs' parsed patterns",
    "logs/guard.py": "a warning naming a pack's pattern",
    "launch/faulthandler_site/sitecustomize.py": "runs inside the server: its faulthandler dumps (file, line, function)",
    "execute/ray/probe.py": "a Ray cluster's hosts and GPU counts, for the driver to read",
    "execute/ray/span.py": "a node-spanning attempt's nodes: pids, exit codes, times",
    "launch/flight.py": "an empty trigger file asking the ranks for their flight-recorder dumps",
    "execute/slurm/span.py": "a node-spanning attempt's nodes (pids, exit codes, times); its stdout is the log the watch blanks",
    "safefiles/folder.py": "the files door: bytes its callers (each listed here) hand it; a lock's pid",
    "launch/stacks.py": "stacks files, each through sink.document, written through the files door",
    "launch/helpers.py": "a helper program's standard input: what its caller hands it, never shown",
}
# the files door's writers (safefiles): a Folder's write(name, data), write_file, write_below
_DOOR_WRITES = ("write_file", "write_below")
_WRITE_MODES = ('"w', '"a', '"x', "'w", "'a", "'x", "WRONLY", "RDWR", "O_CREAT")


def writes(tree: ast.AST) -> Iterator[str]:
    """Each call that writes a file or a standard stream."""
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
        owner = ast.unparse(func.value) if isinstance(func, ast.Attribute) else ""
        modes = " ".join(ast.unparse(a) for a in [*node.args[1:], *(k.value for k in node.keywords)])
        if (
            name in ("write_text", "write_bytes")
            or (name == "print" and not owner)
            or (name == "write" and owner in ("sys.stdout", "sys.stderr", "os"))
            or (name in ("echo", "secho") and owner in ("typer", "click"))
            or (name in ("open", "fdopen") and any(mode in modes for mode in _WRITE_MODES))
            or name in _DOOR_WRITES
            or (name == "write" and owner not in ("os", "sys.stdout", "sys.stderr") and len(node.args) >= 2)
        ):
            yield f"line {node.lineno}: {ast.unparse(node)[:80]}"


def modules() -> Iterator[tuple[str, Path]]:
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE).as_posix()
        if not rel.startswith(STANDALONE):
            yield rel, path


@pytest.mark.parametrize(("rel", "path"), list(modules()), ids=[rel for rel, _ in modules()])
def test_only_the_listed_modules_write(rel: str, path: Path) -> None:
    found = list(writes(ast.parse(path.read_text(), str(path))))
    assert rel in WRITERS or not found, (
        f"{rel} writes a file or a standard stream ({found}): write documents with records.sink.write_document, "
        "records with records.store.write_json, text for people through the consoles (render/console.py); "
        "or, where no secret can pass, list the module in WRITERS saying why"
    )


def test_every_listed_writer_still_writes() -> None:
    """A module that stopped writing leaves the list: the list is what the door holds open."""
    found = {rel for rel, path in modules() if any(writes(ast.parse(path.read_text(), str(path))))}
    assert set(WRITERS) == found


def test_the_walk_finds_each_kind_of_write() -> None:
    code = 'p.write_text(x)\nprint(x)\nsys.stdout.write(x)\nopen(p, "w")\nos.open(p, os.O_WRONLY)\nopen(p)\n'
    code += "typer.echo(x, err=True)\nthing.echo(x)\n"
    assert len(list(writes(ast.parse(code)))) == 6
