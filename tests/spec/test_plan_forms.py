"""`plan` computes the plan once (a `Plan` value) and shows it as text or JSON: both forms
say the same thing, read back from each other."""

from __future__ import annotations

import json
import re
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

from conftest import diagbench_argv, write_spec

SPEC: dict[str, Any] = {
    "server": {
        "command": [sys.executable, "-m", "http.server", "--port", "{port}", "--api-key", "sk-live-abcdefghijklmnop"],
        "env": {"MODE_BASE": "1"},
        "ready": {"log": "up and running", "request": {"path": "/v1/models?token=abc123secret", "status": 200}},
    },
    "matrix": {
        "kernel": {"args": ["--kernel", "{value}"], "values": ["mma", "stock"]},
        "graphs": {"env": "GRAPHS", "values": {"on": "1", "unset": None}},
    },
    "hypotheses": [
        {"id": "kernel-blocks", "when": {"kernel": ["mma"]}, "supported_if": "failed", "refuted_if": "ready"},
        {"id": "graphs-off", "when": {"graphs": ["unset"]}, "supported_if": "ready", "refuted_if": "failed"},
    ],
    "expect": [{"when": {"kernel": ["stock"]}, "outcome": "ready"}],
}


def _plan(spec: Path, *args: str) -> tuple[str, dict[str, Any]]:
    text = subprocess.run(diagbench_argv("plan", str(spec), "--gpus", "none", *args), capture_output=True, text=True)
    data = subprocess.run(
        diagbench_argv("plan", str(spec), "--gpus", "none", "--json", *args), capture_output=True, text=True
    )
    assert text.returncode == data.returncode == 0, text.stderr + data.stderr
    return text.stdout, json.loads(data.stdout)


def _cells_of(text: str) -> list[dict[str, Any]]:
    """The cells the text form shows, read back as the JSON form holds them."""
    cells: list[dict[str, Any]] = []
    for line in text.splitlines():
        if m := re.fullmatch(r"\[(\d+)\] (.+)", line):
            cells.append({"index": int(m[1]), "cell_id": m[2], "env": {}, "decides": []})
        elif line.startswith("    argv: "):
            cells[-1]["argv"] = shlex.split(line[10:])
        elif line.startswith("    env:  "):
            words = line[10:].split("  ")
            unset: dict[str, str | None] = {w[6:]: None for w in words if w.startswith("unset ")}
            cells[-1]["env"] = unset | dict(w.split("=", 1) for w in words if not w.startswith("unset "))
        elif line.startswith("    decides: "):
            cells[-1]["decides"] = line[13:].split(", ")
    return cells


def test_the_text_and_the_json_plan_say_the_same(tmp_path: Path) -> None:
    spec = write_spec(tmp_path, **SPEC)
    text, data = _plan(spec, "--stop-when-decided", "--repeat", "2")
    wanted = [{k: c[k] for k in ("index", "cell_id", "argv", "env", "decides")} for c in data["cells"]]
    assert _cells_of(text) == wanted
    assert len(wanted) == data["cells_selected"] == data["cells_total"] == 4
    first = text.splitlines()[0]
    assert first.startswith(f"{data['spec']}: 4 of 4 cell(s); port: a free port per cell; cwd: {data['cwd']}")
    ready = data["ready"]
    assert ready["request"] == "GET /v1/models?token=<redacted> -> 200"  # the text's, now the JSON's too
    assert f"ready when: log /{ready['log']}/, then {ready['request']}; timeout 20s, grace 2s" in text
    assert f"slots: {data['slots']}" in text
    order = [line.split(". ", 1)[1] for line in text.splitlines() if re.match(r"\s+\d+\. ", line)]
    shown = [f"{a['attempt']}: " + (", ".join(a["decides"]) or "skipped") for a in data["launch_order"]]
    assert [o.split(" (")[0] for o in order] == shown and len(shown) == 8
    assert "sk-live-abcdefghijklmnop" not in text + json.dumps(data)


def test_a_narrowed_plan_names_the_same_undecidable_hypotheses_in_both_forms(tmp_path: Path) -> None:
    spec = write_spec(tmp_path, **SPEC)
    text, data = _plan(spec, "--only", "kernel=stock", "--only", "graphs=on")
    assert data["not_decidable"] == ["kernel-blocks", "graphs-off"] and data["launch_order"] is None
    assert "not decidable with this selection: kernel-blocks, graphs-off" in text
    assert (
        [c["cell_id"] for c in _cells_of(text)] == [c["cell_id"] for c in data["cells"]] == ["kernel=stock,graphs=on"]
    )
    assert "launch order" not in text
