"""Remedies as data: the built-in files, the loader's messages, and a change applied to a launch (pure)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from diagbench.errors import SpecError, UserError
from diagbench.isolate.problem import ServerRules
from diagbench.logs.signatures import builtin_packs, load_packs
from diagbench.triage.apply import Launch, apply_all, apply_change
from diagbench.triage.problem import from_command
from diagbench.triage.remedies import REMEDY_SERVERS, Change, Scale, builtin_files, load_catalogue, parse_file
from diagbench.vocab import FAILURE_CLASSES, OUTCOMES

CATALOGUE = load_catalogue()
SIGNATURE_IDS = {s.id for s in load_packs(builtin_packs(), Path("."))}


def test_every_named_server_has_remedies_each_with_a_source_and_a_price_request():
    servers = {r.server for r in CATALOGUE.remedies}
    assert {"vllm", "sglang", "tgi", "llamacpp", "ollama", "lmdeploy", "trtllm", "refserver", "simulator"} <= servers
    assert servers <= set(REMEDY_SERVERS) and servers <= set(CATALOGUE.requests)
    for remedy in CATALOGUE.remedies:
        assert remedy.source.strip() and remedy.gives_up.strip(), remedy.id
        assert remedy.id.startswith(remedy.server + "."), remedy.id


def test_every_failure_word_is_a_class_an_outcome_or_a_real_signature_id():
    for remedy in CATALOGUE.remedies:
        for word in remedy.when:
            assert word in FAILURE_CLASSES or word in OUTCOMES or word in SIGNATURE_IDS, (remedy.id, word)


def test_ids_are_unique_across_the_files():
    ids = [r.id for path in builtin_files() for r in parse_file(path)[2]]
    assert len(ids) == len(set(ids))


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("remedies: []\n", "x.yaml:1: missing key 'server' (name the server these remedies are for: vllm, "),
        ("server: vlm\nremedies: []\n", "x.yaml:1: server: unknown server \"vlm\" (did you mean 'vllm'?)"),
        (
            "server: vllm\nremedies:\n  - {id: a, for: oom, change: {add: [--x]}}\n",
            "x.yaml:3: remedies[0]: missing key 'source' (say where the advice comes from: the server's docs, code or a thread)",
        ),
        (
            "server: vllm\nremedies:\n  - {id: a, for: om, change: {add: [--x]}, source: s}\n",
            "x.yaml:3: remedies[0].for: \"om\" is no failure class, signature id or outcome (did you mean 'oom'?)",
        ),
        (
            "server: vllm\nremedies:\n  - {id: a, for: oom, change: {ad: [--x]}, source: s}\n",
            "x.yaml:3: remedies[0].change.ad: unknown key 'ad' (did you mean 'add'?)",
        ),
        (
            "server: vllm\nremedies:\n  - {id: a, for: oom, change: {remove: enforce-eager}, source: s}\n",
            'x.yaml:3: remedies[0].change.remove: "enforce-eager" is not an option (write the flag, e.g. --enforce-eager)',
        ),
        (
            "server: vllm\nremedies:\n  - {id: a, for: oom, change: {scale: {option: --x}}, source: s}\n",
            "x.yaml:3: remedies[0].change.scale: missing key 'by' (the factor, e.g. by: 0.5 to halve)",
        ),
        (
            "server: vllm\nremedies:\n  - {id: a, for: oom, change: {add: --x}, cost: 9, source: s}\n",
            'x.yaml:3: remedies[0].cost: expected an integer from 1 (nearly free) to 5 (a large loss), got "9"',
        ),
        (
            "server: vllm\nremedies:\n  - {id: a, for: oom, change: {add: --x}, source: s}\n"
            "  - {id: a, for: oom, change: {add: --y}, source: s}\n",
            "x.yaml:4: remedies[1]: duplicate remedy id 'a' (give each remedy its own id)",
        ),
        (
            "server: vllm\nremedies:\n  - {id: a, for: oom, change: {scale: {option: --x, by: 1e400}}, source: s}\n",
            'x.yaml:3: remedies[0].change.scale.by: expected a number from -1e+12 to 1e+12, got "1e400"',
        ),
        (
            "server: vllm\nremedies:\n  - {id: a, for: oom, change: {scale: {option: --x, by: 0}}, source: s}\n",
            'x.yaml:3: remedies[0].change.scale.by: expected a factor from 0.001 to 1000, got "0" (e.g. by: 0.5 to halve)',
        ),
        (
            "server: vllm\nremedies:\n  - {id: a, for: oom, change: {scale: {option: --x, by: .5, max: nan}}, source: s}\n",
            'x.yaml:3: remedies[0].change.scale.max: expected a number from -1e+12 to 1e+12, got "nan"',
        ),
        (
            "server: vllm\nremedies:\n  - {id: a, for: oom, change: {scale: {option: --x, by: .5, digits: 400}}, source: s}\n",
            'x.yaml:3: remedies[0].change.scale.digits: expected an integer from 0 to 12, got "400"',
        ),
    ],
)
def test_a_mistake_in_a_remedies_file_names_its_line_and_a_fix(tmp_path, text, message):
    path = tmp_path / "x.yaml"
    path.write_text(text)
    with pytest.raises(SpecError) as caught:
        load_catalogue([path])
    assert re.sub(r"^.*/x\.yaml", "x.yaml", str(caught.value)).startswith(message)


BASE = Launch(("srv", "--port", "{port}", "--enable-torch-compile", "--torch-compile-max-bs", "8", "--max-bs=32"), {})


def test_a_flag_is_added_once_and_removed_with_its_value():
    added = apply_change(BASE, Change(add=("--enforce-eager",)))
    assert added is not None and added.launch.argv[-1] == "--enforce-eager" and added.diff == ("+ --enforce-eager",)
    assert apply_change(added.launch, Change(add=("--enforce-eager",))) is None
    removed = apply_change(BASE, Change(remove=("--enable-torch-compile", "--torch-compile-max-bs")))
    assert removed is not None and removed.launch.argv == ("srv", "--port", "{port}", "--max-bs=32")
    assert removed.diff == ("- --enable-torch-compile", "- --torch-compile-max-bs 8")
    assert apply_change(removed.launch, Change(remove=("--enable-torch-compile",))) is None


def test_an_option_is_set_and_scaled_in_either_spelling_and_only_with_a_value_to_scale():
    halve = Change(scale=Scale(("--max-bs",), env=False, by=0.5, integer=True, low=1))
    applied = apply_change(BASE, halve)
    assert applied is not None and applied.launch.argv[-2:] == ("--max-bs", "16")
    assert applied.diff == ("~ --max-bs 32 -> 16",)
    assert apply_change(Launch(("srv", "--max-bs", "1"), {}), halve) is None  # at its bound: no change
    assert apply_change(Launch(("srv",), {}), halve) is None  # not set, and no default to halve
    with_default = Change(scale=Scale(("--mem", "-m"), env=False, by=0.85, default=0.9))
    short = apply_change(Launch(("srv", "-m", "0.8"), {}), with_default)
    assert short is not None and short.launch.argv == ("srv", "-m", "0.68")
    unset = apply_change(Launch(("srv",), {}), with_default)
    assert unset is not None and unset.diff == ("+ --mem 0.765",)
    assert apply_change(BASE, Change(set={"--max-bs": "32"})) is None


def test_variables_are_set_scaled_and_unset_and_two_changes_combine():
    launch = Launch(("srv",), {"TORCHINDUCTOR_CUDAGRAPHS": "1", "KV": "8"})
    env = apply_change(launch, Change(env={"NCCL_P2P_DISABLE": "1"}, unset=("TORCHINDUCTOR_CUDAGRAPHS",)))
    assert env is not None and env.launch.env == {"TORCHINDUCTOR_CUDAGRAPHS": None, "KV": "8", "NCCL_P2P_DISABLE": "1"}
    assert env.diff == ("+ NCCL_P2P_DISABLE=1", "- TORCHINDUCTOR_CUDAGRAPHS")
    kv = Change(scale=Scale(("KV",), env=True, by=0.5, integer=True))
    both = apply_all(launch, [kv, Change(add=("--x",))])
    assert both is not None and both.diff == ("~ KV=8 -> 4", "+ --x")
    assert apply_all(launch, [kv, Change(unset=("NOT_SET",))]) is None


@pytest.mark.parametrize(
    ("command", "server"),
    [
        ("vllm serve m --port {port}", "vllm"),
        ("/opt/venv/bin/python -m sglang.launch_server --model-path m --port {port}", "sglang"),
        ("CUDA_VISIBLE_DEVICES=0 llama-server -m x.gguf --port {port}", "llamacpp"),
        ("text-generation-launcher --model-id m --port {port}", "tgi"),
        ("OLLAMA_HOST=127.0.0.1:{port} ollama serve", "ollama"),
        ("trtllm-serve m --port {port}", "trtllm"),
        ("python3 -m diagbench.refserver --port {port}", "refserver"),
        ("./my-server --port {port}", None),
    ],
)
def test_the_server_is_read_from_the_command(tmp_path, command, server):
    problem = from_command(command, None, ServerRules(), (), 0, tmp_path)
    assert problem.server == server
    assert problem.server_spec.kind == (
        server if server in ("vllm", "sglang", "llamacpp", "tgi", "ollama", "trtllm") else None
    )


def test_a_command_without_port_is_one_message(tmp_path):
    with pytest.raises(UserError, match=r"^the command has no \{port\}: write \{port\} where it takes its port"):
        from_command("vllm serve m", None, ServerRules(), (), 0, tmp_path)


_DIRECTION = re.compile(r"\b(increas|decreas)\w*\s+(.*?)(?=\bor (?:increas|decreas)|\bwhen\b|[.\"]\s|$)", re.IGNORECASE)
_NAME = re.compile(r"`([\w.-]+)`|(--[\w-]+)|\b([A-Z][A-Z0-9_]{3,})\b")


def _said_direction(text: str) -> dict[str, str]:
    """What a server's message says to raise or lower: normalised name -> "up" or "down"."""
    said: dict[str, str] = {}
    for verb, words in _DIRECTION.findall(text):
        for found in _NAME.finditer(words):
            name = next(g for g in found.groups() if g).lstrip("-").replace("-", "_").lower()
            said[name] = "up" if verb.lower() == "increas" else "down"
    return said


def test_a_remedy_scales_a_setting_the_way_the_server_s_own_message_says():
    """A signature whose line says "Try increasing `X`" gets no remedy that lowers X (and the
    reverse): the advice is the server's, never turned around."""
    signatures = {s.id: s for s in load_packs(builtin_packs(), Path("."))}
    checked = []
    for remedy in CATALOGUE.remedies:
        scale = remedy.change.scale
        if scale is None:
            continue
        names = {n.lstrip("-").replace("-", "_").lower() for n in scale.names}
        for word in remedy.when:
            if word not in signatures:
                continue
            said = _said_direction(signatures[word].pattern + " " + signatures[word].source)
            for name in names & set(said):
                checked.append((remedy.id, word))
                assert (scale.by > 1) == (said[name] == "up"), (remedy.id, word, name, said[name], scale.by)
    assert ("vllm.double-cpu-kv-cache-space", "vllm.cpu_kv_space_host_oom") in checked
    assert ("vllm.halve-max-model-len", "vllm.kv_cache_too_short") in checked


def test_a_huge_value_in_the_launch_is_not_scaled_into_an_overflow():
    double = Change(scale=Scale(("--max-bs",), env=False, by=1000.0, integer=True))
    assert apply_change(Launch(("srv", "--max-bs", "1e308"), {}), double) is None


@pytest.mark.parametrize("given", ["/dev/zero", "fifo", "folder", "huge.yaml"])
def test_a_remedies_file_that_is_no_regular_file_or_too_large_is_one_message_at_once(tmp_path, given):
    import os
    import subprocess
    import sys

    os.mkfifo(tmp_path / "fifo")
    (tmp_path / "folder").mkdir()
    (tmp_path / "huge.yaml").write_text("server: vllm\nremedies:\n" + "  - {id: a, for: oom}\n" * 800_000)
    argv = [sys.executable, "-m", "diagbench", "remedies", "--remedies", given]
    done = subprocess.run(argv, capture_output=True, text=True, cwd=tmp_path, timeout=30)
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr and len(done.stderr.strip().splitlines()) == 1
    assert ("not a regular file" in done.stderr) or ("larger than the 256 KiB" in done.stderr)
