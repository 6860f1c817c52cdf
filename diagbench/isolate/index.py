"""A package's published versions, from the configured index's JSON simple API (PEP 691/700).

The index is a lock file's `--index-url`, else uv's (`UV_DEFAULT_INDEX`, `UV_INDEX_URL`),
else pip's (`PIP_INDEX_URL`), else PyPI; the environments are built from that same index
(`Indexes`), so a version listed is a version uv can find. A version is yanked when every
one of its files is (PEP 592); yanked versions are never probed, nor are versions with no
file this interpreter can install (each file's `requires-python`, and a wheel's tags: an
index may list hundreds of versions built for other Pythons, each a build that fails).
Pre-releases are left out unless an end of the range is one.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import httpx
from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.tags import Tag
from packaging.utils import InvalidSdistFilename, InvalidWheelFilename, parse_sdist_filename, parse_wheel_filename
from packaging.version import InvalidVersion, Version

from diagbench.errors import UserError
from diagbench.isolate.deps import Deps, normalise
from diagbench.launch.envs import Indexes
from diagbench.records.redact import Redactor

__all__ = ["INDEX_VARS", "PYPI", "Range", "index_url", "parse_between", "published", "versions_between"]

PYPI = "https://pypi.org/simple/"
INDEX_VARS = ("UV_DEFAULT_INDEX", "UV_INDEX_URL", "PIP_INDEX_URL")
_ACCEPT = "application/vnd.pypi.simple.v1+json"
_TIMEOUT_S = 30.0
MAX_LISTING_BYTES = 64 << 20  # the largest PyPI listings (torch, every wheel of every release) are a few MB


EXTRA_VARS = ("UV_INDEX", "UV_EXTRA_INDEX_URL", "PIP_EXTRA_INDEX_URL")
_NAMED = re.compile(r"^[A-Za-z0-9_-]+=(?=[a-z][a-z0-9+.-]*://)")  # uv's `name=URL` in UV_INDEX


def index_url(environ: Mapping[str, str] | None = None) -> str:
    environ = os.environ if environ is None else environ
    url = next((environ[v] for v in INDEX_VARS if environ.get(v)), PYPI)
    return url if url.endswith("/") else url + "/"


def indexes_of(deps: Collection[Deps | None], environ: Mapping[str, str] | None = None) -> Indexes | None:
    """The indexes environments are built from: those the lock files name, else the
    environment's; None where nothing names one (then uv's own configuration decides)."""
    environ = os.environ if environ is None else environ
    named = [(kind, url) for d in deps if d is not None for kind, url in d.indexes]
    defaults = list(dict.fromkeys(url for kind, url in named if kind == "default"))
    if len(defaults) > 1:
        shown = " and ".join(Redactor.of().log(u) for u in defaults)
        raise UserError(
            f"--good-deps/--bad-deps name two --index-url ({shown}): "
            "one is the default, so make the other --extra-index-url"
        )
    given = next((environ[v] for v in INDEX_VARS if environ.get(v)), None)
    default = defaults[0] if defaults else given
    extra = [url for kind, url in named if kind == "extra"]
    extra += [_NAMED.sub("", w) for v in EXTRA_VARS for w in environ.get(v, "").split()]
    if default is None and not extra:
        return None
    return Indexes(default or PYPI, tuple(dict.fromkeys(extra)))


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


def published(
    package: str, client: httpx.Client | None = None, index: str | None = None, python: str | None = None
) -> dict[Version, bool]:
    """Every version with a file on the index that `python` (a version, e.g. 3.11.7; None:
    this one) can install, and whether it is yanked."""
    base = index or index_url()
    url = (base if base.endswith("/") else base + "/") + normalise(package) + "/"
    shown = Redactor.of().log(url)  # an index URL may carry a token
    try:
        if client is None:
            with httpx.Client(timeout=_TIMEOUT_S, follow_redirects=True) as own:
                status, body = _listing(own, url, shown)
        else:
            status, body = _listing(client, url, shown)
    except httpx.HTTPError as exc:
        why = Redactor.of().log(f"{type(exc).__name__}: {exc}")
        raise UserError(f"--between: cannot list {package}'s versions at {shown}: {why}") from None
    if status == 404:
        raise UserError(f"--between: no package {package!r} on {Redactor.of().log(base)} (check the name)")
    if status != 200:
        raise UserError(f"--between: {shown} answered {status}")
    try:
        files = json.loads(body)["files"]
    except (ValueError, KeyError, TypeError):
        files = None
    if not isinstance(files, list):
        raise UserError(f"--between: {shown} did not answer with the JSON simple API (PEP 691)")
    return _versions([f for f in files if isinstance(f, dict)], python_version(python), _tags(python))


def _listing(client: httpx.Client, url: str, shown: str) -> tuple[int, bytes]:
    """The index's answer, read up to MAX_LISTING_BYTES (an index could send gigabytes)."""
    body = bytearray()
    with client.stream("GET", url, headers={"Accept": _ACCEPT}) as answer:
        for chunk in answer.iter_bytes():
            body += chunk
            if len(body) > MAX_LISTING_BYTES:
                raise UserError(f"--between: {shown} answered more than {MAX_LISTING_BYTES >> 20} MB: not a listing")
        return answer.status_code, bytes(body)


def python_version(text: str | None) -> Version:
    import sys

    try:
        return Version(text) if text else Version(".".join(map(str, sys.version_info[:3])))
    except InvalidVersion:
        return Version(".".join(map(str, sys.version_info[:3])))


def _tags(python: str | None) -> frozenset[Tag]:
    """The wheel tags an interpreter of this host accepts (ours, or another Python version's)."""
    import sys

    from packaging import tags

    if python is None or python_version(python).release[:2] == sys.version_info[:2]:
        return frozenset(tags.sys_tags())
    major_minor = python_version(python).release[:2]
    return frozenset([*tags.cpython_tags(major_minor), *tags.compatible_tags(major_minor)])


def _versions(files: Sequence[Mapping[str, Any]], python: Version, accepted: frozenset[Tag]) -> dict[Version, bool]:
    yanked: dict[Version, bool] = {}
    for f in files:
        version = _version_of(str(f.get("filename", "")))
        if version is not None and _installable(f, python, accepted):
            yanked[version] = yanked.get(version, True) and bool(f.get("yanked"))
    return yanked


def _installable(file: Mapping[str, Any], python: Version, accepted: frozenset[Tag]) -> bool:
    """Whether this interpreter can install the file: its requires-python, and a wheel's tags."""
    needs = file.get("requires-python")
    if isinstance(needs, str) and needs.strip():
        try:
            if python not in SpecifierSet(needs):
                return False
        except InvalidSpecifier:
            pass  # the index's words, not ours: uv decides
    name = str(file.get("filename", ""))
    if not name.endswith(".whl"):
        return True  # an sdist: it may build here
    try:
        return bool(parse_wheel_filename(name)[3] & accepted)
    except (InvalidWheelFilename, InvalidVersion):
        return False


def _version_of(filename: str) -> Version | None:
    try:
        if filename.endswith(".whl"):
            return parse_wheel_filename(filename)[1]
        return parse_sdist_filename(filename)[1]
    except (InvalidWheelFilename, InvalidSdistFilename, InvalidVersion):
        return None


def versions_between(
    span: Range, versions: Mapping[Version, bool], index: str | None = None
) -> tuple[list[Version], list[Version]]:
    """The versions from start to end, in order (yanked and pre-releases left out), and the yanked ones skipped."""
    for end in (span.start, span.end):
        if end not in versions:
            where = Redactor.of().log(index or index_url())
            raise UserError(f"--between: {span.package} {end} is not published on {where} for this interpreter")
    pre = span.start.is_prerelease or span.end.is_prerelease
    inside = sorted(v for v in versions if span.start <= v <= span.end and (pre or not v.is_prerelease))
    skipped = [v for v in inside if versions[v] and v not in (span.start, span.end)]
    return [v for v in inside if v not in skipped], skipped
