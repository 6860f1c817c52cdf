"""The manifest (`manifest.json`): everything known before the first launch, hypotheses and
their hash included, as typed data. Built by `build_manifest`, read back by `Manifest.from_json`
alone (through `store.read_manifest`): each part is read with suspicion, a malformed one named
in `problems` and left out, and a manifest written by a newer diagbench is refused."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import NoReturn, TypeVar

from diagbench.errors import RecordError
from diagbench.jsonvalue import JSON, JSONObject, as_list, as_object, text_of
from diagbench.records.envshape import environment_problem
from diagbench.spec.gpus import GpuMode, GpuRequest, parse_gpu_request
from diagbench.spec.hypotheses import Expectation, Hypothesis
from diagbench.spec.matrix import CellRow

__all__ = ["MANIFEST_VERSION", "CellEntry", "Manifest", "NewerManifest", "PlannedEntry", "Problem", "RunSettings"]

MANIFEST_VERSION = 1
T = TypeVar("T")


class NewerManifest(RecordError):
    """A manifest written by a newer diagbench: its meaning is not guessed."""


@dataclass(frozen=True)
class PlannedEntry:
    """One planned attempt, as the manifest's `attempts` keep it."""

    attempt: str
    cell_id: str
    repeat: int
    params: Mapping[str, str] | None = None  # absent in a hand-written manifest: the records' are used
    args: tuple[str, ...] | None = None
    environment: JSONObject | None = None  # the server's, where it differs from the run's

    def to_json(self) -> dict[str, JSON]:
        given = _present(params=self.params and dict(self.params), args=_plain(self.args))
        given |= _present(environment=self.environment and dict(self.environment))
        return {"attempt": self.attempt, "cell_id": self.cell_id, "repeat": self.repeat, **given}

    @classmethod
    def from_json(cls, data: JSON) -> PlannedEntry:
        if not isinstance(data, dict) or not isinstance(data.get("attempt"), str):
            raise ValueError("expected {attempt, cell_id, repeat, ...}")
        params = data.get("params")
        return cls(
            attempt=str(data["attempt"]),
            cell_id=str(data.get("cell_id")),
            repeat=_whole(data.get("repeat"), "repeat"),
            params={str(k): str(v) for k, v in params.items()} if isinstance(params, dict) else None,
            args=tuple(text_of(a) for a in _items(data["args"])) if "args" in data else None,
            environment=_environment(data.get("environment")),
        )


@dataclass(frozen=True)
class CellEntry:
    """One cell of the matrix, as the manifest's `cells` keep it (secrets blanked)."""

    cell_id: str
    params: Mapping[str, str]
    args: tuple[str, ...] | None = None
    env: Mapping[str, str | None] | None = None

    @property
    def row(self) -> CellRow:
        return CellRow(self.cell_id, self.params)

    def to_json(self) -> dict[str, JSON]:
        given = _present(args=_plain(self.args), env=None if self.env is None else dict(self.env))
        return {"cell_id": self.cell_id, "params": dict(self.params), **given}

    @classmethod
    def from_json(cls, data: JSON) -> CellEntry:
        if not isinstance(data, dict):
            raise TypeError("expected {cell_id, params, ...}")
        env = as_object(data.get("env"))
        return cls(
            cell_id=text_of(data["cell_id"]),
            params={k: text_of(v) for k, v in (as_object(data["params"]) or _no("params")).items()},
            args=tuple(text_of(a) for a in _items(data["args"])) if "args" in data else None,
            env=None if env is None else {k: None if v is None else text_of(v) for k, v in env.items()},
        )


@dataclass(frozen=True)
class RunSettings:
    """The options a run was started with (the manifest's `options`): None where not recorded."""

    only: tuple[str, ...] | None = None
    repeat: int | None = None
    parallel: int | None = None
    gpus: tuple[str, ...] | None = None  # the GPU ids handed out (none: `--gpus none`)
    gpus_per_attempt: int | None = None
    slots: tuple[tuple[str, ...], ...] | None = None
    stop_when_decided: bool | None = None
    fail_fast: bool | None = None
    executor: JSONObject | None = None  # the executor's own settings, `kind` first
    isolate: bool = False  # an isolation run (`diagbench isolate`): no plan ahead
    triage: JSONObject | None = None  # a triage run's own settings (`diagbench triage`): {first, price}

    @property
    def executor_kind(self) -> str | None:
        """The recorded executor's kind; None for a run from before executors were recorded (local)."""
        kind = self.executor.get("kind") if self.executor is not None else None
        return kind if isinstance(kind, str) else None

    @property
    def gpu_request(self) -> GpuRequest | None:
        """The GPUs the run handed out as a request (`--gpus none` for none), or None if not recorded."""
        if self.gpus is None:
            return None
        return parse_gpu_request(",".join(self.gpus)) if self.gpus else GpuRequest(GpuMode.NONE)

    def to_json(self) -> dict[str, JSON]:
        data: dict[str, JSON] = {"isolate": True} if self.isolate else {}
        keys = ("repeat", "parallel") if self.isolate else ("only", "repeat", "parallel")
        data |= {k: _plain(getattr(self, k)) for k in keys}
        if self.gpus is not None:
            data |= {"gpus": list(self.gpus), "gpus_per_attempt": self.gpus_per_attempt}
            data["slots"] = [list(s) for s in self.slots or ()]
        if not self.isolate and self.stop_when_decided is not None:
            data |= {"stop_when_decided": self.stop_when_decided, "fail_fast": bool(self.fail_fast)}
        if self.executor is not None:
            data["executor"] = dict(self.executor)
        if self.triage is not None:
            data["triage"] = dict(self.triage)
        return data

    @classmethod
    def from_json(cls, data: JSONObject) -> RunSettings:
        """Read back; a malformed option raises ValueError naming it and how to give it again."""
        gpus = data.get("gpus")
        if gpus is not None and (not isinstance(gpus, list) or not all(isinstance(g, str) for g in gpus)):
            raise ValueError(f"gpus: expected a list of GPU ids, got {gpus!r}; give --gpus again")
        only = data.get("only")
        if only is not None and (not isinstance(only, list) or not all(isinstance(o, str) for o in only)):
            raise ValueError(f"only: expected a list of AXIS=LABEL, got {only!r}")
        executor = as_object(data.get("executor"))
        settings = cls(
            only=None if only is None else tuple(only),
            repeat=_number(data, "repeat"),
            parallel=_number(data, "parallel"),
            gpus=None if gpus is None else tuple(gpus),
            gpus_per_attempt=per
            if isinstance(per := data.get("gpus_per_attempt"), int) and not isinstance(per, bool)
            else None,
            slots=tuple(tuple(str(g) for g in s) for s in as_list(data.get("slots")) if isinstance(s, list)),
            stop_when_decided=data["stop_when_decided"] is True if "stop_when_decided" in data else None,
            fail_fast=data["fail_fast"] is True if "fail_fast" in data else None,
            executor=executor,
            isolate=data.get("isolate") is True,
            triage=as_object(data.get("triage")),
        )
        try:
            parse_gpu_request(",".join(settings.gpus or ["all"]))  # checked here: resuming relies on it
        except ValueError as exc:
            raise ValueError(f"gpus: {exc}; give --gpus again") from None
        return settings


@dataclass(frozen=True)
class Problem:
    """A part of a manifest that could not be read: named to the user, left out of the value."""

    part: str  # the top-level key: `hypotheses`, `options`
    why: str

    def __str__(self) -> str:
        return self.why


@dataclass(frozen=True)
class Manifest:
    """Everything known before the first launch (the README's `manifest.json`)."""

    run_id: str
    created_at: str
    spec: JSONObject  # the spec as loaded, secrets blanked: shown, never launched from
    spec_sha256: str
    hypotheses: tuple[Hypothesis, ...]
    hypotheses_sha256: str
    attempts: tuple[PlannedEntry, ...]
    spec_text: str | None = None
    spec_file: str | None = None  # where relative paths in the spec resolve (`run --resume RUN`)
    expect: tuple[Expectation, ...] = ()
    cells: tuple[CellEntry, ...] = ()
    options: RunSettings | None = None
    provenance: JSONObject | None = None
    isolation_factors: tuple[JSONObject, ...] | None = None
    environment: JSONObject | None = None  # the environment the run had (filled by its own code)
    manifest_version: int = MANIFEST_VERSION
    problems: tuple[Problem, ...] = field(default=(), compare=False)  # parts left out, each named

    @property
    def settings(self) -> RunSettings:
        return self.options or RunSettings()

    @property
    def spec_name(self) -> str:
        return str(self.spec.get("name", ""))

    @property
    def grace_s(self) -> float | None:
        """The run's own grace period, if its spec says one."""
        server = self.spec.get("server")
        grace = server.get("grace_s") if isinstance(server, dict) else None
        return float(grace) if isinstance(grace, (int, float)) and not isinstance(grace, bool) else None

    def failed(self, part: str) -> bool:
        """Whether the part could not be read whole."""
        return any(p.part == part for p in self.problems)

    def planned(self, attempt: str) -> PlannedEntry | None:
        return next((a for a in self.attempts if a.attempt == attempt), None)

    def to_json(self) -> dict[str, JSON]:
        data: dict[str, JSON] = {
            "manifest_version": self.manifest_version,
            "run_id": self.run_id,
            "created_at": self.created_at,
            "spec": dict(self.spec),
        }
        data |= _present(spec_text=self.spec_text, spec_file=self.spec_file)
        data |= {
            "spec_sha256": self.spec_sha256,
            "hypotheses": [h.to_json() for h in self.hypotheses],
            "hypotheses_sha256": self.hypotheses_sha256,
            "expect": [e.to_json() for e in self.expect],
            "cells": [c.to_json() for c in self.cells],
            "attempts": [a.to_json() for a in self.attempts],
        }
        data |= _present(options=self.options.to_json() if self.options else None, provenance=self.provenance)
        if self.isolation_factors is not None:
            data["isolation_factors"] = [dict(f) for f in self.isolation_factors]
        return data | _present(environment=self.environment and dict(self.environment))

    @classmethod
    def from_json(cls, data: JSONObject) -> Manifest:
        """Read a manifest: a newer version is refused (RecordError), a malformed part named and left out."""
        version = data.get("manifest_version", MANIFEST_VERSION)
        if not isinstance(version, int) or isinstance(version, bool):
            raise RecordError(f"field 'manifest_version': expected an integer, got {version!r}")
        if version > MANIFEST_VERSION:
            raise NewerManifest(
                f"manifest_version {version}: written by a newer diagbench (this one reads "
                f"{MANIFEST_VERSION}); read it with that version (pip install -U diagbench)"
            )
        parts = _Parts(data)
        factors = data.get("isolation_factors")
        return cls(
            run_id=str(data.get("run_id", "")),
            created_at=str(data.get("created_at", "")),
            spec=parts.mapping("spec"),
            spec_sha256=str(data.get("spec_sha256", "")),
            hypotheses=parts.each("hypotheses", lambda _, h: Hypothesis.from_json(as_object(h) or _no("hypothesis"))),
            hypotheses_sha256=str(data.get("hypotheses_sha256", "")),
            attempts=parts.each("attempts", lambda _, a: PlannedEntry.from_json(a)),
            spec_text=_optional_text(data.get("spec_text")),
            spec_file=_optional_text(data.get("spec_file")),
            expect=parts.each("expect", Expectation.from_json),
            cells=parts.each("cells", lambda _, c: CellEntry.from_json(c)),
            options=parts.settings(),
            provenance=parts.mapping("provenance") if "provenance" in data else None,
            isolation_factors=tuple(f for f in map(as_object, factors) if f) if isinstance(factors, list) else None,
            environment=parts.environment() if "environment" in data else None,
            manifest_version=version,
            problems=tuple(parts.problems),
        )


class _Parts:
    """Reads the parts of a manifest, naming each malformed one instead of failing on it."""

    def __init__(self, data: JSONObject):
        self.data = data
        self.problems: list[Problem] = []

    def each(self, key: str, parse: Callable[[int, JSON], T]) -> tuple[T, ...]:
        items = self.data.get(key, [])
        if not isinstance(items, list):
            self.problems.append(Problem(key, f"field '{key}': expected a list"))
            return ()
        out = []
        for index, item in enumerate(items):
            try:
                out.append(parse(index, item))
            except (KeyError, TypeError, ValueError, AttributeError) as exc:
                self.problems.append(Problem(key, f"{key}[{index}]: {_why(exc)}"))
        return tuple(out)

    def mapping(self, key: str) -> dict[str, JSON]:
        value = as_object(self.data.get(key, {}))
        if value is not None:
            return value
        self.problems.append(Problem(key, f"field '{key}': expected a mapping"))
        return {}

    def environment(self) -> dict[str, JSON] | None:
        """The server's environment, where it has the shape diagbench writes (one hand-edited
        part makes it a problem, named, not a traceback in one report of three)."""
        value = self.data.get("environment")
        why = environment_problem(value)
        if why is None:
            return as_object(value)
        self.problems.append(Problem("environment", f"field 'environment': {why}"))
        return None

    def settings(self) -> RunSettings | None:
        if "options" not in self.data:
            return None
        try:
            return RunSettings.from_json(self.mapping("options"))
        except (TypeError, ValueError) as exc:
            self.problems.append(Problem("options", f"options.{exc}"))
            return RunSettings()


def _environment(value: JSON | None) -> dict[str, JSON] | None:
    """An attempt's own environment, where it has the shape diagbench writes (else none: the run's)."""
    return value if isinstance(value, dict) and environment_problem(value) is None else None


def _number(data: JSONObject, key: str) -> int | None:
    value = data.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{key}: expected a whole number above 0, got {value!r}; give --{key} again")
    return value


def _whole(value: object, key: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"field '{key}': expected an integer, got {value!r}")
    return value


def _optional_text(value: object) -> str | None:
    return value if isinstance(value, str) else None


def _plain(value: tuple[str, ...] | int | None) -> JSON:
    return list(value) if isinstance(value, tuple) else value


def _present(**values: JSON) -> dict[str, JSON]:
    return {k: v for k, v in values.items() if v is not None}


def _items(value: object) -> list[JSON]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise TypeError(f"expected a list, got {value!r}")
    return value


def _no(what: str) -> NoReturn:
    raise TypeError(f"{what}: expected a mapping")


def _why(exc: Exception) -> str:
    if isinstance(exc, KeyError):
        return f"missing field {exc.args[0]!r}"
    return str(exc) or type(exc).__name__
