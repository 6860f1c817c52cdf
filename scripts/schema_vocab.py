"""Write diagbench/schemas/vocab.json from diagbench/vocab.py (the outcomes, the failure classes,
a spec's outcome conditions): run it after adding a word there. `--check` exits 1 if it is stale."""

from __future__ import annotations

import sys
from pathlib import Path

from diagbench.schemas import VOCAB, vocabulary_text

__all__ = ["main"]

TARGET = Path(__file__).resolve().parent.parent / "diagbench" / "schemas" / VOCAB


def main(argv: list[str]) -> int:
    text = vocabulary_text()
    if "--check" in argv:
        stale = not TARGET.is_file() or TARGET.read_text(encoding="utf-8") != text
        print(f"{TARGET}: {'stale: run python scripts/schema_vocab.py' if stale else 'up to date'}")
        return int(stale)
    TARGET.write_text(text, encoding="utf-8")
    print(f"wrote {TARGET}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
