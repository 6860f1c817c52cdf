"""The spec's signatures: the packs it names (`server.signatures`) and its own lines
(`server.failures`, `ready.log`), each mistake located."""

from __future__ import annotations

from functools import partial
from pathlib import Path

from diagbench.errors import SpecError
from diagbench.logs.signatures import Kind, Signature, builtin_packs, failure_class_of, load_pack, regex_of
from diagbench.vocab import FailureClass
from diagbench.yamlsrc import Src, suggest

__all__ = ["USER_FAILURE_PRIORITY", "assemble_signatures", "parse_pack_names"]

USER_FAILURE_PRIORITY = 80  # the user's own signatures outrank the built-in root causes


def parse_pack_names(src: Src) -> tuple[str, ...]:
    names = tuple(item.string("a pack name or file") for item in src.items_or_one())
    known = builtin_packs()
    mark = src.sink.mark()
    for name, item in zip(names, src.items_or_one(), strict=True):
        if "/" not in name and not name.endswith((".yaml", ".yml")) and name not in known:
            item.sink.add(
                item.error(f"unknown signature pack '{name}'", suggest(name, known) + "; or give a path to a pack file")
            )
    src.sink.settle(mark)  # every unknown pack said; none of them is loaded
    return names


def assemble_signatures(
    src: Src, keys: dict[str, Src], packs: tuple[str, ...], base: Path, ready_log: str | None
) -> list[Signature] | None:
    """The packs' signatures and the spec's own; None when a pack could not be loaded."""
    mark = src.sink.mark()
    signatures: list[Signature] = []
    for index, name in enumerate(packs):
        signatures.extend(src.attempt(partial(_load_pack, keys, index, name, base), []))
    loaded = src.sink.clean_since(mark)
    if ready_log is not None:  # the user's ready line replaces the packs' ready lines
        signatures = [s for s in signatures if s.kind is not Kind.READY]
        signatures.append(Signature("spec.ready", Kind.READY, ready_log, pack="spec"))
    if "failures" in keys:
        signatures.extend(src.attempt(lambda: _parse_failures(keys["failures"]), []))
    return signatures if loaded else None


def _load_pack(keys: dict[str, Src], index: int, name: str, base: Path) -> list[Signature]:
    try:
        return load_pack(name, base)
    except SpecError as exc:
        if exc.line is not None:  # located in the pack file itself
            raise
        where = keys["signatures"].items_or_one()[index]
        raise where.error(f"signature pack '{name}': {exc.message}", exc.fix) from None


def _parse_failures(src: Src) -> list[Signature]:
    entries = src.mapping(what="a mapping of id to regex or {pattern, class}").items()
    found = [src.attempt(partial(_parse_failure, sid, item), None) for sid, item in entries]
    return [signature for signature in found if signature is not None]


def _parse_failure(sid: str, item: Src) -> Signature:
    if item.is_mapping():
        fields_ = item.mapping(("pattern", "class", "priority"))
        if "pattern" not in fields_:
            raise item.error("missing key 'pattern'")
        pattern = regex_of(fields_["pattern"])
        cls = failure_class_of(fields_["class"]) if "class" in fields_ else FailureClass.OTHER
        priority = fields_["priority"].integer() if "priority" in fields_ else USER_FAILURE_PRIORITY
    else:
        pattern, cls, priority = regex_of(item), FailureClass.OTHER, USER_FAILURE_PRIORITY
    return Signature(f"spec.{sid}", Kind.FAILURE, pattern, cls, priority, pack="spec")
