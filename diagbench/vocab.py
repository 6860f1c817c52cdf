"""The words diagbench speaks at every seam: outcomes, failure classes, verdicts, match
results and exit codes. Records, verdicts and reports use these, never bare strings."""

from __future__ import annotations

import sys
from dataclasses import dataclass
from enum import Enum, IntEnum
from typing import NoReturn, Protocol

from diagbench.jsonvalue import JSON

__all__ = [
    "CONDITION_OUTCOMES",
    "FAILURE_CLASSES",
    "NOT_READY",
    "NOT_READY_OUTCOMES",
    "OUTCOMES",
    "VERDICTS",
    "DiffFormat",
    "Ended",
    "Evidence",
    "ExitCode",
    "FailureClass",
    "LogOutcome",
    "Match",
    "Outcome",
    "ReportFormat",
    "TextOrJson",
    "VerdictWord",
    "Word",
    "assert_never",
    "outcome_label",
]

if sys.version_info >= (3, 11):
    from typing import assert_never
else:  # typing's own from 3.11: a value mypy proves can never get here (a word no `match` case handled)

    def assert_never(value: NoReturn) -> NoReturn:
        raise AssertionError(f"not handled: {value!r}")


class Outcome(str, Enum):
    """How one launch ended."""

    READY = "ready"
    FAILED = "failed"
    CRASHED = "crashed"
    TIMEOUT = "timeout"
    LAUNCH_ERROR = "launch_error"
    CANCELLED = "cancelled"  # the user interrupted the run
    SKIPPED = "skipped"  # not launched: it could no longer change a verdict (or an expect failed first)
    INTERNAL_ERROR = "internal_error"  # diagbench itself failed inside this attempt (a bug to report)

    def __str__(self) -> str:
        return self.value

    @property
    def ran(self) -> bool:
        """Whether the attempt has a server outcome to judge (not cancelled, skipped or a diagbench bug)."""
        return self not in (Outcome.CANCELLED, Outcome.SKIPPED, Outcome.INTERNAL_ERROR)


OUTCOMES = tuple(o.value for o in Outcome)
# what `supported_if`, `refuted_if` and `expect` may name: outcomes a launch can end with
NOT_READY = "not_ready"  # a spec's word for "did not come up": any of NOT_READY_OUTCOMES
NOT_READY_OUTCOMES = (Outcome.FAILED, Outcome.CRASHED, Outcome.TIMEOUT, Outcome.LAUNCH_ERROR)
CONDITION_OUTCOMES = (
    *(o.value for o in Outcome if o not in (Outcome.SKIPPED, Outcome.INTERNAL_ERROR)),
    NOT_READY,
)


class Word(str, Enum):
    """A word of the vocabulary: written as itself."""

    def __str__(self) -> str:
        return str(self.value)


class FailureClass(Word):
    """Why a `failed` launch failed (the `class` of the signature that decided)."""

    CUDA_GRAPH_CAPTURE = "cuda_graph_capture"
    OOM = "oom"
    NCCL = "nccl"
    PORT_IN_USE = "port_in_use"
    TORCH_COMPILE = "torch_compile"
    TRITON = "triton"
    ILLEGAL_MEMORY_ACCESS = "illegal_memory_access"
    KILLED = "killed"
    SEGFAULT = "segfault"
    IMPORT_ERROR = "import_error"
    OTHER = "other"

    @classmethod
    def of(cls, word: str) -> FailureClass | None:
        """The class a word names, or None for a word that names none."""
        return cls._value2member_map_.get(word)  # type: ignore[return-value]


FAILURE_CLASSES = tuple(c.value for c in FailureClass)  # the words, for suggestions


class LogOutcome(Word):
    """What a finished log says on its own (`classify`): it came up, it failed, or nothing decided."""

    READY = "ready"
    FAILED = "failed"
    UNKNOWN = "unknown"


def outcome_label(outcome: Outcome | str, failure_class: str | None) -> str:
    """The one way to write "outcome:class" (`failed:oom`), or the outcome alone."""
    word = outcome.value if isinstance(outcome, Outcome) else outcome
    return f"{word}:{failure_class}" if failure_class else word


class Ended(Protocol):
    """Anything that ended with an outcome and maybe a class (a record, a probe's result)."""

    @property
    def outcome(self) -> Outcome: ...

    @property
    def failure_class(self) -> str | None: ...


class VerdictWord(str, Enum):
    """What the outcomes say about a hypothesis."""

    SUPPORTED = "supported"
    REFUTED = "refuted"
    INCONCLUSIVE = "inconclusive"

    def __str__(self) -> str:
        return self.value


VERDICTS = tuple(v.value for v in VerdictWord)


class Match(str, Enum):
    """How one deciding attempt stands against a hypothesis."""

    SUPPORTED = "supported"
    REFUTED = "refuted"
    NEITHER = "neither"
    NOT_RUN = "not run"

    def __str__(self) -> str:
        return self.value


class ReportFormat(Word):
    """`report --format`: what a run's report is written as."""

    TABLE = "table"  # the terminal's tables
    MARKDOWN = "md"
    JSON = "json"
    JUNIT = "junit"  # the attempts as test cases, whatever else the run holds
    HTML = "html"  # one self-contained page
    ISSUE = "issue"  # the Markdown a server's maintainers ask for in a bug report


class DiffFormat(Word):
    """`diff --format`: the changes between two runs."""

    TEXT = "text"
    JSON = "json"
    HTML = "html"


class TextOrJson(Word):
    """The views that are text for people or one JSON value for programs (`--json`)."""

    TEXT = "text"
    JSON = "json"

    @classmethod
    def of(cls, as_json: bool) -> TextOrJson:
        """The format a `--json` flag chooses."""
        return cls.JSON if as_json else cls.TEXT


class ExitCode(IntEnum):
    """The exit codes of every command (the README lists them)."""

    OK = 0  # the run completed and every expect held
    EXPECT_VIOLATED = 1  # an expect was violated (with --strict, also a hypothesis not supported)
    USAGE = 2  # the spec, the command line or a run directory is unusable
    HARNESS = 3  # diagbench itself failed
    INTERRUPTED = 130  # Ctrl-C, SIGTERM or SIGHUP


@dataclass(frozen=True)
class Evidence:
    """The log line that decided: its 1-based number and its text."""

    line_no: int
    text: str

    def to_json(self) -> dict[str, JSON]:
        return {"line_no": self.line_no, "text": self.text}
