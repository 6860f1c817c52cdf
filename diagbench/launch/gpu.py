"""GPU facts of this host: which GPUs there are (NVML, else nvidia-smi), which of them this
process may use (within an inherited CUDA_VISIBLE_DEVICES), how they are wired
(`nvidia-smi topo -m`), and their used memory, with a wait for it to settle.

Without an NVIDIA GPU every query returns None at once, so CPU hosts pay nothing.
"""

from __future__ import annotations

import contextlib
import shutil
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from diagbench.errors import UserError
from diagbench.launch.helpers import run_helper
from diagbench.spec.gpus import GpuMode, GpuRequest

__all__ = [
    "ORDER_VAR",
    "SETTLE_BOUND_S",
    "SETTLE_TOLERANCE_MIB",
    "VISIBLE_VAR",
    "Gpu",
    "GpuOffer",
    "activity",
    "describe",
    "inventory",
    "link_distance",
    "memory_used_mib",
    "offer_gpus",
    "parse_topology",
    "physical_index",
    "pick",
    "process_usage",
    "topology",
    "visible_ids",
    "wait_for_baseline",
]

SETTLE_TOLERANCE_MIB = 256
SETTLE_BOUND_S = 30.0
_SMI_TIMEOUT_S = 10
VISIBLE_VAR = "CUDA_VISIBLE_DEVICES"
ORDER_VAR = "CUDA_DEVICE_ORDER"


def _smi(*args: str) -> str | None:
    if shutil.which("nvidia-smi") is None:
        return None
    ran = run_helper(["nvidia-smi", *args], _SMI_TIMEOUT_S)  # a driver that hangs costs 10 s, never the run
    return ran.out() if ran.ok else None


def _smi_query(query: str) -> list[list[str]] | None:
    text = _smi(f"--query-gpu={query}", "--format=csv,noheader,nounits")
    if text is None:
        return None
    return [[f.strip() for f in line.split(",")] for line in text.strip().splitlines() if line.strip()]


def _nvml(read: Callable[[Any, Any], Any]) -> list[Any] | None:
    """One reading per GPU through NVML (nvidia-ml-py, optional), or None."""
    try:
        import pynvml
    except ImportError:
        return None
    try:
        pynvml.nvmlInit()
        return [read(pynvml, pynvml.nvmlDeviceGetHandleByIndex(i)) for i in range(pynvml.nvmlDeviceGetCount())]
    except Exception:  # NVML raises its own error types; any failure means "no reading"  # noqa: BLE001
        return None


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


# -- inventory ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Gpu:
    """One GPU of the host, numbered as NVML and nvidia-smi number them (PCI bus order)."""

    index: int
    uuid: str
    name: str


def inventory() -> list[Gpu] | None:
    """Every GPU of the host, or None where none can be queried."""
    found = _nvml(lambda nv, h: (_text(nv.nvmlDeviceGetUUID(h)), _text(nv.nvmlDeviceGetName(h))))
    if found is not None:
        return [Gpu(i, uuid, name) for i, (uuid, name) in enumerate(found)]
    rows = _smi_query("index,uuid,name")
    if rows is None:
        return None
    with contextlib.suppress(ValueError, IndexError):
        return [Gpu(int(r[0]), r[1], r[2]) for r in rows]
    return None


def physical_index(gpu_id: str, gpus: Sequence[Gpu]) -> int | None:
    """The host's index for an id as CUDA reads it (an index, or a UUID or its prefix)."""
    if gpu_id.isdigit():
        return int(gpu_id) if any(g.index == int(gpu_id) for g in gpus) else None
    matches = [g.index for g in gpus if g.uuid.startswith(gpu_id)]
    return matches[0] if len(matches) == 1 else None


def visible_ids(gpus: Sequence[Gpu], cuda_visible: str | None) -> list[str]:
    """What this process may use: every GPU, or the inherited CUDA_VISIBLE_DEVICES entries up
    to the first that names no GPU here (CUDA stops reading the list there too)."""
    if cuda_visible is None:
        return [str(g.index) for g in gpus]
    out: list[str] = []
    for entry in (e.strip() for e in cuda_visible.split(",")):
        if not entry or (physical_index(entry, gpus) is None and not entry.startswith("MIG-")):
            break
        out.append(entry)
    return out


@dataclass(frozen=True)
class GpuOffer:
    """The GPUs this run hands out, as written in each attempt's CUDA_VISIBLE_DEVICES."""

    ids: tuple[str, ...]
    source: str  # where they came from, in words
    host_index: Mapping[str, int] = field(default_factory=dict)  # id -> the host's index, where known
    env: Mapping[str, str] = field(default_factory=dict)  # set beside every attempt's CUDA_VISIBLE_DEVICES
    notes: tuple[str, ...] = ()  # lines worth telling the user


def offer_gpus(request: GpuRequest | None, environ: Mapping[str, str], gpus: Sequence[Gpu] | None) -> GpuOffer:
    """Resolve `--gpus` (or the spec's default) against the host. None asks for the default:
    every visible GPU where there are any, else none."""
    if request is None:
        found = _all(environ, gpus, asked=False)
        return found if found.ids else GpuOffer((), "no GPU visible")
    if request.mode is GpuMode.NONE:
        return GpuOffer((), "--gpus none")
    if request.mode is GpuMode.ALL:
        return _all(environ, gpus, asked=True)
    return _listed(request.ids, environ, gpus)


def _all(environ: Mapping[str, str], gpus: Sequence[Gpu] | None, asked: bool) -> GpuOffer:
    inherited = environ.get(VISIBLE_VAR)
    if gpus is None:
        if asked and inherited:
            ids = tuple(e.strip() for e in inherited.split(",") if e.strip())
            note = f"no GPU can be queried here (no NVML, no nvidia-smi): using {VISIBLE_VAR}={inherited} as given"
            return GpuOffer(ids, f"inherited {VISIBLE_VAR}", notes=(note,))
        if asked:
            raise UserError("--gpus all: no GPU can be queried here (no NVML, no nvidia-smi); give ids (--gpus 0,1)")
        return GpuOffer((), "no GPU visible")
    ids = tuple(visible_ids(gpus, inherited))
    if asked and not ids:
        raise UserError(f"--gpus all: no GPU is visible to this process ({VISIBLE_VAR}={inherited!r})")
    source = f"inherited {VISIBLE_VAR}={inherited}" if inherited is not None else "every GPU of this host"
    return GpuOffer(ids, source, _indices(ids, gpus), _order_env(ids, environ, inherited is None))


def _listed(ids: tuple[str, ...], environ: Mapping[str, str], gpus: Sequence[Gpu] | None) -> GpuOffer:
    given = ",".join(ids)
    order = _order_env(ids, environ, True)
    outside = _outside_inherited(ids, environ.get(VISIBLE_VAR), gpus)
    if gpus is None:
        note = f"no GPU can be queried here (no NVML, no nvidia-smi): using --gpus {given} as given"
        return GpuOffer(ids, "--gpus", env=order, notes=_lines(note, outside))
    known = _indices(ids, gpus)
    unknown = [i for i in ids if i not in known]
    host = ",".join(str(g.index) for g in gpus) or "none"
    note = f"--gpus {given}: {','.join(unknown)} not among this host's GPUs ({host}); used as given"
    return GpuOffer(ids, "--gpus", known, order, _lines(note if unknown else None, outside))


def _outside_inherited(ids: Sequence[str], inherited: str | None, gpus: Sequence[Gpu] | None) -> str | None:
    """A listed GPU outside an inherited CUDA_VISIBLE_DEVICES, said: `--gpus` names the host's
    GPUs, and each attempt's CUDA_VISIBLE_DEVICES replaces the inherited one (a batch job's
    `--gpus 0,1` under CUDA_VISIBLE_DEVICES=2,3 would run on another job's GPUs)."""
    if inherited is None:
        return None
    entries = [e.strip() for e in inherited.split(",") if e.strip()]
    mine = {_same_gpu(e, gpus) for e in entries}
    outside = [i for i in ids if _same_gpu(i, gpus) not in mine]
    if not outside:
        return None
    return (
        f"--gpus {','.join(ids)} names this host's GPUs (as nvidia-smi numbers them), not positions in the "
        f"inherited {VISIBLE_VAR}={inherited}: attempts run on the host's GPU {','.join(ids)} "
        f"({','.join(outside)} outside that list; --gpus all hands out the inherited ones)"
    )


def _same_gpu(gpu_id: str, gpus: Sequence[Gpu] | None) -> str:
    """One name for one GPU: its host index where it can be told, else the id as written."""
    index = physical_index(gpu_id, gpus) if gpus is not None else None
    return str(index) if index is not None else gpu_id


def _lines(*notes: str | None) -> tuple[str, ...]:
    return tuple(n for n in notes if n)


def _indices(ids: Sequence[str], gpus: Sequence[Gpu]) -> dict[str, int]:
    return {i: index for i in ids if (index := physical_index(i, gpus)) is not None}


def _order_env(ids: Sequence[str], environ: Mapping[str, str], ours: bool) -> dict[str, str]:
    """Indices we hand out are nvidia-smi's (PCI bus order); CUDA's default order
    (FASTEST_FIRST) can differ on a host with mixed GPUs, so say which order is meant.
    An inherited list keeps the order it was written for, and so does a user's own setting
    (inherited here; a spec's server.env or cell env overrides this one for its attempts)."""
    if ours and ORDER_VAR not in environ and any(i.isdigit() for i in ids):
        return {ORDER_VAR: "PCI_BUS_ID"}
    return {}


# -- topology ----------------------------------------------------------------------------

# `nvidia-smi topo -m` link words, closest first (NV<n>: n NVLinks, more is closer)
_LINK_RANK = {"PIX": 1, "PXB": 2, "PHB": 3, "NODE": 4, "SYS": 5, "SOC": 5}


def link_distance(word: str) -> float:
    """How far apart two GPUs are by their topology word: NVLink < PIX < PXB < PHB < NODE < SYS."""
    if word.startswith("NV") and word[2:].isdigit():
        return 1.0 / (1 + int(word[2:]))
    return float(_LINK_RANK.get(word, 6))


def parse_topology(text: str) -> dict[tuple[int, int], float]:
    """`nvidia-smi topo -m` -> distance between each pair of GPU indices."""
    lines = [line.split() for line in text.splitlines() if line.strip()]
    if not lines:
        return {}
    header = [h for h in lines[0] if h.startswith("GPU") and h[3:].isdigit()]
    columns = [int(h[3:]) for h in header]
    out: dict[tuple[int, int], float] = {}
    for row in lines[1:]:
        if not (row[0].startswith("GPU") and row[0][3:].isdigit()):
            continue
        for column, word in zip(columns, row[1 : 1 + len(columns)], strict=False):
            out[(int(row[0][3:]), column)] = 0.0 if word == "X" else link_distance(word)
    return out


def topology() -> dict[tuple[int, int], float]:
    """This host's GPU topology, or {} where nvidia-smi cannot tell."""
    text = _smi("topo", "-m")
    return parse_topology(text) if text else {}


# -- memory ------------------------------------------------------------------------------


def memory_used_mib() -> list[int] | None:
    """Used memory per GPU (by host index) in MiB, or None where no NVIDIA GPU can be read."""
    used = _nvml(lambda nv, h: int(nv.nvmlDeviceGetMemoryInfo(h).used) // (1 << 20))
    if used is not None:
        return used
    rows = _smi_query("memory.used")
    if rows is None:
        return None
    with contextlib.suppress(ValueError):
        return [int(float(r[0])) for r in rows]
    return None


def describe() -> list[dict[str, Any]] | None:
    rows = _smi_query("name,driver_version,memory.total")
    if rows is None:
        return None
    return [
        {"name": r[0], "driver": r[1] if len(r) > 1 else None, "memory_total_mib": r[2] if len(r) > 2 else None}
        for r in rows
    ]


def wait_for_baseline(
    baseline: list[int],
    cancelled: threading.Event | None = None,
    bound_s: float = SETTLE_BOUND_S,
    read: Callable[[], list[int] | None] = memory_used_mib,
    indices: Sequence[int] | None = None,
) -> tuple[list[int] | None, float]:
    """Wait (bounded) until the used memory of the GPUs at `indices` (default: all) is back
    within tolerance of `baseline`; returns the last reading of those GPUs and the wait."""
    start = time.monotonic()
    delay = 0.1
    while True:
        now = read()
        mine = None if now is None else pick(now, indices)
        settled = mine is None or all(
            n <= b + SETTLE_TOLERANCE_MIB for n, b in zip(mine, pick(baseline, indices), strict=False)
        )
        waited = time.monotonic() - start
        if settled or waited >= bound_s or (cancelled is not None and cancelled.is_set()):
            return mine, waited
        # GPU memory has no change notification to wait on, so this one wait polls.
        if cancelled is not None:
            cancelled.wait(delay)
        else:
            time.sleep(delay)
        delay = min(delay * 2, 1.0)


def pick(values: list[int], indices: Sequence[int] | None) -> list[int]:
    """The readings of the GPUs at `indices` (all of them for None)."""
    return list(values) if indices is None else [values[i] for i in indices if i < len(values)]


# -- activity (stall detection, hang stacks) -----------------------------------------------


def activity(indices: Sequence[int]) -> list[tuple[int, int]] | None:
    """(utilisation %, used MiB) of the GPUs at host `indices`, through NVML only (nvidia-smi
    is too slow to call every second); None where NVML does not answer."""
    found = _nvml(lambda nv, h: (int(nv.nvmlDeviceGetUtilizationRates(h).gpu), int(nv.nvmlDeviceGetMemoryInfo(h).used)))
    if found is None:
        return None
    return [(util, used // (1 << 20)) for i, (util, used) in enumerate(found) if i in indices]


def process_usage() -> dict[int, list[str]] | None:
    """Per pid, what NVML says it holds on each GPU ("GPU 0: 1234 MiB, 87% SM"); None without NVML."""
    found = _nvml(_process_lines)
    if found is None:
        return None
    usage: dict[int, list[str]] = {}
    for index, lines in enumerate(found):
        for pid, text in lines:
            usage.setdefault(pid, []).append(f"GPU {index}: {text}")
    return usage


def _process_lines(nv: Any, handle: Any) -> list[tuple[int, str]]:
    sm: dict[int, int] = {}
    with contextlib.suppress(Exception):  # no samples yet is an NVML error of its own
        sm = {s.pid: int(s.smUtil) for s in nv.nvmlDeviceGetProcessUtilization(handle, 0)}
    lines = []
    for proc in nv.nvmlDeviceGetComputeRunningProcesses(handle):
        used = proc.usedGpuMemory
        mib = "?" if used is None else str(int(used) // (1 << 20))
        util = f", {sm[proc.pid]}% SM" if proc.pid in sm else ""
        lines.append((int(proc.pid), f"{mib} MiB{util}"))
    return lines
