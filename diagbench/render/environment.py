"""The server's environment (manifest `environment`) as lines for people."""

from __future__ import annotations

from diagbench.jsonvalue import JSON, JSONObject, as_list, as_object

__all__ = ["environment_lines", "origin_words", "torch_words"]


def environment_lines(environment: JSONObject | None, packages: bool = True) -> list[str]:
    """What the server runs under: interpreter, torch's GPU stack, driver, variables, and each distribution."""
    if not environment:
        return ["environment: not recorded"]
    lines: list[str] = []
    python = as_object(environment.get("python"))
    dists = [d for d in map(as_object, as_list(python.get("distributions") if python else None)) if d is not None]
    if not python:
        lines.append("server interpreter: not Python, or not found from its command (no distributions recorded)")
    elif python.get("error"):
        lines.append(f"server interpreter: {python.get('interpreter')}: could not be asked ({python['error']})")
    else:
        where = f"{python.get('interpreter')} (Python {python.get('python')}, {len(dists)} dists)"
        lines.append(f"server interpreter: {where}")
        if torch := as_object(python.get("torch")):
            lines.append("torch: " + torch_words(torch))
    gpus = filter(None, map(as_object, as_list(environment.get("gpus"))))
    drivers = sorted({str(g.get("driver")) for g in gpus if g.get("driver")})
    lines.append("GPU driver: " + (", ".join(drivers) if drivers else "none seen (no nvidia-smi)"))
    variables = as_object(environment.get("variables")) or {}
    lines.append("steering variables: " + (" ".join(f"{k}={v}" for k, v in variables.items()) or "none set"))
    if packages and python and not python.get("error"):
        lines.extend(f"  {d.get('name')}=={d.get('version')}{origin_words(d.get('origin'))}" for d in dists)
    return lines


def torch_words(torch: JSONObject) -> str:
    if torch.get("error"):
        return f"installed, but {torch['error']}"
    parts = [str(torch.get("torch")), f"CUDA {torch.get('cuda_runtime') or 'none'}"]
    if torch.get("nccl"):
        parts.append(f"NCCL {torch['nccl']}")
    if gpus := as_list(torch.get("gpus")):
        parts.append(", ".join(str(g) for g in gpus))
    return "; ".join(parts)


def origin_words(value: JSON) -> str:
    """Where a distribution came from, when not from an index: a local path or a VCS commit."""
    origin = as_object(value)
    if not origin or origin.get("kind") == "index":
        return ""
    if origin.get("kind") == "vcs":
        return f" ({origin.get('vcs')} {origin.get('url')}@{str(origin.get('commit'))[:12]})"
    editable = ", editable" if origin.get("editable") else ""
    return f" ({origin.get('url')}{editable})"
