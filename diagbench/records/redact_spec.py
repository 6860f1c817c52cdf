"""A spec's source text with its secrets blanked where the YAML puts them (the manifest's
`spec_text`): each blanked scalar rewritten in place, so the rest stays as written."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import TYPE_CHECKING

from diagbench.records.redact import Redactor
from diagbench.sensitive import REDACTED, secret_flag, secret_name, secret_template

if TYPE_CHECKING:  # yaml is loaded by a spec's text alone
    import yaml

__all__ = ["redact_yaml"]

_PLACEHOLDER = re.compile(r"^\{\w+\}$")  # an args template's "{value}" is not a secret itself


def redact_yaml(text: str, redactor: Redactor) -> str:
    """A spec's source with its secrets blanked where the YAML puts them: values of
    secret-named `env` entries, the values of an axis that sets a secret variable or flag,
    secret flags' values in commands and env values, secret-named keys' values in a ready
    request's `json`; then known values, shapes and query parameters anywhere (comments too).
    Each blanked scalar is rewritten in place, so the rest of the text stays as written."""
    import yaml

    try:
        root = yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.YAMLError:
        return redactor.log(text)
    walk = _SpecWalk(text, redactor)
    if root is not None:
        walk.node(root, secret=False)
    for start in sorted(walk.edits, reverse=True):
        end, replacement = walk.edits[start]
        text = text[:start] + replacement + text[end:]
    return redactor.text(text)


class _SpecWalk:
    """Finds the scalars of a composed spec that hold secrets, as text edits."""

    def __init__(self, text: str, redactor: Redactor):
        self.text, self.redactor = text, redactor
        self.edits: dict[int, tuple[int, str]] = {}  # start -> (end, replacement)

    def node(self, node: yaml.Node, secret: bool, argv: bool = False, body: bool = False) -> None:
        """Walk `node`; `secret`: its scalars are secrets; `argv`: they are command words (or env
        values, which may hold some); `body`: it is a JSON body, whose secret-named keys hide values."""
        import yaml

        if isinstance(node, yaml.ScalarNode):
            self.scalar(node, secret, argv)
        elif isinstance(node, yaml.SequenceNode):
            hide_next = False
            for item in node.value:
                self.node(item, secret or hide_next, argv, body)
                hide_next = isinstance(item, yaml.ScalarNode) and secret_flag(item.value) and "=" not in item.value
        elif isinstance(node, yaml.MappingNode):
            pairs = [(str(k.value) if isinstance(k, yaml.ScalarNode) else "", v) for k, v in node.value]
            axis_secret = _secret_axis(dict(pairs))
            for key, value in pairs:
                if key == "env" and isinstance(value, yaml.MappingNode):
                    for name, entry in value.value:
                        self.node(entry, secret or secret_name(str(name.value)), argv=True)
                else:
                    hide = secret or (key == "values" and axis_secret) or (body and secret_name(key))
                    json_text = key == "json" and isinstance(value, yaml.ScalarNode)  # `json: '{"key": "X"}'`
                    self.node(value, hide, argv or key in _WORD_KEYS or json_text, body or key == "json")

    def scalar(self, node: yaml.ScalarNode, secret: bool, argv: bool) -> None:
        value = str(node.value)
        if node.tag.endswith((":null", ":bool")) or not value:
            return
        if secret and not _PLACEHOLDER.match(value):
            new = REDACTED
        else:  # a command word may hold `HF_TOKEN=X`; prose (a claim) is left to the shapes
            new = self.redactor.log(value) if argv else self.redactor.command(value)
        if new == value:
            return
        start, end = node.start_mark.index, node.end_mark.index
        span = self.text[start:end]
        trailing = span[len(span.rstrip()) :]  # a block scalar's span ends with its line breaks
        self.edits[start] = (end, json.dumps(new) + trailing)  # JSON strings are YAML double-quoted scalars


_WORD_KEYS = ("command", "args", "values")  # scalars that may hold `--f X` or `NAME=X`


def _secret_axis(keys: Mapping[str, yaml.Node]) -> bool:
    """A matrix axis (`{env: HF_TOKEN, values: ...}`, `{args: [--api-key, "{value}"], ...}`)
    whose values are secrets."""
    import yaml

    env, args = keys.get("env"), keys.get("args")
    if isinstance(env, yaml.ScalarNode) and secret_name(str(env.value)):
        return True
    if isinstance(args, yaml.SequenceNode):
        return secret_template([str(n.value) for n in args.value if isinstance(n, yaml.ScalarNode)])
    return isinstance(args, yaml.ScalarNode) and secret_template(str(args.value).split())
