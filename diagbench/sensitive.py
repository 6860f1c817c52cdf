"""What looks secret: names, flags and value shapes (pure predicates, no I/O).

The spec refuses a secret as a label by them; `records.redact` blanks secrets by them.
A name is secret when its last word is a secret word: `HF_TOKEN`, `OPENAI_API_KEY`,
`--api-key`, `--hf-token`, `--password`, `MYSQL_PWD`, `DB_PASS`; not `MAX_TOKENS`, `--tokenizer`,
`HF_TOKEN_PATH`, `PWD` or `BYPASS`.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

REDACTED = "<redacted>"
_WORD = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|[0-9]+")
_SECRET_ENDINGS = (
    "token",
    "key",
    "keys",
    "secret",
    "secrets",
    "password",
    "passwords",
    "passwd",
    "passphrase",
    "credential",
    "credentials",
)
_SECRET_WORDS = frozenset({"auth", "authorization", "pat", "cookie"})
# secret only as the last of two or more words, and only whole: `MYSQL_PWD`, `DB_PASS`, `--db-pass`;
# not the shell's `PWD` or `OLDPWD`, nor `BYPASS` or `COMPASS`
_SECRET_LAST_WORDS = frozenset({"pass", "pwd"})
SHAPE = re.compile(
    r"(?<![A-Za-z0-9])(?:"
    r"hf_[A-Za-z0-9]{8,}"  # Hugging Face
    r"|sk-[A-Za-z0-9_-]{8,}"  # OpenAI, Anthropic (sk-ant-), and their imitators
    r"|gh[pousr]_[A-Za-z0-9]{8,}|github_pat_[A-Za-z0-9_]{8,}"  # GitHub
    r"|glpat-[A-Za-z0-9_-]{8,}"  # GitLab
    r"|nvapi-[A-Za-z0-9_-]{8,}"  # NVIDIA NGC / build.nvidia.com
    r"|xox[abprs]-[A-Za-z0-9-]{8,}"  # Slack
    r"|AKIA[0-9A-Z]{16}"  # AWS access key id
    r"|eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]*"  # a JWT: base64url '{"' header
    r")"
)


def secret_name(name: str) -> bool:
    """A variable or flag named like a secret: its last word is token, key, password, ..."""
    words = [w.lower() for w in _WORD.findall(name) if not w.isdigit()]
    if not words:
        return False
    last = words[-1]
    return last.endswith(_SECRET_ENDINGS) or last in _SECRET_WORDS or (len(words) > 1 and last in _SECRET_LAST_WORDS)


def secret_flag(token: str) -> bool:
    """`--api-key`, `--hf-token=...`: an option whose value is a secret."""
    return token.startswith("-") and secret_name(token.partition("=")[0])


def secret_template(tokens: Sequence[str], slot: str = "{value}") -> bool:
    """Whether an args template puts `{value}` where a secret flag's value goes."""
    for index, token in enumerate(tokens):
        flag, eq, rest = token.partition("=")
        if secret_flag(flag) and ((eq and slot in rest) or (index + 1 < len(tokens) and slot in tokens[index + 1])):
            return True
    return False


def looks_secret(value: str) -> bool:
    """A value shaped like a token (`hf_...`, `sk-...`, a JWT), whatever its name."""
    return bool(SHAPE.search(value))


def holds_secret(value: str) -> bool:
    """A value that carries a secret: a token shape, or a secret flag or name given a value
    among its words (`--api-key X`, `--token=X`, `HF_TOKEN=X`), as an env value may."""
    if looks_secret(value):
        return True
    words = value.split()
    for index, word in enumerate(words):
        name, eq, rest = word.partition("=")
        if eq and rest and secret_name(name):
            return True
        if not eq and secret_flag(word) and index + 1 < len(words) and not words[index + 1].startswith("-"):
            return True
    return False
