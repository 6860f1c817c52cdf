"""scripts/code_counts.py counts what it says it counts (on a small package made here)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

SCRIPT = Path(__file__).resolve().parent.parent / "scripts" / "code_counts.py"


def load_script() -> ModuleType:
    spec = importlib.util.spec_from_file_location("code_counts", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["code_counts"] = module  # dataclasses look the module up by name
    spec.loader.exec_module(module)
    return module


def test_counts_type_expressions_modules_and_functions(tmp_path: Path) -> None:
    package, tests = tmp_path / "pkg", tmp_path / "tests"
    package.mkdir()
    (tests / "room").mkdir(parents=True)
    (tests / "room" / "test_alpha.py").write_text("")
    (package / "__init__.py").write_text('"""The package."""\n')
    (package / "alpha.py").write_text(
        '"""Alpha."""\n'
        "from typing import Any, Mapping, cast\n"
        "import typing\n"
        '__all__ = ["f"]\n'
        "JSON = dict[str, Any]\n"
        "def f(a: dict[str, Any], b: 'Mapping[str, Any]') -> typing.Any:\n"
        "    x: list[Any] = []\n"
        "    return cast('dict[str, Any]', a)\n"
    )
    (package / "beta.py").write_text("# Any here is a comment\n" + "def g() -> None:\n    pass\n" + "\n" * 400)
    counts = load_script().count(package, tests)
    # alias 1, a 1, b 1, return 1, x 1, cast 1; the import and the comment are not counted
    assert counts.any == 6
    assert counts.dict_str_any == 3  # the alias, a, the cast
    assert counts.mapping_str_any == 1
    assert (counts.modules, counts.modules_with_all, counts.modules_with_docstring) == (3, 1, 2)
    assert counts.modules_over_400_lines == ["pkg/beta.py"]
    assert counts.functions == 2 and counts.function_lines_median == 2.5
    assert (counts.modules_with_test_module, counts.modules_testable) == (1, 3)
