"""`server.stacks: flight-recorder` (opt-in): each rank's last collectives from PyTorch's
flight recorder, read into the hang summary (which rank is behind, by which collective).

PyTorch keeps a ring of each process group's last collectives (its FlightRecorder,
torch/csrc/distributed/c10d/FlightRecorder.hpp: `TORCH_FR_BUFFER_SIZE`, formerly
`TORCH_NCCL_TRACE_BUFFER_SIZE`, entries; every entry with its `collective_seq_id`,
`profiling_name` such as `gloo:all_reduce` or `nccl:all_reduce`, `process_group`, `state`).
ProcessGroupNCCL dumps it on a watchdog timeout (`TORCH_NCCL_DUMP_ON_TIMEOUT=1`) to
`TORCH_NCCL_DEBUG_INFO_TEMP_FILE` (`TORCH_FR_DUMP_TEMP_FILE`) + rank, the layout
tools/flight_recorder (torch.distributed.flight_recorder.fr_trace) reads. That is minutes
late (the collective's timeout) and NCCL-only, so diagbench also asks now, for any backend:
its sitecustomize (faulthandler_site/) starts a thread `diagbench-flight-recorder` in each
Python process that polls for a trigger file; when diagbench takes stacks it writes the
trigger, and each process with torch.distributed initialised writes
`torch._C._distributed_c10d._dump_fr_trace()` (gloo records too, torch 2.13) to
`<stacks>/flight-recorder/rank_<R>`.

The dump is a pickle the server wrote. It is never unpickled with pickle.load: Python's own
unpickler, restricted, refuses every global (only the protocol's own dicts, lists, tuples,
strings, numbers, booleans and None are built), counts its opcodes against a budget and hashes
only plain keys, from at most DUMP_LIMIT bytes read through the files door; what `behind` reads
of it is then kept as plain values of bounded size (`_plain`).
"""

from __future__ import annotations

import io
import pickle
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import ClassVar, cast

from diagbench.jsonvalue import JSON
from diagbench.records.parts import Behind
from diagbench.safefiles import Folder, Unsafe

__all__ = [
    "DUMP_LIMIT",
    "DUMP_WAIT_S",
    "FLIGHT_FOLDER",
    "FLIGHT_VAR",
    "TRIGGER",
    "ask_for_dumps",
    "behind",
    "behind_words",
    "flight_env",
    "read_dump",
    "read_dumps",
]

FLIGHT_FOLDER = ("stacks", "flight-recorder")
FLIGHT_VAR = "DIAGBENCH_FLIGHT_DIR"
TRIGGER = "dump-now"
DUMP_LIMIT = 64 << 20  # 2000 entries without stack traces: a few hundred kB
DUMP_WAIT_S = 3.0
BUFFER_ENTRIES = "2000"  # FlightRecorder.hpp's default, set explicitly: older torch defaulted to 0 (off)


def flight_env(folder: Path, site_dir: Path, inherited: str | None) -> dict[str, str]:
    """The variables `server.stacks: flight-recorder` sets (recorded in env_changes)."""
    target = folder.joinpath(*FLIGHT_FOLDER)
    with Folder.open(folder) as attempt, attempt.walk(FLIGHT_FOLDER, make=True):
        pass  # made below the attempt's folder, never through a link
    prefix = str(target / "rank_")
    return {
        "TORCH_FR_BUFFER_SIZE": BUFFER_ENTRIES,
        "TORCH_NCCL_TRACE_BUFFER_SIZE": BUFFER_ENTRIES,
        "TORCH_NCCL_DUMP_ON_TIMEOUT": "1",
        "TORCH_FR_DUMP_TEMP_FILE": prefix,
        "TORCH_NCCL_DEBUG_INFO_TEMP_FILE": prefix,
        "PYTHONPATH": str(site_dir) + (f":{inherited}" if inherited else ""),
        FLIGHT_VAR: str(target),
    }


def ask_for_dumps(folder: Path, expected: int, wait_s: float = DUMP_WAIT_S) -> None:
    """Write the trigger; wait until `expected` ranks have dumped, or `wait_s`."""
    with Folder.open(folder) as attempt, attempt.walk(FLIGHT_FOLDER) as flight:
        flight.write(TRIGGER, b"")
        end = time.monotonic() + wait_s
        while time.monotonic() < end and len(_dump_names(flight)) < max(1, expected):
            time.sleep(0.05)  # the ranks' threads poll every 0.2 s


def _dump_names(flight: Folder) -> list[str]:
    return [n for n in flight.names() if n.startswith("rank_") and n[5:].isdigit()]


MAX_OPS = 2_000_000  # a real 2000-entry dump with 30 frames each: 640k opcodes, under a second
LOAD_S = 5.0  # a dump's load stops after this long
_KEYS = (str, bytes, int, float, bool, type(None))  # hashed in constant or linear time
_HASHING = {pickle.SETITEM[0], pickle.SETITEMS[0], pickle.DICT[0], pickle.ADDITEMS[0], pickle.FROZENSET[0]}


def _step(code: int, load: Callable[[pickle.Unpickler], None]) -> Callable[[pickle.Unpickler], None]:
    """One opcode, counted against MAX_OPS and LOAD_S; an opcode that hashes its items only
    with plain keys: a tuple key shared through the memo is hashed in 2**depth steps, in C
    (60 levels: a 300-byte dump hashed for ever, deaf to signals)."""

    def step(unpickler: pickle.Unpickler) -> None:
        self = cast(_Refusing, unpickler)  # the table is _Refusing's own
        self.ops += 1
        if self.ops > MAX_OPS or (self.ops % 4096 == 0 and time.monotonic() > self.deadline):
            raise pickle.UnpicklingError(f"more than {MAX_OPS:,} opcodes or {LOAD_S:.0f} s")
        if code in _HASHING:
            items = self.stack[-2:-1] if code == pickle.SETITEM[0] else self.stack
            keys = items[0::2] if code in (pickle.SETITEMS[0], pickle.DICT[0]) else items
            if not all(type(k) in _KEYS for k in keys):
                raise pickle.UnpicklingError("a key that is not a string or a number")
        load(unpickler)

    return step


class _Refusing(pickle._Unpickler):
    """Builds only what the pickle protocol builds itself: no class, no function, no module.
    Python's own unpickler (pickle._Unpickler), so that each opcode is counted and checked;
    the C one cannot be bounded."""

    dispatch: ClassVar[dict[int, Callable[[pickle.Unpickler], None]]] = {
        code: _step(code, load) for code, load in pickle._Unpickler.dispatch.items()
    }
    stack: list[object]

    def __init__(self, data: bytes):
        super().__init__(io.BytesIO(data))
        self.ops, self.deadline = 0, time.monotonic() + LOAD_S

    def find_class(self, module: str, name: str) -> type:
        raise pickle.UnpicklingError(f"the dump names {module}.{name}: a flight-recorder dump names nothing")


def read_dump(data: bytes) -> dict[str, object]:
    """One dump's top-level object, as plain bounded values (`_plain`); ValueError when it is
    not a dict of plain values. Whatever the unpickler says of a hostile dump (a BUILD on a
    dict is an AttributeError) is a ValueError: a dump never ends the attempt's record."""
    try:
        found = _Refusing(data).load()
    except Exception as exc:  # noqa: BLE001 - every way a hostile pickle can fail to load
        raise ValueError(f"not a flight-recorder dump: {type(exc).__name__}: {str(exc)[:200]}") from None
    if not isinstance(found, dict) or not isinstance(found.get("entries", []), list):
        raise ValueError("not a flight-recorder dump: no entries")
    return _plain(found)


MAX_ENTRIES = 20_000  # ten times FlightRecorder's default ring; a dump's last ones are kept
MAX_TEXT = 200  # characters of a name kept
MAX_SEQ = 1 << 63  # a collective_seq_id is a C++ size_t


def _plain(found: dict[object, object]) -> dict[str, object]:
    """What `behind` reads of a dump, each value of the type it must have, bounded: a pickle's
    memo can share one object so that showing it (str) would build 2**60 characters, a long
    int of millions of digits cannot be shown at all, and a million entries are no ring."""
    entries = found.get("entries")
    kept = []
    for entry in entries[-MAX_ENTRIES:] if isinstance(entries, list) else []:
        if not isinstance(entry, dict):
            continue
        seq, pg_id, group = entry.get("collective_seq_id"), entry.get("pg_id"), entry.get("process_group")
        kept.append(
            {
                "collective_seq_id": seq if type(seq) is int and 0 <= seq < MAX_SEQ else None,
                "pg_id": pg_id if type(pg_id) is int and 0 <= pg_id < MAX_SEQ else None,
                "is_p2p": entry.get("is_p2p") is True,
                "profiling_name": _text(entry.get("profiling_name")),
                "process_group": tuple(_text(g) for g in group[:2])
                if isinstance(group, (tuple, list))
                else _text(group),
            }
        )
    version = found.get("version")
    return {"version": _text(version), "entries": kept}


def _text(value: object) -> str | None:
    return value[:MAX_TEXT] if isinstance(value, str) else None


def read_dumps(folder: Path) -> tuple[dict[int, dict[str, object]], list[str]]:
    """rank -> dump of every `rank_<R>` file, and a note for each that could not be read."""
    dumps: dict[int, dict[str, object]] = {}
    notes: list[str] = []
    try:
        with Folder.open(folder) as attempt, attempt.walk(FLIGHT_FOLDER) as flight:
            for name in _dump_names(flight):
                try:
                    dumps[int(name[5:])] = read_dump(flight.read(name, DUMP_LIMIT))
                except (OSError, ValueError) as exc:
                    notes.append(f"flight recorder {name}: {exc}")
    except (OSError, Unsafe) as exc:
        notes.append(f"flight recorder: {exc}")
    return dumps, notes


def behind(dumps: Mapping[int, Mapping[str, object]]) -> list[Behind]:
    """The ranks whose last collective in a process group is behind the furthest rank's."""
    last: dict[str, dict[int, int]] = {}
    names: dict[tuple[str, int], str] = {}  # (group, seq) -> the collective's profiling name
    default = ""
    for rank, dump in dumps.items():
        entries = dump.get("entries")
        for entry in entries if isinstance(entries, list) else []:
            if not isinstance(entry, dict) or entry.get("is_p2p"):
                continue
            seq = entry.get("collective_seq_id")
            group = _group(entry.get("process_group"))
            if not isinstance(seq, int) or isinstance(seq, bool):
                continue
            if entry.get("pg_id") == 0:
                default = group
            ranks = last.setdefault(group, {})
            ranks[rank] = max(ranks.get(rank, 0), seq)
            names.setdefault((group, seq), str(entry.get("profiling_name") or "?"))
    if default or (not last and dumps):  # every rank is in the default group, entries or none
        group = default or "default_pg"
        for rank in dumps:
            last.setdefault(group, {}).setdefault(rank, 0)
    out = []
    for group, ranks in sorted(last.items()):
        ahead = max(ranks.values())
        for rank, seq in sorted(ranks.items()):
            if seq < ahead:
                out.append(Behind(rank, group, seq, ahead, names.get((group, seq + 1))))
    return out


def _group(value: JSON | object) -> str:
    """`('0', 'default_pg')` -> `default_pg` (its description, else its name)."""
    if isinstance(value, (tuple, list)) and value:
        return str(value[-1] or value[0])
    return str(value or "?")


def behind_words(found: list[Behind]) -> str | None:
    """`flight recorder: rank 1 is behind in default_pg: its last collective #0, the others' #1 (gloo:all_reduce)`."""
    if not found:
        return None
    said = [
        f"rank {b.rank} is behind in {b.group}: its last collective #{b.last_seq}, the others' #{b.ahead_seq}"
        + (f" (it never entered {b.collective})" if b.collective else "")
        for b in found
    ]
    return "flight recorder: " + "; ".join(said)
