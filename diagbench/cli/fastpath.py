"""`diagbench classify --json LOG` (with `--signatures`, `--engine`, `--server`), the form
scripts and CI call, run without the command-line library: typer and click, with the
inspect, ast, datetime, subprocess and difflib modules they load, were about a third of
classify's start-up (`python -X importtime`; `benchmarks/scanbench.py startup` times it).

Any other form (another option, `--help`, standard input, the text view) and any error
(a missing log, a pack that does not load, diagbench's own failure) is left to the typer
app, which then does it all again and says what is wrong in its usual words: nothing is
written here unless the classification is done."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

__all__ = ["FastClassify", "classify_json", "parse_classify"]

ENGINES = ("auto", "hyperscan", "re")
_VALUED = ("--signatures", "--engine", "--server")


@dataclass(frozen=True)
class FastClassify:
    log: Path
    signatures: str | None = None
    engine: str = "auto"
    server: str | None = None


def parse_classify(argv: Sequence[str]) -> FastClassify | None:
    """The request, if `argv` is `classify --json LOG` with only the options above (each given
    once, as `--opt value` or `--opt=value`), else None."""
    if not argv or argv[0] != "classify":
        return None
    values: dict[str, str] = {}
    logs: list[str] = []
    as_json, words = False, list(argv[1:])
    while words:
        word = words.pop(0)
        name, eq, value = word.partition("=")
        if word == "--json" and not as_json:
            as_json = True
        elif name in _VALUED and name not in values and (eq or words):
            values[name] = value if eq else words.pop(0)
        elif word.startswith("-") or logs:  # `-` (standard input), an option typer must judge, a second log
            return None
        else:
            logs.append(word)
    engine = values.get("--engine", "auto")
    if not as_json or not logs or engine not in ENGINES:
        return None
    return FastClassify(Path(logs[0]), values.get("--signatures"), engine, values.get("--server"))


def classify_json(argv: Sequence[str]) -> int | None:
    """Classify and print as `classify --json` does; the exit code, or None where the typer
    app must do it (nothing has been written then)."""
    asked = parse_classify(argv)
    if asked is None:
        return None
    from diagbench.logs.classify import classify_file
    from diagbench.logs.server_names import server_name
    from diagbench.logs.signatures import builtin_packs, load_packs
    from diagbench.records.redact import Redactor, redact_classification
    from diagbench.render.classify import classification_as
    from diagbench.vocab import ExitCode, TextOrJson

    try:
        given = server_name(asked.server) if asked.server is not None else None
        names = [n.strip() for n in asked.signatures.split(",") if n.strip()] if asked.signatures else builtin_packs()
        sigs = load_packs(names, Path.cwd())
        result = redact_classification(classify_file(asked.log, sigs, asked.engine, given), Redactor.of())
        text = classification_as(result, TextOrJson.JSON, [], given is not None)
    except KeyboardInterrupt:
        print("diagbench: interrupted", file=sys.stderr)
        return int(ExitCode.INTERRUPTED)
    except Exception:  # noqa: BLE001  # the typer app does it again and says what went wrong, as ever
        return None
    assert isinstance(text, str)  # the JSON view is a document
    from diagbench.render.console import write_document

    write_document(text)
    return CLASSIFY_EXIT[result.outcome]


CLASSIFY_EXIT = {"ready": 0, "failed": 1, "unknown": 3}  # scripts branch on it: `if diagbench classify x.log`
