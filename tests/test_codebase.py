"""The package reads as its docs say: every module has `__all__` naming what it defines, the
code map in docs/development.md names every module and no module that is gone, and no module is
over 400 lines (a file past that is doing two jobs: docs/development.md).

The map is the page's code block that starts with `diagbench/`. A line indented two spaces that
starts with `NAME/` opens the room of the package diagbench/NAME (four spaces: a package inside
the room above it); one indented two spaces that starts with `NAME.py` belongs to diagbench/
itself. Every `PATH.py` on a room's lines names a module of that room, relative to it
(`slurm/jobs.py` in `execute/`). `__init__.py` and `__main__.py` are their room's own."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "diagbench"
MAP_PAGE = ROOT / "docs" / "development.md"
MAX_LINES = 400
_MAP = re.compile(r"^```\n(diagbench/\n.*?)^```$", re.M | re.S)
_ROOM = re.compile(r"^( {2}| {4})(\w+)/(?=\s)")
_TOP = re.compile(r"^ {2}\w+\.py\b")
_MODULE = re.compile(r"(?<![\w/.])((?:\w+/)*\w+\.py)\b")


def _modules() -> list[Path]:
    return sorted(p for p in PACKAGE.rglob("*.py") if "__pycache__" not in p.parts)


def _module_id(path: Path) -> str:
    return path.relative_to(ROOT).as_posix()


def read_map(text: str) -> tuple[set[str], set[str]]:
    """The packages (as folders under the root) and the modules (as files) a page's map names."""
    block = _MAP.search(text)
    assert block is not None, f"{MAP_PAGE.name}: no code block starting with `diagbench/` (the code map)"
    rooms: set[str] = set()
    modules: set[str] = set()
    outer = room = "diagbench"
    for line in block.group(1).splitlines()[1:]:
        if found := _ROOM.match(line):
            room = f"{outer if found.group(1) == '    ' else 'diagbench'}/{found.group(2)}"
            outer = room if found.group(1) == "  " else outer
            rooms.add(room)
            line = line[found.end() :]
        elif _TOP.match(line):
            outer = room = "diagbench"
        modules.update(f"{room}/{name}" for name in _MODULE.findall(line))
    return rooms, modules


def test_read_map_reads_rooms_inner_rooms_and_the_top() -> None:
    page = (
        "x\n```\ndiagbench/\n  vocab.py, errors.py   words\n               and jsonvalue.py\n"
        "  logs/        signatures.py (see scan.py)\n               watch.py, sub/deep.py\n"
        "    inner/     a.py\n  simulator.py the demo\n```\n"
    )
    rooms, modules = read_map(page)
    assert rooms == {"diagbench/logs", "diagbench/logs/inner"}
    assert modules == {
        "diagbench/vocab.py",
        "diagbench/errors.py",
        "diagbench/jsonvalue.py",
        "diagbench/logs/signatures.py",
        "diagbench/logs/scan.py",
        "diagbench/logs/watch.py",
        "diagbench/logs/sub/deep.py",
        "diagbench/logs/inner/a.py",
        "diagbench/simulator.py",
    }


def test_the_code_map_names_every_module_and_no_module_that_is_gone() -> None:
    rooms, named = read_map(MAP_PAGE.read_text(encoding="utf-8"))
    packages = {_module_id(p.parent) for p in _modules() if p.name == "__init__.py" and p.parent != PACKAGE}
    modules = {_module_id(p) for p in _modules() if p.name not in ("__init__.py", "__main__.py")}
    problems = [
        f"{m}: not in the code map of docs/development.md (give it a few words in its room)"
        for m in sorted(modules - named)
    ]
    problems += [f"{r}/: a package with no room in the code map" for r in sorted(packages - rooms)]
    problems += [f"{m}: in the code map, but there is no such module" for m in sorted(named - modules)]
    problems += [f"{r}/: a room of the code map, but there is no such package" for r in sorted(rooms - packages)]
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("path", _modules(), ids=_module_id)
def test_every_module_has_all_naming_what_it_defines(path: Path) -> None:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    exported = [
        node.value
        for node in tree.body
        if isinstance(node, ast.Assign | ast.AnnAssign)
        for target in (node.targets if isinstance(node, ast.Assign) else [node.target])
        if isinstance(target, ast.Name) and target.id == "__all__"
    ]
    assert len(exported) == 1, f"{_module_id(path)}: no `__all__` (one list of what the module exports)"
    names = ast.literal_eval(exported[0]) if exported[0] is not None else None
    assert isinstance(names, list | tuple), f"{_module_id(path)}: `__all__` is not a literal list"
    missing = sorted(set(names) - _defined(tree.body))
    assert not missing, f"{_module_id(path)}: `__all__` names what it does not define: {', '.join(missing)}"


def _defined(body: list[ast.stmt]) -> set[str]:
    """The names a module's top level binds (inside its `if` and `try` blocks too): definitions,
    assignments, imports; not what a function or a class binds inside it."""
    names: set[str] = set()
    for node in body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.Import | ast.ImportFrom):
            names.update((a.asname or a.name).partition(".")[0] for a in node.names)
        elif isinstance(node, ast.If | ast.Try | ast.With):
            blocks = [node.body, getattr(node, "orelse", []), getattr(node, "finalbody", [])]
            blocks += [h.body for h in getattr(node, "handlers", [])]
            names.update(n for block in blocks for n in _defined(block))
        else:
            names.update(t.id for t in ast.walk(node) if isinstance(t, ast.Name) and isinstance(t.ctx, ast.Store))
    return names


def test_no_module_is_over_400_lines() -> None:
    long = [f"{_module_id(p)}: {n} lines" for p in _modules() if (n := len(p.read_bytes().splitlines())) > MAX_LINES]
    assert not long, f"over {MAX_LINES} lines (tidy the file, or split it by its jobs):\n" + "\n".join(long)
