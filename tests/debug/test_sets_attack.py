"""A debug set's wrapper never brings a shell in (issue 31's sweep): a shell behind a program
that runs its arguments (`nice sh -c`, `timeout 9 bash -c`) or one the list did not name (ash)."""

from __future__ import annotations

from pathlib import Path

import pytest

from diagbench.debug.sets import load_sets
from diagbench.errors import SpecError


@pytest.mark.parametrize(
    ("wrap", "shell"),
    [("[nice, sh, -c, 'rm -rf ~']", "sh"), ("[timeout, '9', /bin/bash, -c, x]", "/bin/bash"), ("[ash, -c, x]", "ash")],
)
def test_a_wrapper_that_starts_a_shell_is_refused_at_its_line(tmp_path: Path, wrap: str, shell: str) -> None:
    path = tmp_path / "mine.yaml"
    path.write_text(f"server: any\nsets:\n  - {{id: x, for: [oom], wrap: {wrap}, source: s}}\n")
    with pytest.raises(SpecError) as caught:
        load_sets([path])
    assert f"mine.yaml:3: sets[0].wrap: {shell} is a shell, not a tool that runs the command" in str(caught.value)


def test_a_sanitizer_wrapper_is_still_taken(tmp_path: Path) -> None:
    path = tmp_path / "mine.yaml"
    path.write_text(
        "server: any\nsets:\n  - {id: x, for: [oom], wrap: [compute-sanitizer, --tool, memcheck], source: s}\n"
    )
    (found,) = [s for s in load_sets([path]).sets if s.id == "x"]
    assert found.wrap == ("compute-sanitizer", "--tool", "memcheck")
