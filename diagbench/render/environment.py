"""The server's environment (manifest `environment`) as lines for people."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def environment_lines(environment: Mapping[str, Any] | None, packages: bool = True) -> list[str]:
    """What the server runs under: interpreter, torch's GPU stack, driver, variables, and each distribution."""
    if not environment:
        return ["environment: not recorded"]
    lines: list[str] = []
    python = environment.get("python")
    if not python:
        lines.append("server interpreter: not Python, or not found from its command (no distributions recorded)")
    elif python.get("error"):
        lines.append(f"server interpreter: {python.get('interpreter')}: could not be asked ({python['error']})")
    else:
        dists = python.get("distributions") or []
        where = f"{python.get('interpreter')} (Python {python.get('python')}, {len(dists)} dists)"
        lines.append(f"server interpreter: {where}")
        if torch := python.get("torch"):
            lines.append("torch: " + torch_words(torch))
    drivers = sorted({str(g.get("driver")) for g in environment.get("gpus") or [] if g.get("driver")})
    lines.append("GPU driver: " + (", ".join(drivers) if drivers else "none seen (no nvidia-smi)"))
    variables = environment.get("variables") or {}
    lines.append("steering variables: " + (" ".join(f"{k}={v}" for k, v in variables.items()) or "none set"))
    if packages and python and not python.get("error"):
        lines.extend(f"  {d['name']}=={d['version']}{origin_words(d.get('origin'))}" for d in python["distributions"])
    return lines


def torch_words(torch: Mapping[str, Any]) -> str:
    if torch.get("error"):
        return f"installed, but {torch['error']}"
    parts = [str(torch.get("torch")), f"CUDA {torch.get('cuda_runtime') or 'none'}"]
    if torch.get("nccl"):
        parts.append(f"NCCL {torch['nccl']}")
    if torch.get("gpus"):
        parts.append(", ".join(torch["gpus"]))
    return "; ".join(parts)


def origin_words(origin: Mapping[str, Any] | None) -> str:
    """Where a distribution came from, when not from an index: a local path or a VCS commit."""
    if not origin or origin.get("kind") == "index":
        return ""
    if origin.get("kind") == "vcs":
        return f" ({origin.get('vcs')} {origin.get('url')}@{str(origin.get('commit'))[:12]})"
    editable = ", editable" if origin.get("editable") else ""
    return f" ({origin.get('url')}{editable})"
