"""What looks secret: names, flags and value shapes (pure predicates, no I/O).

The spec refuses a secret as a label by them; `records.redact` blanks secrets by them.
A name is secret when its last word is a secret word: `HF_TOKEN`, `OPENAI_API_KEY`,
`--api-key`, `--hf-token`, `--password`, `MYSQL_PWD`, `DB_PASS`; not `MAX_TOKENS`, `--tokenizer`,
`HF_TOKEN_PATH`, `PWD` or `BYPASS`.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence

__all__ = [
    "REDACTED",
    "SECRET_URL",
    "SHAPE",
    "holds_secret",
    "looks_secret",
    "secret_flag",
    "secret_name",
    "secret_template",
    "token_start",
    "tokens",
]

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
_AFTER_CONTROL = re.compile(r"\[[0-9;]{0,12}[A-Za-z]\Z")
# Each vendor's documented token format; a shape ends where its token's characters end, so a
# parameter named like a prefix (`hf_overrides=None`) is not a token. Where one may begin is
# `token_start`'s to say (a lookbehind for it here would cost every search its speed).
SHAPE = re.compile(
    r"(?:"
    # Hugging Face: `hf_` + 34 letters and digits (https://huggingface.co/docs/hub/security-tokens;
    # the length as GitHub's secret scanning partner pattern has it); `api_org_` the organisation tokens'
    r"(?:hf_|api_org_)[A-Za-z0-9]{34,}"
    r"|sk-[A-Za-z0-9_-]{8,}"  # OpenAI, Anthropic (sk-ant-), and their imitators
    # Stripe: secret and restricted keys, live and test (https://docs.stripe.com/keys#obtain-api-keys)
    r"|[sr]k_(?:live|test)_[A-Za-z0-9]{16,}"
    r"|gh[pousr]_[A-Za-z0-9]{8,}|github_pat_[A-Za-z0-9_]{8,}"  # GitHub
    r"|glpat-[A-Za-z0-9_-]{8,}"  # GitLab
    r"|nvapi-[A-Za-z0-9_-]{8,}"  # NVIDIA NGC / build.nvidia.com
    r"|xox[abprs]-[A-Za-z0-9-]{8,}"  # Slack tokens
    # PyPI API tokens: `pypi-` + a macaroon (https://pypi.org/help/#apitoken), serialized version 2
    # (base64 `AgE`, then its location: `AgEIcHlwaS5vcmc` is pypi.org, `AgENdGVzdC5weXBpLm9yZw` TestPyPI)
    r"|pypi-AgE[A-Za-z0-9_-]{32,}"
    # Google API keys: `AIza` + 35 characters (https://cloud.google.com/docs/authentication/api-keys)
    r"|AIza[0-9A-Za-z_-]{35}"
    r"|AKIA[0-9A-Z]{16}"  # AWS access key id
    r"|eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]*"  # a JWT: base64url '{"' header
    r")"
    r"(?![A-Za-z0-9])"
)
# URLs that are secrets themselves (whoever holds one can post with it); group `secret` is the part to blank
SECRET_URL = re.compile(
    # a Slack incoming webhook or workflow trigger (https://api.slack.com/messaging/webhooks):
    # hooks.slack.com/services/T.../B.../<secret>; the path after the host is the secret
    r"hooks\.slack\.com/(?P<secret>(?:services|workflows|triggers)/[A-Za-z0-9/_-]{8,})"
    # a Sentry DSN's keys (https://docs.sentry.io/concepts/key-terms/dsn-explainer/):
    # scheme://PUBLIC_KEY[:SECRET_KEY]@HOST/PROJECT; any URL user name that long is a token
    r"|://(?P<user>[A-Za-z0-9_-]{20,}(?::[A-Za-z0-9_-]+)?)@"
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
    """A value shaped like a token (`hf_...`, `sk-...`, a JWT, a Slack webhook), whatever its name."""
    return next(tokens(SHAPE, value), None) is not None or bool(SECRET_URL.search(value))


def tokens(pattern: re.Pattern[str], text: str) -> Iterator[re.Match[str]]:
    """Each match of `pattern` in `text` that begins a token (see `token_start`)."""
    pos = 0
    while (found := pattern.search(text, pos)) is not None:
        if token_start(text, found.start()):
            yield found
            pos = max(found.end(), found.start() + 1)
        else:
            pos = found.start() + 1


def token_start(text: str, at: int) -> bool:
    """Whether a token may begin at `at`: not inside a word, but right after a terminal control
    sequence (a colour `\\x1b[31m`, `\\x1b[1;38;5;9m`, a clear `\\x1b[2J`; raw or shown as an
    escape), as coloured logs print one."""
    return at == 0 or not text[at - 1].isalnum() or _AFTER_CONTROL.search(text, max(0, at - 16), at) is not None


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
