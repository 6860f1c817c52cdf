"""Secrets never reach a record or a screen: names, flags and values that look secret."""

from __future__ import annotations

import re
from collections.abc import Sequence

_SECRET_NAME = re.compile(r"TOKEN|KEY|SECRET|PASSWORD|PASSWD|CREDENTIAL|AUTH|PRIVATE", re.IGNORECASE)
_SECRET_VALUE = re.compile(r"^(?:hf_|sk-|ghp_|gho_|github_pat_|xox[abp]-|AKIA)[A-Za-z0-9_-]{8,}")
REDACTED = "<redacted>"


def redact(env: dict[str, str | None]) -> dict[str, str | None]:
    """Env changes safe to write down: secret-looking names or values are replaced."""
    return {
        k: (REDACTED if v is not None and (_SECRET_NAME.search(k) or _SECRET_VALUE.match(v)) else v)
        for k, v in env.items()
    }


def redact_argv(argv: Sequence[str]) -> list[str]:
    """The command line, with values of secret-looking options (--api-key X) redacted."""
    out: list[str] = []
    for token in argv:
        if (out and out[-1].startswith("-") and _SECRET_NAME.search(out[-1])) or _SECRET_VALUE.match(token):
            out.append(REDACTED)
        elif "=" in token and token.startswith("-") and _SECRET_NAME.search(token.split("=", 1)[0]):
            out.append(token.split("=", 1)[0] + "=" + REDACTED)
        else:
            out.append(token)
    return out
