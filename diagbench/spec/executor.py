"""Where attempts run: the spec's `executor:` section, and the command line's options over it.

executor: KIND                           # short for {kind: KIND}
executor:
  kind: KIND                             # local (the default); any other is a plugin's (execute/executors.py)
  KEY: VALUE                             # that kind's own keys (docs/executors.md lists each kind's)

This room knows no kind but `local`: a kind's keys and what each must be are its plugin's
(`ExecutorKey`, read in execute/choice.py before anything runs). Here a setting is kept as
written, with the place it was written (file:line and field, an option, a manifest), so a
mistake found later still names that place.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import Enum
from typing import TYPE_CHECKING, Any

from diagbench.errors import SpecError, UserError
from diagbench.jsonvalue import JSON

if TYPE_CHECKING:  # the settings are read by every command line (--executor), which loads no YAML
    from diagbench.yamlsrc import Src

__all__ = ["LOCAL", "ExecutorKey", "ExecutorSpec", "KeyType", "Setting", "command_line_settings", "parse_executor"]

LOCAL = "local"  # process trees on this host: the default, and the only kind this room names


@dataclass(frozen=True)
class Setting:
    """One executor setting as given, and where: a spec's file, line and field, or an option's flag."""

    value: Any  # a string, or a list of strings (a spec's scalars as written; a repeated option)
    path: str  # `executor.time` in a spec, `--KIND-time` on the command line, `options.executor.time` recorded
    file: str = ""  # the spec file, for a setting written in one
    line: int | None = None

    def error(self, message: str, fix: str = "") -> UserError:
        if self.file:
            return SpecError(self.file, self.line, self.path, message, fix)
        return UserError(f"{self.path}: {message}" + (f" ({fix})" if fix else ""))


class KeyType(str, Enum):
    """What an executor key's value must be."""

    STRING = "string"  # one non-empty word or line
    WORDS = "words"  # a list of strings (one alone is a list of one)
    DURATION = "duration"  # `90m`, `2h`, seconds
    INTEGER = "integer"


@dataclass(frozen=True)
class ExecutorKey:
    """One key a kind takes under `executor:`, and the command-line option over it (if any)."""

    name: str
    type: KeyType
    what: str  # `a partition name`: said in a mistake's message
    adds: bool = False  # WORDS: a later layer adds to the earlier ones' (else it replaces them)

    def read(self, setting: Setting) -> Any:
        """The typed value: str, tuple[str, ...], float seconds, or int; a UserError naming its place."""
        value = setting.value
        if self.type is KeyType.WORDS:
            items = value if isinstance(value, (list, tuple)) else [value]
            if not all(isinstance(i, str) and i.strip() for i in items):
                raise setting.error(f"expected {self.what} or a list of them, got {value!r}")
            return tuple(items)
        if self.type is KeyType.DURATION:
            return _duration(setting)
        if not isinstance(value, str) or not value.strip():
            raise setting.error(f"expected {self.what}, got {value!r}")
        if self.type is KeyType.INTEGER:
            if not value.strip().isdigit():
                raise setting.error(f"expected {self.what}, got {value!r}")
            return int(value)
        return value


def _duration(setting: Setting) -> float:
    from diagbench.yamlsrc import parse_duration

    value = setting.value
    seconds = float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None
    if isinstance(value, str):
        seconds = parse_duration(value)
    if seconds is None or seconds <= 0:
        shown = f'"{value}"' if setting.file else repr(value)
        raise setting.error(f"expected a positive duration like 90s, 8m or 1h, got {shown}")
    return seconds


@dataclass(frozen=True)
class ExecutorSpec:
    """Executor settings, one layer (the spec's, a resumed run's, the command line's) or merged.
    `kind` None means "not given here"; `settings` holds the kind's own keys as given."""

    kind: str | None = None
    settings: Mapping[str, Setting] = field(default_factory=dict)
    kind_at: Setting | None = field(default=None, compare=False)  # where the kind was written (for messages)

    def over(self, base: ExecutorSpec, adding: frozenset[str] = frozenset()) -> ExecutorSpec:
        """These settings where given, `base`'s elsewhere; the keys in `adding` add to base's
        (sbatch takes the last of a repeated option, so the later layer still wins)."""
        merged = dict(base.settings)
        for key, setting in self.settings.items():
            if key in adding and key in merged:
                setting = Setting([*_listed(merged[key].value), *_listed(setting.value)], setting.path)
            merged[key] = setting
        return ExecutorSpec(self.kind or base.kind, merged, self.kind_at if self.kind else base.kind_at)

    @property
    def resolved_kind(self) -> str:
        return self.kind or LOCAL

    def given(self) -> list[str]:
        """The keys given, in order."""
        return list(self.settings)

    def read(self, key: ExecutorKey) -> Any:
        """The key's typed value, or None (WORDS: ()) where it was not given."""
        setting = self.settings.get(key.name)
        if setting is None:
            return () if key.type is KeyType.WORDS else None
        return key.read(setting)

    def to_json(self) -> dict[str, JSON]:
        """The kind and its settings as given (a spec's, in the manifest's copy of the spec)."""
        return {"kind": self.resolved_kind, **{k: s.value for k, s in self.settings.items()}}


def _listed(value: Any) -> list[Any]:
    return list(value) if isinstance(value, (list, tuple)) else [value]


def parse_executor(src: Src) -> ExecutorSpec:
    """`executor: KIND`, or a mapping: `kind` (default: the one other than local that the keys
    belong to is for the plugins to say; a mapping without `kind` is not local) and the kind's keys."""
    if not src.is_mapping():
        return ExecutorSpec(_word(src, "an executor kind"), kind_at=_setting(src, src.string("an executor kind")))
    keys = src.mapping()
    kind_src = keys.pop("kind", None)
    kind = _word(kind_src, "an executor kind") if kind_src is not None else None
    settings = {name: _setting(value, _plain(value)) for name, value in keys.items()}
    kind_at = _setting(kind_src, kind) if kind_src is not None else None
    return ExecutorSpec(kind, settings, kind_at)


def _word(src: Src, what: str) -> str:
    word = src.string(what)
    if not word.replace("-", "").replace("_", "").isalnum():
        raise src.expected(what)
    return word


def _plain(src: Src) -> Any:
    """A setting's value as written: a scalar's text, or a list of scalars' texts."""
    if src.is_list():
        return [item.text("a single value") for item in src.items()]
    return src.text("a single value")


def _setting(src: Src, value: Any) -> Setting:
    return Setting(value, src.path, src.file, src.line)


def command_line_settings(kind: str | None, values: Mapping[str, tuple[str, Any]]) -> ExecutorSpec:
    """The command line's executor settings: `values` maps each key to (its option's flag, the
    value given or None)."""
    settings = {key: Setting(list(v) if isinstance(v, list) else v, flag) for key, (flag, v) in values.items() if v}
    return ExecutorSpec(kind or None, settings)
