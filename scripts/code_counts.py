"""Figures about diagbench/'s code, read with ast alone: how loose the hand-offs are, how the modules read.

Run from the repository root: `python3 scripts/code_counts.py` (`--json` for one object).

How it counts (the same way every time, so a before and an after compare):
- `Any`, `dict[str, Any]`, `Mapping[str, Any]`: occurrences inside annotations (a parameter's, a
  return's, an annotated assignment's, a string annotation parsed) and in type expressions outside
  them (`cast(...)`'s first argument, a `TypeAlias`, a module-level alias such as `JSON = dict[str, Any]`,
  a TypedDict's functional form); `typing.Any` counts as `Any`; the import line itself does not.
  `Dict`/`typing.Dict` count as `dict`, `collections.abc.Mapping` as `Mapping`.
- modules: every `.py` file under diagbench/ (the refserver's too: it ships in the wheel);
  `__init__.py` files count. A docstring is a module's first statement being a string.
- function length: end line minus first line plus one of every `def` (methods and nested ones
  too), decorators left out.
- a test module of a module's name: some `tests/**/test_<name>.py` where `<name>` is the module's
  file name (`__init__.py`: its package's name); `__main__.py` files are left out of that figure.
"""

from __future__ import annotations

import ast
import json
import statistics
import sys
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from pathlib import Path

__all__ = ["Counts", "count", "main"]

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "diagbench"
TESTS = ROOT / "tests"
LONG_MODULE = 400


@dataclass(frozen=True)
class Counts:
    """The figures, as printed."""

    any: int
    dict_str_any: int
    mapping_str_any: int
    modules: int
    modules_with_all: int
    modules_with_docstring: int
    modules_over_400_lines: list[str]
    functions: int
    function_lines_median: float
    function_lines_p90: float
    modules_with_test_module: int
    modules_testable: int


def _name(node: ast.expr) -> str:
    """`Any` for `Any` and `typing.Any`; '' for anything else that is not a plain name."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    return ""


def _is_str_any(node: ast.Subscript, outer: set[str]) -> bool:
    if _name(node.value) not in outer or not isinstance(node.slice, ast.Tuple):
        return False
    elts = node.slice.elts
    return len(elts) == 2 and _name(elts[0]) == "str" and _name(elts[1]) == "Any"


def _type_nodes(tree: ast.Module) -> Iterator[ast.expr]:
    """Every type expression: annotations, cast()'s type, aliases, TypeVar bounds."""
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            args = node.args
            for arg in [*args.posonlyargs, *args.args, *args.kwonlyargs, args.vararg, args.kwarg]:
                if arg is not None and arg.annotation is not None:
                    yield arg.annotation
            if node.returns is not None:
                yield node.returns
        elif isinstance(node, ast.AnnAssign):
            yield node.annotation
            if _name(node.annotation) == "TypeAlias" and node.value is not None:
                yield node.value
        elif isinstance(node, ast.Call) and _name(node.func) == "cast" and node.args:
            yield node.args[0]
        elif isinstance(node, ast.Call) and _name(node.func) in {"TypeVar", "TypedDict", "NewType"}:
            yield from node.args[1:]
            yield from (kw.value for kw in node.keywords)
        elif isinstance(node, ast.Assign) and _mentions_any(node.value) and _is_type_expr(node.value):
            yield node.value


def _is_type_expr(node: ast.expr) -> bool:
    """A module-level alias such as `JSON = dict[str, Any]` (a subscript or union of names)."""
    if isinstance(node, ast.Subscript):
        return True
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr):
        return _is_type_expr(node.left) or _is_type_expr(node.right)
    return False


def _mentions_any(node: ast.expr) -> bool:
    return any(_name(n) == "Any" for n in ast.walk(node) if isinstance(n, (ast.Name, ast.Attribute)))


def _expand(node: ast.expr) -> Iterator[ast.AST]:
    """The nodes of a type expression, string annotations parsed."""
    for sub in ast.walk(node):
        if isinstance(sub, ast.Constant) and isinstance(sub.value, str):
            try:
                yield from ast.walk(ast.parse(sub.value, mode="eval").body)
            except SyntaxError:
                continue
        else:
            yield sub


def _type_counts(tree: ast.Module) -> tuple[int, int, int]:
    anys = dicts = mappings = 0
    for expr in _type_nodes(tree):
        for sub in _expand(expr):
            if isinstance(sub, (ast.Name, ast.Attribute)) and _name(sub) == "Any":
                anys += 1
            elif isinstance(sub, ast.Subscript):
                dicts += _is_str_any(sub, {"dict", "Dict"})
                mappings += _is_str_any(sub, {"Mapping"})
    return anys, dicts, mappings


def _function_lengths(tree: ast.Module) -> list[int]:
    return [
        (node.end_lineno or node.lineno) - node.lineno + 1
        for node in ast.walk(tree)
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
    ]


def _has_all(tree: ast.Module) -> bool:
    for node in tree.body:
        targets = (
            node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(node, ast.AnnAssign) else []
        )
        if any(isinstance(t, ast.Name) and t.id == "__all__" for t in targets):
            return True
    return False


def _test_names(tests: Path) -> set[str]:
    return {path.stem.removeprefix("test_") for path in tests.rglob("test_*.py")}


def _stem(path: Path) -> str:
    return path.parent.name if path.name == "__init__.py" else path.stem


def _p90(values: list[int]) -> float:
    ordered = sorted(values)
    return float(ordered[min(len(ordered) - 1, round(0.9 * (len(ordered) - 1)))])


def count(package: Path = PACKAGE, tests: Path = TESTS) -> Counts:
    """The figures for every module under `package`, test modules looked up under `tests`."""
    anys = dicts = mappings = with_all = with_doc = tested = testable = 0
    long: list[str] = []
    lengths: list[int] = []
    test_names = _test_names(tests)
    paths = sorted(package.rglob("*.py"))
    for path in paths:
        text = path.read_text(encoding="utf-8")
        tree = ast.parse(text, str(path))
        a, d, m = _type_counts(tree)
        anys, dicts, mappings = anys + a, dicts + d, mappings + m
        with_all += _has_all(tree)
        with_doc += ast.get_docstring(tree) is not None
        if len(text.splitlines()) > LONG_MODULE:
            long.append(path.relative_to(package.parent).as_posix())
        lengths.extend(_function_lengths(tree))
        if path.name != "__main__.py":
            testable += 1
            tested += _stem(path) in test_names
    return Counts(
        any=anys,
        dict_str_any=dicts,
        mapping_str_any=mappings,
        modules=len(paths),
        modules_with_all=with_all,
        modules_with_docstring=with_doc,
        modules_over_400_lines=long,
        functions=len(lengths),
        function_lines_median=float(statistics.median(lengths)) if lengths else 0.0,
        function_lines_p90=_p90(lengths) if lengths else 0.0,
        modules_with_test_module=tested,
        modules_testable=testable,
    )


def _percent(part: int, whole: int) -> str:
    return f"{100 * part / whole:.0f}%" if whole else "-"


def render(c: Counts) -> str:
    """The figures as lines of text."""
    return "\n".join(
        [
            f"Any in type expressions           {c.any}",
            f"dict[str, Any]                    {c.dict_str_any}",
            f"Mapping[str, Any]                 {c.mapping_str_any}",
            f"modules                           {c.modules}",
            f"  with __all__                    {c.modules_with_all} ({_percent(c.modules_with_all, c.modules)})",
            f"  with a docstring                {c.modules_with_docstring} "
            f"({_percent(c.modules_with_docstring, c.modules)})",
            f"  over {LONG_MODULE} lines                 {len(c.modules_over_400_lines)}"
            + (f" ({', '.join(c.modules_over_400_lines)})" if c.modules_over_400_lines else ""),
            f"  with a test module of its name  {c.modules_with_test_module} of {c.modules_testable} "
            f"({_percent(c.modules_with_test_module, c.modules_testable)})",
            f"functions                         {c.functions}",
            f"  lines, median                   {c.function_lines_median:g}",
            f"  lines, p90                      {c.function_lines_p90:g}",
        ]
    )


def main(argv: list[str]) -> int:
    counts = count()
    print(json.dumps(asdict(counts), indent=2) if "--json" in argv else render(counts))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
