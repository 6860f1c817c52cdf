"""Tests that install real packages from PyPI: skipped, with the reason, where it cannot be reached."""

from __future__ import annotations

import functools
import os

import httpx
import pytest

INDEX = os.environ.get("UV_INDEX_URL") or "https://pypi.org/simple/"


@functools.cache
def unreachable() -> str | None:
    try:
        answer = httpx.get(INDEX + "packaging/", timeout=10, follow_redirects=True)
    except httpx.HTTPError as exc:
        return f"PyPI ({INDEX}) cannot be reached: {type(exc).__name__}: {exc}"
    return None if answer.status_code == 200 else f"PyPI ({INDEX}) answered {answer.status_code}"


def need_pypi() -> None:
    if (why := unreachable()) is not None:
        pytest.skip(f"needs PyPI to install real packages: {why}")
