"""The docs say what diagbench does: every command in a `console` block of the reference pages
is run, and the output shown is the output produced (`DIAGBENCH_UPDATE_DOCS=1` rewrites it).

The marker for an abridged output is a line holding only `…`: the lines shown must then
appear in the output, in order, with anything in between. `  # exit N` after a command is
the exit code it must end with (default 0). Commands run from the repository root at 100
columns, stdout and stderr as a terminal shows them; the root's path is shown as `.`.

The README's first screen is checked the same way: its first code block's commands are
what a new user pastes (the install is run by .ci/readme.sh in a fresh clone)."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
REFERENCE = sorted((ROOT / "docs" / "reference").glob("*.md"))
RUN_PAGES = [*REFERENCE, ROOT / "docs" / "tutorial.md"]  # pages whose console blocks are run and compared
ABRIDGED = "…"
COLUMNS = "100"
_BLOCK = re.compile(r"^```(\w*)[^\n]*\n(.*?)^```$", re.M | re.S)
_EXIT = re.compile(r"\s+# exit (\d+)$")


@dataclass(frozen=True)
class Shown:
    """One command of a console block and the output the page shows for it."""

    page: Path
    command: str
    output: list[str]

    @property
    def argv(self) -> list[str]:
        return shlex.split(_EXIT.sub("", self.command))

    @property
    def exit_code(self) -> int:
        found = _EXIT.search(self.command)
        return int(found.group(1)) if found else 0

    @property
    def abridged(self) -> bool:
        return ABRIDGED in self.output


def console_blocks(text: str) -> list[tuple[int, int, str]]:
    """(start, end, body) of each ```console block, offsets into `text`."""
    return [(m.start(2), m.end(2), m.group(2)) for m in _BLOCK.finditer(text) if m.group(1) == "console"]


def commands(page: Path, body: str) -> list[Shown]:
    shown: list[Shown] = []
    for line in body.splitlines():
        if line.startswith("$ "):
            shown.append(Shown(page, line[2:], []))
        elif shown:
            shown[-1].output.append(line)
    return shown


def produced(shown: Shown) -> tuple[int, list[str]]:
    argv = shown.argv
    assert argv[0] == "diagbench", f"{shown.page.name}: only diagbench commands run here: {shown.command}"
    done = subprocess.run(
        [sys.executable, "-m", "diagbench", *argv[1:]],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "COLUMNS": COLUMNS, "NO_COLOR": "1", "TERM": "dumb"},
    )
    text = (done.stdout + done.stderr).replace(f"{ROOT}/", "").replace(str(ROOT), ".")
    return done.returncode, [line.rstrip() for line in text.splitlines()]


def matches(shown: Shown, lines: list[str]) -> bool:
    if not shown.abridged:  # words and their order; where a long line wraps depends on this checkout's path
        return " ".join(shown.output).split() == " ".join(lines).split()
    wanted = iter(lines)
    return all(any(line.rstrip() == got for got in wanted) for line in shown.output if line != ABRIDGED)


def everything() -> list[Shown]:
    return [
        shown for page in RUN_PAGES for _, _, body in console_blocks(page.read_text()) for shown in commands(page, body)
    ]


def test_the_reference_pages_show_commands() -> None:
    assert len(everything()) >= 8  # a parser that finds nothing would pass everything
    assert any(shown.page.name == "tutorial.md" for shown in everything())  # the tutorial's are run too


@pytest.mark.parametrize("shown", everything(), ids=lambda s: f"{s.page.stem}: {s.command[:60]}")
def test_a_command_in_the_reference_prints_what_the_page_shows(shown: Shown) -> None:
    code, lines = produced(shown)
    assert code == shown.exit_code, "\n".join(lines)
    if os.environ.get("DIAGBENCH_UPDATE_DOCS") == "1" and not shown.abridged:
        _rewrite(shown, lines)
        return
    assert matches(shown, lines), "\n".join(["shown:", *shown.output, "produced:", *lines])


def test_the_reference_pages_hide_no_command_outside_a_console_block() -> None:
    for page in REFERENCE:
        for m in _BLOCK.finditer(page.read_text()):
            if m.group(1) != "console":
                assert m.group(1) not in ("bash", "sh", "shell"), f"{page.name}: a {m.group(1)} block: use console"
                assert not re.search(r"^\$ ", m.group(2), re.M), f"{page.name}: '$ ' outside a console block"


def test_the_abridged_marker_is_a_real_check() -> None:
    page = ROOT / "docs" / "x.md"
    assert matches(Shown(page, "diagbench x", ["a", ABRIDGED, "c"]), ["a", "b", "c"])
    assert not matches(Shown(page, "diagbench x", ["a", ABRIDGED, "d"]), ["a", "b", "c"])
    assert not matches(Shown(page, "diagbench x", ["c", ABRIDGED, "a"]), ["a", "b", "c"])  # in order
    assert not matches(Shown(page, "diagbench x", ["a", "c"]), ["a", "b", "c"])  # unabridged: whole


def _rewrite(shown: Shown, lines: list[str]) -> None:
    text = shown.page.read_text()
    for start, end, body in console_blocks(text):
        if f"$ {shown.command}\n" in body:
            parts = [(s.command, s.output) for s in commands(shown.page, body)]
            new = "".join(
                f"$ {command}\n" + "".join(f"{line}\n" for line in (lines if command == shown.command else output))
                for command, output in parts
            )
            shown.page.write_text(text[:start] + new + text[end:])
            return


# -- the README's first screen ------------------------------------------------------------


def first_screen() -> list[str]:
    """The commands of the README's first code block, each `&&` part on its own."""
    text = (ROOT / "README.md").read_text()
    head = text.splitlines()[:40]
    block = _BLOCK.search("\n".join(head) + "\n")
    assert block is not None, "the README's first screen shows no command"
    lines = [line for line in block.group(2).splitlines() if line.strip() and not line.startswith("#")]
    return [part.strip() for line in lines for part in line.split("&&")]


def test_the_readme_first_screen_installs_runs_the_demo_and_the_tests() -> None:
    parts = first_screen()
    assert "python3 -m venv .venv" in parts
    assert any(p.startswith(".venv/bin/pip install") for p in parts)
    assert ".venv/bin/diagbench run experiments/demo.yaml" in parts
    assert any(p.startswith(".venv/bin/python -m pytest -q") for p in parts)


def test_the_readme_first_screen_demo_runs(tmp_path: Path) -> None:
    """The diagbench commands of the first screen, with this checkout's diagbench (the install
    itself is .ci/readme.sh's, in a fresh clone)."""
    runs = [shlex.split(p) for p in first_screen() if p.startswith(".venv/bin/diagbench ")]
    assert runs
    for argv in runs:
        done = subprocess.run(
            [sys.executable, "-m", "diagbench", *argv[1:], "--runs-dir", str(tmp_path)],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=300,
            env={**os.environ, "COLUMNS": "80"},
        )
        assert done.returncode == 0, done.stderr
        tables = done.stdout.split("demo-compile-isolation: outcomes", 1)[1]  # progress lines: one each, unwrapped
        assert all(len(line) <= 80 for line in tables.splitlines() if str(tmp_path) not in line), tables


def test_every_link_of_the_readme_leads_to_a_file_of_the_repository() -> None:
    links = re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", (ROOT / "README.md").read_text())
    local = [link for link in links if not link.startswith(("http://", "https://"))]
    assert len(local) >= 20
    assert [link for link in local if not (ROOT / link).is_file()] == []


def test_the_readme_fits_on_a_few_screens() -> None:
    assert len((ROOT / "README.md").read_text().splitlines()) <= 250


# -- the commands reference is complete ---------------------------------------------------


def test_every_command_and_option_of_help_is_in_the_commands_reference() -> None:
    import typer

    from diagbench.cli.app import app

    group = typer.main.get_command(app)
    text = (ROOT / "docs" / "reference" / "commands.md").read_text()
    missing = []
    for name, command in group.commands.items():  # type: ignore[attr-defined]  # a click group
        if command.hidden:
            continue
        if f"diagbench {name}" not in text:
            missing.append(f"diagbench {name}")
        for param in command.params:
            names = [o for o in (*param.opts, *param.secondary_opts) if o.startswith("--") and o != "--help"]
            if param.param_type_name == "option" and names and not any(n in text for n in names):
                missing.append(f"diagbench {name} {names[0]}")
    assert not missing, f"docs/reference/commands.md does not name: {', '.join(missing)}"


def test_the_spec_reference_names_every_placeholder() -> None:
    from diagbench.spec.checks import COMMAND_PLACEHOLDERS, ENV_PLACEHOLDERS

    text = (ROOT / "docs" / "reference" / "spec.md").read_text()
    for name in (*COMMAND_PLACEHOLDERS, *ENV_PLACEHOLDERS, "value"):
        assert f"`{{{name}}}`" in text, f"docs/reference/spec.md does not document {{{name}}}"


def test_classify_s_two_meanings_of_3_are_told_apart_in_the_exit_codes_page() -> None:
    text = " ".join((ROOT / "docs" / "reference" / "exit-codes.md").read_text().split())
    assert "the one command where 3 has two meanings" in text and '`outcome` is `"unknown"`' in text
