"""One escaping policy for every output: text that came from a server, a spec, a pack or
another user's process (log lines, reasons, labels, names, process titles) is made safe for
the place it is shown, by one function per place, applied to the value (never to a layout).

A server's log can hold escape sequences that clear the screen, set the window title (OSC)
or move the cursor (CSI), NUL and other control bytes that XML cannot carry, and
bidirectional overrides (U+202A-U+202E, U+2066-U+2069) that make a line read differently
from what it holds. So:

- terminal, Markdown, GitHub annotations, stored reasons: each such character is *shown* as
  an escape (`\\x1b`, `\\u202e`), never obeyed; line breaks only where the place allows them;
- Markdown also escapes what would become markup there: `<`, `>`, `&` (no raw HTML), `|`
  (a table's cell), backticks, and the emphasis and link characters; and it pings no one: an
  `@name`, `#123` or `GH-123` gets a zero-width space (`&#8203;`, as Renovate's and Dependabot's
  pull requests do), so pasted into an issue it neither notifies a person nor links an issue;
  a code block's fence is longer than any run of backticks inside it (`fence`);
- XML (JUnit): shown as escapes too (XML 1.0 cannot carry most of them; a CI reader shows
  the text), and the XML writer escapes `<`, `>`, `&` and quotes;
- HTML: removed (a page cannot show them as what they are), then `<`, `>`, `&` (and quotes,
  in attributes) are escaped.
"""

from __future__ import annotations

import re

__all__ = [
    "annotation",
    "fence",
    "html",
    "markdown",
    "markdown_code",
    "markdown_line",
    "one_line",
    "strip_unsafe",
    "terminal",
    "xml",
]

# C0 and C1 controls, DEL, zero-width and bidirectional formatting characters, lone
# surrogates (from undecodable bytes) and the two non-characters XML refuses
_UNSAFE = re.compile("[\x00-\x1f\x7f-\x9f\u200b-\u200f\u202a-\u202e\u2060-\u2069\ufeff\ud800-\udfff\ufffe\uffff]")
# a backslash that would escape the punctuation after it, code and emphasis marks, a table's
# pipe, and the `](` that makes a link or an image
_MARKDOWN = re.compile(r"(\\(?=[!-/:-@\[-`{-~])|[`*|]|(?<=\])\()")
# what GitHub turns into a notification or a cross-reference: @user, @org/team, #123, GH-123, owner/repo#123
_PINGS = re.compile(r"@(?=[\w-])|#(?=\d)|(?<!\w)GH-(?=\d)")
_BACKTICKS = re.compile(r"`+")
# a line that would open a block of its own (a heading, a quote, a list, a rule, a table's row)
_BLOCK_START = re.compile(r"^\s*(?:(?P<mark>[#+=~-])|\d+(?P<number>[.)]))")


def terminal(text: str, keep: str = "\t\n") -> str:
    """`text` with every control or formatting character but those in `keep` written as an escape."""
    return _UNSAFE.sub(lambda m: m.group() if m.group() in keep else _escape(m.group()), text)


def one_line(text: str) -> str:
    """For a table cell, a title, a stored reason: every control character shown, line breaks too."""
    return terminal(text, keep="")


def markdown(text: str) -> str:
    """For Markdown (reports, the GitHub step summary, issues): one line, no markup of its own."""
    import html as _html  # here, not above: html.entities costs every command's start-up 1 ms

    shown = terminal(text.replace("\r\n", "\n").replace("\n", " "), keep="")
    shown = _html.escape(shown, quote=False)  # `<script>` is text, not HTML GitHub would render
    return _PINGS.sub(lambda m: m.group() + "&#8203;", _MARKDOWN.sub(r"\\\1", shown))


def markdown_line(text: str) -> str:
    """`markdown`, for text that begins a line: a heading's `#`, a quote's `>`, a list's `-` or
    `1.` it begins with is escaped, so the line stays a paragraph."""
    shown = markdown(text).lstrip()
    found = _BLOCK_START.match(shown)
    if found is None:
        return shown
    at = found.start("mark") if found.group("mark") else found.start("number")  # `\#`, `1\.`
    return shown[:at] + "\\" + shown[at:]


def fence(lines: list[str], info: str = "") -> list[str]:
    """A Markdown code block holding `lines` as written: its fence is longer than any run of
    backticks in them (a fence closes only on one at least as long), and each line's control
    characters are shown as escapes (a line break inside one cannot start a line)."""
    shown = [terminal(line, keep="\t") for line in lines]
    longest = max((len(run) for line in shown for run in _BACKTICKS.findall(line)), default=0)
    mark = "`" * max(3, longest + 1)
    return [mark + info, *shown, mark]


def markdown_code(text: str) -> str:
    """For inside a Markdown code span: no backtick can end it, no pipe a table's cell (GitHub
    reads `\\|` there as `|`), no control character passes; `<` is literal in a code span."""
    return terminal(text.replace("\n", " "), keep="").replace("`", "'").replace("|", "\\|")


def annotation(text: str, prop: bool = False) -> str:
    """For a GitHub workflow command: escapes shown, then its own escapes (%, CR, LF; `:` `,` in a property)."""
    text = terminal(text, keep="\r\n").replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")
    return text.replace(":", "%3A").replace(",", "%2C") if prop else text


def strip_unsafe(text: str, keep: str = "\t\n") -> str:
    """`text` without control and formatting characters (but those in `keep`)."""
    return _UNSAFE.sub(lambda m: m.group() if m.group() in keep else "", text)


def xml(text: str) -> str:
    """For XML 1.0 text and attributes (JUnit): what XML cannot carry shown as escapes; the writer escapes the rest."""
    return terminal(text, keep="\t\n\r")


def html(text: str, quote: bool = False) -> str:
    """For HTML text (and attributes, with `quote`): unsafe characters removed, markup escaped."""
    import html as _html

    return _html.escape(strip_unsafe(text), quote=quote)


def _escape(char: str) -> str:
    code = ord(char)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"
