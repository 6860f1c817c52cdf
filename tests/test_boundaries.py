"""The rooms' rules, enforced by reading every module's imports (an AST walk).

- typer only in the CLI; rich only in the rendering layer (render/);
- psutil only where processes are owned (launch/);
- data flows one way: a room imports only rooms at or below its own rank, so nothing in
  the core imports the rendering layer or the CLI;
- reports come from records alone: the rendering layer never imports launch/ (what a launch
  made reaches it as a record or as the core value it renders).
- the doors (design.md section 4: one door for each danger): a process is started only by
  the program door (launch/helpers.py: every helper program, with its deadline), the
  server spawner (launch/process.py) and a cluster's client module (execute/slurm/
  commands.py; a new cluster's client is added to PROCESS_DOORS by name); a file is locked,
  truncated, chmod'ed, linked or removed as a tree only by the files door (safefiles/)
  and the modules that keep locks through it (FILE_DOORS).
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "diagbench"
# rank of each room: imports may only go to an equal or lower rank
RANKS = {
    "vocab": 0,
    "errors": 0,
    "jsonvalue": 0,
    "jsonreply": 0,
    "yamlsrc": 0,
    "schemas": 0,
    "sensitive": 0,
    "safetext": 0,
    "safefiles": 0,
    "logs": 1,
    "spec": 2,
    "records": 3,
    "launch": 4,
    "judge": 4,
    "execute": 5,
    "isolate": 6,
    "triage": 6,
    "limit": 6,
    "debug": 6,
    "reports": 6,
    "render": 7,
    "cli": 8,
    "__main__": 9,
}
OWN_RULES = ("refserver", "simulator")  # standalone servers launched by diagbench, not part of the pipeline
NEVER = {"render": ("launch",)}  # room -> rooms it must not import, though they rank below it
# the modules that start processes: the program door, the server spawner, a cluster's client
PROCESS_DOORS = ("launch/helpers.py", "launch/process.py", "execute/slurm/commands.py", "execute/ray/watchdog.py")
# the files door, and the modules that keep locks through it (a run's .lock, port and GPU
# leases, the environment cache's leases)
FILE_DOORS = (
    "safefiles/folder.py",
    "launch/shared.py",
    "records/store.py",
    "launch/ports.py",
    "launch/gpulease.py",
    "launch/envs.py",
)
ONLY_IN = {
    "typer": ("cli",),
    "rich": ("render",),
    "ray": ("execute/ray",),
    "subprocess": PROCESS_DOORS,
    "psutil": ("launch",),
    "fcntl": FILE_DOORS,
    "multiprocessing": (),
    "pty": (),
}
# calls that start a process, or change a file in place, outside the doors
PROCESS_CALLS: dict[str, tuple[str, ...]] = {
    "os": ("system", "popen", "fork", "forkpty", "posix_spawn", "posix_spawnp", "spawn", "exec")
}
FILE_CALLS: dict[str, tuple[str, ...]] = {
    "os": ("chmod", "fchmod", "lchmod", "ftruncate", "truncate", "symlink", "link"),
    "shutil": ("rmtree",),
}


def modules() -> Iterator[tuple[str, Path]]:
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE).as_posix()
        if rel == "__init__.py" or rel.split("/")[0].removesuffix(".py") in OWN_RULES:
            continue
        yield rel, path


def room(rel: str) -> str:
    return rel.split("/")[0].removesuffix(".py")


def imports(path: Path) -> Iterator[str]:
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            yield node.module
            if node.module == "diagbench":
                yield from (f"diagbench.{alias.name}" for alias in node.names)


MODULES = list(modules())


def test_every_room_has_a_rank() -> None:
    assert {room(rel) for rel, _ in MODULES} <= set(RANKS)


@pytest.mark.parametrize(("rel", "path"), MODULES, ids=[rel for rel, _ in MODULES])
def test_imports_respect_the_rooms(rel: str, path: Path) -> None:
    here = room(rel)
    for name in imports(path):
        top = name.split(".")[0]
        if top in ONLY_IN:
            allowed = ONLY_IN[top]
            assert any(rel.startswith(a + "/") or rel in (a, a + ".py") for a in allowed), (
                f"{rel} imports {top}, which belongs in {', '.join(allowed) or 'no module of diagbench'}"
            )
        if top == "diagbench" and "." in name:
            target = name.split(".")[1]
            if target in OWN_RULES or target == "__version__":
                continue
            assert RANKS[target] <= RANKS[here], f"{rel} (room {here}) imports {name}: data flows the other way"
            assert target not in NEVER.get(here, ()), f"{rel} imports {name}: {here}/ works from records alone"


def calls(path: Path, watched: dict[str, tuple[str, ...]]) -> Iterator[str]:
    """`module.function` for each call in `path` of a watched function (by prefix: os.exec*)."""
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and isinstance(node.func.value, ast.Name)
        ):
            module, name = node.func.value.id, node.func.attr
            if any(name.startswith(prefix) for prefix in watched.get(module, ())):
                yield f"{module}.{name}"


@pytest.mark.parametrize(("rel", "path"), MODULES, ids=[rel for rel, _ in MODULES])
def test_only_the_doors_start_processes_or_change_files_in_place(rel: str, path: Path) -> None:
    if rel not in PROCESS_DOORS:
        assert not list(calls(path, PROCESS_CALLS)), f"{rel} starts a process: go through launch/helpers.py"
    if rel not in FILE_DOORS:
        found = list(calls(path, FILE_CALLS))
        assert not found, f"{rel} calls {', '.join(found)}: go through the files door (safefiles/)"


def test_the_doors_walk_sees_what_it_polices() -> None:
    """The door rules can fail: the walk finds the calls the doors themselves make."""
    by_rel = dict(MODULES)
    assert "os.fchmod" in set(calls(by_rel["launch/shared.py"], FILE_CALLS))
    assert "os.ftruncate" in set(calls(by_rel["records/store.py"], FILE_CALLS))
    assert "fcntl" in set(imports(by_rel["records/store.py"]))
    assert "subprocess" in set(imports(by_rel["launch/helpers.py"]))


def test_the_walk_sees_what_it_polices() -> None:
    """A check that cannot fail is no check: the walk must find the CLI's typer and render's rich."""
    found = {rel: set(imports(path)) for rel, path in MODULES}
    assert "typer" in found["cli/app.py"]
    assert any(
        "rich.table" in names or "rich.console" in names for rel, names in found.items() if rel.startswith("render/")
    )
    assert "psutil" in found["launch/process.py"]
    assert "diagbench.launch.stall" in found["execute/dryrun.py"]  # a room's import of launch/ is seen


# -- no import circle inside a room ---------------------------------------------------------


def module_name(rel: str) -> str:
    parts = rel.removesuffix(".py").split("/")
    return ".".join(["diagbench", *(parts[:-1] if parts[-1] == "__init__" else parts)])


ALL_MODULES = {
    module_name(path.relative_to(PACKAGE).as_posix()): path
    for path in sorted(PACKAGE.rglob("*.py"))
    if path.relative_to(PACKAGE).parts[0].removesuffix(".py") not in OWN_RULES
}


def imported_modules(path: Path, known: set[str]) -> Iterator[str]:
    """The diagbench modules `path` imports, anywhere in it (a function's lazy import too: a
    circle that only runs later is still one); `from pkg import mod` counts as pkg.mod."""
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names if alias.name in known)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            for alias in node.names:
                yield f"{node.module}.{alias.name}" if f"{node.module}.{alias.name}" in known else node.module


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Every strongly connected group of more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for nxt in sorted(graph.get(node, ())):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            group = []
            while True:
                member = stack.pop()
                group.append(member)
                if member == node:
                    break
            if len(group) > 1:
                found.append(sorted(group))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def room_of(module: str) -> str:
    return module.split(".")[1] if "." in module else ""


def test_no_import_circle_inside_a_room() -> None:
    """Modules of one room import one another one way only: a circle (even through a lazy
    import) means two modules are one job split in two, or a third module is missing."""
    known = set(ALL_MODULES)
    graph = {
        name: {t for t in imported_modules(path, known) if t != name and room_of(t) == room_of(name)}
        for name, path in ALL_MODULES.items()
    }
    assert circles(graph) == []


def test_the_circle_finder_finds_a_circle() -> None:
    graph = {"a.x": {"a.y"}, "a.y": {"a.z"}, "a.z": {"a.x"}, "a.w": {"a.x"}}
    assert circles(graph) == [["a.x", "a.y", "a.z"]]
    assert circles({"a.x": {"a.y"}, "a.y": set()}) == []
