"""A package's published versions, from the configured index's JSON simple API (PEP 691/700).

The index is uv's (`UV_DEFAULT_INDEX`, `UV_INDEX_URL`), else pip's (`PIP_INDEX_URL`), else
PyPI. A version is yanked when every one of its files is (PEP 592); yanked versions are
never probed. Pre-releases are left out unless an end of the range is one.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import httpx
from packaging.utils import InvalidSdistFilename, InvalidWheelFilename, parse_sdist_filename, parse_wheel_filename
from packaging.version import InvalidVersion, Version

from diagbench.errors import UserError
from diagbench.isolate.deps import normalise

PYPI = "https://pypi.org/simple/"
INDEX_VARS = ("UV_DEFAULT_INDEX", "UV_INDEX_URL", "PIP_INDEX_URL")
_ACCEPT = "application/vnd.pypi.simple.v1+json"
_TIMEOUT_S = 30.0


def index_url(environ: Mapping[str, str] | None = None) -> str:
    environ = os.environ if environ is None else environ
    url = next((environ[v] for v in INDEX_VARS if environ.get(v)), PYPI)
    return url if url.endswith("/") else url + "/"


@dataclass(frozen=True)
class Range:
    """`--between PKG==A..B`, the versions read as PEP 440 versions."""

    package: str
    start: Version
    end: Version


def parse_between(text: str) -> Range:
    name, sep, span = text.partition("==")
    first, dots, last = span.partition("..")
    if not (sep and dots and name.strip() and first.strip() and last.strip()):
        raise UserError(f"--between {text}: expected PKG==A..B, e.g. --between packaging==21.0..22.0")
    try:
        start, end = Version(first.strip()), Version(last.strip())
    except InvalidVersion as exc:
        raise UserError(f"--between {text}: {exc}") from None
    if start >= end:
        raise UserError(f"--between {text}: {start} is not before {end} (write the working version first)")
    return Range(name.strip(), start, end)


def published(package: str, client: httpx.Client | None = None) -> dict[Version, bool]:
    """Every version with files on the index, and whether it is yanked."""
    url = index_url() + normalise(package) + "/"
    try:
        if client is None:
            with httpx.Client(timeout=_TIMEOUT_S, follow_redirects=True) as own:
                answer = own.get(url, headers={"Accept": _ACCEPT})
        else:
            answer = client.get(url, headers={"Accept": _ACCEPT})
    except httpx.HTTPError as exc:
        raise UserError(f"--between: cannot list {package}'s versions at {url}: {type(exc).__name__}: {exc}") from None
    if answer.status_code == 404:
        raise UserError(f"--between: no package {package!r} on {index_url()} (check the name)")
    if answer.status_code != 200:
        raise UserError(f"--between: {url} answered {answer.status_code}")
    try:
        files = answer.json()["files"]
    except (ValueError, KeyError):
        raise UserError(f"--between: {url} did not answer with the JSON simple API (PEP 691)") from None
    return _versions(files)


def _versions(files: Sequence[Mapping[str, Any]]) -> dict[Version, bool]:
    yanked: dict[Version, bool] = {}
    for f in files:
        version = _version_of(str(f.get("filename", "")))
        if version is not None:
            yanked[version] = yanked.get(version, True) and bool(f.get("yanked"))
    return yanked


def _version_of(filename: str) -> Version | None:
    try:
        if filename.endswith(".whl"):
            return parse_wheel_filename(filename)[1]
        return parse_sdist_filename(filename)[1]
    except (InvalidWheelFilename, InvalidSdistFilename, InvalidVersion):
        return None


def versions_between(span: Range, versions: Mapping[Version, bool]) -> tuple[list[Version], list[Version]]:
    """The versions from start to end, in order (yanked and pre-releases left out), and the yanked ones skipped."""
    for end in (span.start, span.end):
        if end not in versions:
            raise UserError(f"--between: {span.package} {end} is not published on {index_url()}")
    pre = span.start.is_prerelease or span.end.is_prerelease
    inside = sorted(v for v in versions if span.start <= v <= span.end and (pre or not v.is_prerelease))
    skipped = [v for v in inside if versions[v] and v not in (span.start, span.end)]
    return [v for v in inside if v not in skipped], skipped
