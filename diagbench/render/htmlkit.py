"""A small HTML builder that escapes by construction, and the page shell of diagbench's reports.

Why not a template engine: the reports are a few nested tables and bars computed in
Python; a builder keeps that logic in typed functions, and since every `str` child and
attribute is escaped here (only `Html` passes through), a log line holding `<script>`
cannot become markup. No dependency, and nothing to keep in sync between template and code.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from importlib import resources

from diagbench import safetext

__all__ = ["CSP", "Attrs", "Html", "breakable", "code_spans", "el", "join", "page", "text", "void"]

# The page may load nothing from anywhere: styles and the script are inline, images are data.
CSP = "default-src 'none'; style-src 'unsafe-inline'; script-src 'unsafe-inline'; img-src data:"


class Html(str):
    """Text that is already markup (built here): never escaped again."""


Attrs = Mapping[str, "str | int | float | bool | None"]


def text(value: object) -> Html:
    """Escaped text; control and bidirectional characters from logs dropped (safetext.html)."""
    return Html(safetext.html(str(value)))


def breakable(value: str, after: str = ",") -> Html:
    """Escaped text that may wrap after each `after` (cell ids: `kernel=mma,compile=on`)."""
    return Html((text(after) + "<wbr>").join(text(part) for part in value.split(after)))


def code_spans(value: str) -> list[object]:
    """A sentence whose `backticked` parts (a claim's change, a flag) are code, as Markdown shows them."""
    parts = value.split("`")
    if len(parts) % 2 == 0:  # an odd backtick: no code span, shown as written
        return [value]
    return [el("code", None, part) if i % 2 else part for i, part in enumerate(parts) if part]


def el(tag: str, attrs: Attrs | None = None, *children: object) -> Html:
    """`<tag attrs>children</tag>`: str children and attribute values are escaped."""
    opening = tag + "".join(_attr(k, v) for k, v in (attrs or {}).items())
    return Html(f"<{opening}>{join(children)}</{tag}>")


def void(tag: str, attrs: Attrs | None = None) -> Html:
    """An element with no content (`<meta>`, `<br>`)."""
    return Html(f"<{tag}{''.join(_attr(k, v) for k, v in (attrs or {}).items())}>")


def join(children: Iterable[object]) -> Html:
    parts: list[str] = []
    for child in children:
        if child is None or child is False:
            continue
        if isinstance(child, Html):
            parts.append(child)
        elif isinstance(child, (str, int, float)):
            parts.append(text(child))
        else:
            parts.append(join(child))  # type: ignore[arg-type]  # nested iterables of children
    return Html("".join(parts))


def _attr(name: str, value: object) -> str:
    if value is None or value is False:
        return ""
    if value is True:
        return f" {name}"
    return f' {name}="{safetext.html(str(value), quote=True)}"'


def page(title: str, *body: object) -> str:
    """A whole self-contained document: inline CSS and script, a policy that forbids loading anything."""
    head = el(
        "head",
        None,
        void("meta", {"charset": "utf-8"}),
        void("meta", {"http-equiv": "Content-Security-Policy", "content": CSP}),
        void("meta", {"name": "viewport", "content": "width=device-width, initial-scale=1"}),
        el("title", None, title),
        el("style", None, Html(_asset("report.css"))),
    )
    return "<!doctype html>\n" + el("html", {"lang": "en"}, head, el("body", None, *body, _script())) + "\n"


def _script() -> Html:
    return el("script", None, Html(_asset("report.js")))


def _asset(name: str) -> str:
    return resources.files("diagbench.render").joinpath(f"assets/{name}").read_text(encoding="utf-8")
