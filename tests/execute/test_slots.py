"""GPU slots with real processes: each running attempt owns its GPUs, no two overlap, and
the inventory honours what this process may use. No GPU needed: ids are used as given."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from itertools import combinations
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from rich.console import Console

from conftest import fake_command, write_spec
from diagbench.errors import UserError
from diagbench.execute.slots import Slot, group_gpus, plan_slots, topology_distance
from diagbench.launch import gpu
from diagbench.launch.gpu import Gpu, GpuOffer, offer_gpus
from diagbench.records.store import RunDir
from diagbench.render.live import Progress
from diagbench.schemas import load_schema
from diagbench.spec.gpus import GpuMode, parse_gpu_request
from diagbench.spec.load import load_spec
from diagbench.spec.plan import PlannedAttempt

READY = "The server is fired up and ready to roll!"
EIGHT = {"n": {"env": "DIAGBENCH_TEST_N", "values": [str(i) for i in range(1, 9)]}}
HOST = [Gpu(0, "GPU-aaaa-0000", "H200"), Gpu(1, "GPU-bbbb-1111", "H200"), Gpu(2, "GPU-cccc-2222", "H200")]


def journalled(tmp_path: Path, together: int) -> tuple[list[str], Path]:
    """A server that notes its CUDA_VISIBLE_DEVICES and lifetime, and becomes ready only once
    `together` servers have started: so the run must have had that many at once."""
    path = tmp_path / "journal.jsonl"
    path.touch()
    return fake_command(f"journal={path}", f"await={path}:{together}", f"out={READY}", "hang"), path


def lifetimes(path: Path) -> list[dict[str, Any]]:
    """One {pid, gpus, start, end} per server, from its journal lines."""
    spans: dict[int, dict[str, Any]] = {}
    for line in path.read_text().splitlines():
        entry = json.loads(line)
        span = spans.setdefault(entry["pid"], {"pid": entry["pid"], "gpus": entry["gpus"]})
        span[entry["event"]] = entry["t"]
    return list(spans.values())


def overlapping(a: dict[str, Any], b: dict[str, Any]) -> bool:
    return a["start"] < b["end"] and b["start"] < a["end"]


def test_eight_attempts_on_four_gpus_never_share_a_gpu(runs, tmp_path):
    command, journal = journalled(tmp_path, together=4)
    result = runs.run(write_spec(tmp_path, {"command": command}, EIGHT), gpus="0,1,2,3")
    assert [r.outcome for r in result.records] == ["ready"] * 8
    spans = lifetimes(journal)
    assert len(spans) == 8 and all("end" in s for s in spans), spans
    assert {s["gpus"] for s in spans} == {"0", "1", "2", "3"}  # every slot was used
    for a, b in combinations(spans, 2):
        if overlapping(a, b):
            assert set(a["gpus"].split(",")).isdisjoint(b["gpus"].split(",")), (a, b)
    at_once = max(sum(overlapping(a, b) for b in spans if b is not a) + 1 for a in spans)
    assert at_once == 4  # concurrency defaults to the number of slots
    for r in result.records:  # the record says what the server saw
        assert r.env_changes["CUDA_VISIBLE_DEVICES"] == ",".join(r.gpus)
        assert len(r.gpus) == 1
    manifest = json.loads((result.run_dir.path / "manifest.json").read_text())
    assert manifest["options"]["slots"] == [["0"], ["1"], ["2"], ["3"]]
    jsonschema.validate(manifest, load_schema("manifest"))
    for path in result.run_dir.cells.glob("*/result.json"):
        jsonschema.validate(json.loads(path.read_text()), load_schema("result"))


def test_two_gpus_per_attempt_give_disjoint_pairs(runs, tmp_path):
    command, journal = journalled(tmp_path, together=2)
    matrix = {"n": {"env": "DIAGBENCH_TEST_N", "values": ["1", "2", "3", "4"]}}
    result = runs.run(write_spec(tmp_path, {"command": command, "gpus": 2}, matrix), gpus="0,1,2,3")
    spans = lifetimes(journal)
    assert {s["gpus"] for s in spans} == {"0,1", "2,3"}
    assert sorted(",".join(r.gpus) for r in result.records) == ["0,1", "0,1", "2,3", "2,3"]
    for a, b in combinations(spans, 2):
        if overlapping(a, b):
            assert a["gpus"] != b["gpus"]


def test_parallel_caps_the_slots_in_use(runs, tmp_path):
    command, journal = journalled(tmp_path, together=1)
    matrix = {"n": {"env": "DIAGBENCH_TEST_N", "values": ["1", "2", "3"]}}
    runs.run(write_spec(tmp_path, {"command": command}, matrix), gpus="0,1,2,3", parallel=1)
    spans = lifetimes(journal)
    assert {s["gpus"] for s in spans} == {"0"}
    assert not any(overlapping(a, b) for a, b in combinations(spans, 2))


def test_servers_needing_no_gpu_get_no_visible_devices(runs, tmp_path):
    command, journal = journalled(tmp_path, together=1)
    result = runs.run(write_spec(tmp_path, {"command": command, "gpus": 0}), gpus="0,1")
    assert [s["gpus"] for s in lifetimes(journal)] == [os.environ.get("CUDA_VISIBLE_DEVICES")]
    assert result.records[0].gpus == [] and "CUDA_VISIBLE_DEVICES" not in result.records[0].env_changes


def diagbench(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "diagbench", *args],
        capture_output=True,
        text=True,
        env={**os.environ, **(env or {})},
        timeout=120,
    )


def test_more_gpus_per_attempt_than_offered_is_exit_2_before_any_launch(tmp_path):
    marker = tmp_path / "launched"
    spec = write_spec(tmp_path, {"command": fake_command(f"journal={marker}", f"out={READY}"), "gpus": 5})
    done = diagbench("run", str(spec), "--gpus", "0,1,2,3", "--runs-dir", str(tmp_path / "runs"))
    assert done.returncode == 2, done.stderr
    assert "each attempt needs 5 GPUs, but only 4 are offered" in done.stderr
    assert "Traceback" not in done.stderr
    assert not marker.exists() and not (tmp_path / "runs").exists()


@pytest.mark.parametrize(
    ("gpus", "message"),
    [("0,,1", "--gpus 0,,1: expected all, none, or GPU ids"), ("0,zero", "'zero' is not a GPU id")],
)
def test_bad_gpu_lists_are_one_message(tmp_path, gpus, message):
    spec = write_spec(tmp_path, {"command": fake_command(f"out={READY}")})
    done = diagbench("run", str(spec), "--gpus", gpus, "--runs-dir", str(tmp_path / "runs"))
    assert done.returncode == 2 and message in done.stderr and "Traceback" not in done.stderr


def test_a_spec_setting_visible_devices_itself_is_refused_while_slots_hand_them_out(tmp_path):
    server = {"command": fake_command(f"out={READY}"), "env": {"CUDA_VISIBLE_DEVICES": "3"}}
    spec = write_spec(tmp_path, server)
    done = diagbench("run", str(spec), "--gpus", "0,1", "--runs-dir", str(tmp_path / "runs"))
    assert done.returncode == 2
    assert "server.env sets CUDA_VISIBLE_DEVICES" in done.stderr and "--gpus none" in done.stderr


def test_the_spec_names_the_default_gpus_and_plan_shows_the_slots(tmp_path):
    spec = write_spec(tmp_path, {"command": fake_command(f"out={READY}"), "gpus": 2}, gpus=[0, 1, 2, 3, 4])
    done = diagbench("plan", str(spec), env={"PATH": os.path.dirname(sys.executable)})  # no nvidia-smi here
    assert done.returncode == 0, done.stderr
    assert "slots: 2 slots of 2 GPUs each: [0,1] [2,3] (--gpus)" in done.stdout
    assert "GPU 4 left unused: 5 offered, 2 per attempt" in done.stderr
    assert "as given" in done.stderr  # no GPU can be queried (or not these): the list is used as written


def test_a_bare_number_as_the_spec_gpu_list_says_which_key_was_meant(tmp_path):
    spec = write_spec(tmp_path, {"command": fake_command(f"out={READY}")}, gpus=2)
    with pytest.raises(UserError, match=r"spec.yaml:\d+: gpus: a bare number is ambiguous here"):
        load_spec(spec)


# -- the inventory, against a fake nvidia-smi (a real process on PATH) --------------------------

FAKE_SMI = """#!{python}
import sys
args = " ".join(sys.argv[1:])
if "--query-gpu=index,uuid,name" in args:
    print("0, GPU-aaaa-0000, NVIDIA H200\\n1, GPU-bbbb-1111, NVIDIA H200\\n2, GPU-cccc-2222, NVIDIA H200\\n3, GPU-dddd-3333, NVIDIA H200")
elif "--query-gpu=memory.used" in args:
    print("1\\n2\\n3\\n4")
elif args == "topo -m":
    print(open({topo!r}).read())
else:
    sys.exit(9)
"""
# `nvidia-smi topo -m` on a PCIe host: GPUs 0 and 2 share a switch, and so do 1 and 3
TOPO = """\
\tGPU0\tGPU1\tGPU2\tGPU3\tNIC0\tCPU Affinity\tNUMA Affinity\tGPU NUMA ID
GPU0\t X \tSYS\tPIX\tSYS\tNODE\t0-31\t0\t\tN/A
GPU1\tSYS\t X \tSYS\tPIX\tSYS\t32-63\t1\t\tN/A
GPU2\tPIX\tSYS\t X \tSYS\tNODE\t0-31\t0\t\tN/A
GPU3\tSYS\tPIX\tSYS\t X \tSYS\t32-63\t1\t\tN/A
NIC0\tNODE\tSYS\tNODE\tSYS\t X \t\t\t\t

Legend:

  X    = Self
  SYS  = Connection traversing PCIe as well as the SMP interconnect between NUMA nodes (e.g., QPI/UPI)
  PIX  = Connection traversing at most a single PCIe bridge
  NV#  = Connection traversing a bonded set of # NVLinks
"""


@pytest.fixture
def fake_smi(tmp_path, monkeypatch):
    folder = tmp_path / "bin"
    folder.mkdir()
    (tmp_path / "topo.txt").write_text(TOPO)
    smi = folder / "nvidia-smi"
    smi.write_text(FAKE_SMI.format(python=sys.executable, topo=str(tmp_path / "topo.txt")))
    smi.chmod(0o755)
    monkeypatch.setenv("PATH", f"{folder}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setitem(sys.modules, "pynvml", None)  # on a GPU host NVML would answer first
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    monkeypatch.delenv("CUDA_DEVICE_ORDER", raising=False)
    return smi


def test_all_means_every_gpu_nvidia_smi_lists(fake_smi):
    found = gpu.inventory()
    assert found is not None and [g.index for g in found] == [0, 1, 2, 3]
    offer = offer_gpus(parse_gpu_request("all"), os.environ, found)
    assert offer.ids == ("0", "1", "2", "3")
    assert offer.env == {"CUDA_DEVICE_ORDER": "PCI_BUS_ID"}  # nvidia-smi's numbering is PCI bus order
    assert gpu.memory_used_mib() == [1, 2, 3, 4]


def test_pairs_follow_the_pcie_switches(fake_smi, tmp_path):
    spec = load_spec(write_spec(tmp_path, {"command": fake_command(f"out={READY}"), "gpus": 2}))
    offer = offer_gpus(parse_gpu_request("all"), os.environ, gpu.inventory())
    distance = topology_distance(offer.host_index, gpu.topology())
    slots = plan_slots(spec.server, spec.cells, offer, None, distance)
    assert [s.gpus for s in slots.slots] == [("0", "2"), ("1", "3")]


def test_a_run_on_all_gpus_of_a_host_that_nvidia_smi_lists(fake_smi, runs, tmp_path):
    command, journal = journalled(tmp_path, together=4)
    runs.run(write_spec(tmp_path, {"command": command}, EIGHT), gpus="all")
    assert {s["gpus"] for s in lifetimes(journal)} == {"0", "1", "2", "3"}


@pytest.mark.parametrize(
    ("where", "seen"),
    [("nowhere", "PCI_BUS_ID"), ("server.env", "FASTEST_FIRST"), ("the matrix", "FASTEST_FIRST")],
)
def test_the_spec_s_own_device_order_wins(fake_smi, runs, tmp_path, where, seen):
    """diagbench asks for PCI bus order (nvidia-smi's numbering) only where the spec says nothing."""
    server: dict[str, Any] = {"command": fake_command("env=CUDA_DEVICE_ORDER", f"out={READY}", "hang")}
    matrix = None
    if where == "server.env":
        server["env"] = {"CUDA_DEVICE_ORDER": "FASTEST_FIRST"}
    if where == "the matrix":
        matrix = {"order": {"env": "CUDA_DEVICE_ORDER", "values": ["FASTEST_FIRST"]}}
    (record,) = runs.run(write_spec(tmp_path, server, matrix), gpus="0").records
    assert record.outcome.value == "ready"
    log = (runs.last.run_dir.cells / record.attempt / "server.log").read_text()
    assert log.splitlines()[0] == f"CUDA_DEVICE_ORDER={seen}"


# -- pure parts ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("inherited", "expected"),
    [
        (None, ["0", "1", "2"]),
        ("2,0", ["2", "0"]),
        ("GPU-bbbb,2", ["GPU-bbbb", "2"]),  # UUIDs (or their prefixes) as CUDA takes them
        ("1,7,2", ["1"]),  # CUDA stops at the first entry that names no GPU
        ("", []),
        ("-1", []),
    ],
)
def test_visible_ids_honour_an_inherited_cuda_visible_devices(inherited, expected):
    assert gpu.visible_ids(HOST, inherited) == expected


def test_an_inherited_list_is_handed_out_as_written_and_keeps_its_order_setting():
    offer = offer_gpus(None, {"CUDA_VISIBLE_DEVICES": "GPU-cccc,1"}, HOST)
    assert offer.ids == ("GPU-cccc", "1")
    assert dict(offer.host_index) == {"GPU-cccc": 2, "1": 1}
    assert offer.env == {}  # the inherited list was written for the inherited order


def test_defaults_without_gpus_and_explicit_lists_without_a_query():
    assert offer_gpus(None, {}, None).ids == ()
    assert offer_gpus(parse_gpu_request("none"), {}, HOST).ids == ()
    listed = offer_gpus(parse_gpu_request("0,1,2,3"), {}, None)
    assert listed.ids == ("0", "1", "2", "3") and len(listed.notes) == 1 and "as given" in listed.notes[0]
    with pytest.raises(UserError, match="no GPU can be queried here"):
        offer_gpus(parse_gpu_request("all"), {}, None)
    assert offer_gpus(parse_gpu_request("all"), {"CUDA_VISIBLE_DEVICES": "4,5"}, None).ids == ("4", "5")


def test_ids_not_on_the_host_are_used_as_given_with_a_note():
    offer = offer_gpus(parse_gpu_request("0,5"), {}, HOST)
    assert offer.ids == ("0", "5") and offer.notes == (
        "--gpus 0,5: 5 not among this host's GPUs (0,1,2); used as given",
    )


def test_gpu_request_words():
    assert parse_gpu_request("ALL").mode is GpuMode.ALL
    assert parse_gpu_request(" 0, 3 ").ids == ("0", "3")
    with pytest.raises(ValueError, match="GPU 1 is listed twice"):
        parse_gpu_request("1,1")


def test_grouping_without_topology_keeps_the_given_order_and_says_what_is_left():
    assert group_gpus(["3", "1", "0", "2", "4"], 2) == ([("3", "1"), ("0", "2")], ["4"])


def test_nvlink_counts_beat_pcie_and_more_links_are_closer():
    assert gpu.link_distance("NV18") < gpu.link_distance("NV4") < gpu.link_distance("PIX") < gpu.link_distance("SYS")
    links = gpu.parse_topology(TOPO)
    assert links[(0, 2)] == gpu.link_distance("PIX") and links[(0, 0)] == 0.0 and (0, 4) not in links


def test_per_gpu_settle_watches_only_the_slots_gpus():
    readings = iter([[9000, 100], [9000, 100]])
    now, waited = gpu.wait_for_baseline([1000, 100], read=lambda: next(readings), indices=[1], bound_s=5)
    assert now == [100] and waited < 1  # GPU 0 is busy with another attempt: not this slot's business


def test_a_fixed_port_runs_one_at_a_time_whatever_the_slots(tmp_path):
    spec = load_spec(write_spec(tmp_path, {"command": fake_command(f"out={READY}"), "port": 31999}))
    slots = plan_slots(spec.server, spec.cells, GpuOffer(("0", "1"), "--gpus"), None)
    assert [s.gpus for s in slots.slots] == [("0",)]
    assert any("server.port is fixed" in n for n in slots.notes)
    with pytest.raises(UserError, match=r"--parallel 2 needs server\.port: auto"):
        plan_slots(spec.server, spec.cells, GpuOffer(("0", "1"), "--gpus"), 2)


def test_the_live_view_names_each_attempts_gpus():
    spec = load_spec(Path(__file__).resolve().parents[2] / "experiments" / "demo.yaml")
    item = PlannedAttempt(spec.cells[0], 1)
    for terminal, shown in ((False, f"[0/1 running 1] {item.cell.id}: launching on GPU 2,3"), (True, "GPUs")):
        buffer = io.StringIO()
        progress = Progress(Console(file=buffer, force_terminal=terminal, width=160, color_system=None))
        progress.on_open(RunDir(Path("/tmp/x")), [item])
        progress.on_start(item, Slot(0, ("2", "3")))
        progress.close()
        assert shown in buffer.getvalue()
