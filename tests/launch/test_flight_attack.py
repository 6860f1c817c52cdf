"""Hostile flight-recorder dumps (issue 31's sweep of this round): a server writes what it likes
into its own `stacks/flight-recorder/`; no dump may hang diagbench, grow it without bound, or
turn a hang into diagbench's own failure. Real servers plant the dumps, diagbench runs as a
process of its own (a bomb hashed in C is deaf to signals: an in-process test would hang)."""

from __future__ import annotations

import json
import pickle
import resource
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from conftest import diagbench_argv, write_spec

# a tuple of 2**60 'a's in 300 bytes: each level is the one below twice, through the memo
_SHARED = b"\x8c\x01a\x940" + b"".join(b"h" + bytes([i]) + b"h" + bytes([i]) + b"\x86\x940" for i in range(60))
HASH_BOMB = b"\x80\x04}" + _SHARED + b"h\x3cK\x01s."  # {that tuple: 1}: its hash is 2**60 steps
SHOW_BOMB = (  # {"entries": [{"profiling_name": that tuple, ...}]}: its str() is 2**60 characters
    b"\x80\x04" + _SHARED + b"}(\x8c\x07entries](}(\x8c\x0eprofiling_nameh\x3c\x8c\x0dprocess_grouph\x3c"
    b"\x8c\x11collective_seq_idK\x05\x8c\x05pg_idK\x00ueu."
)
BUILD = b"}}b."  # BUILD on a dict: the C unpickler's AttributeError

FAIR = pickle.dumps(  # rank 1's: one collective in the default group
    {"entries": [{"collective_seq_id": 1, "pg_id": 0, "process_group": ("0", "default_pg"), "profiling_name": "x"}]}
)
PLANTER = textwrap.dedent(
    """
    import os, sys, time
    flight = os.environ["DIAGBENCH_FLIGHT_DIR"]
    for rank, dump in enumerate(sys.argv[1:]):
        with open(os.path.join(flight, f".rank_{rank}"), "wb") as out:
            out.write(bytes.fromhex(dump))
        os.rename(os.path.join(flight, f".rank_{rank}"), os.path.join(flight, f"rank_{rank}"))
    print("planted", flush=True)
    time.sleep(300)
    """
)


def _limited() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (3 << 30, 3 << 30))  # a bomb that grows fails, not the host


@pytest.mark.parametrize("dump", [SHOW_BOMB, HASH_BOMB, BUILD], ids=["show", "hash", "build"])
def test_a_hostile_dump_leaves_the_hang_recorded_and_diagbench_on_time(tmp_path: Path, dump: bytes) -> None:
    planter = tmp_path / "planter.py"
    planter.write_text(PLANTER)
    server = {
        "command": [sys.executable, str(planter), dump.hex(), FAIR.hex()],
        "ready": {"log": "never ready"},
        "timeout": "2s",
        "grace": "1s",
        "stacks": "flight-recorder",
    }
    spec = write_spec(tmp_path, server)
    argv = diagbench_argv("run", str(spec), "--runs-dir", str(tmp_path / "runs"), "--quiet")
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=90, preexec_fn=_limited)
    except subprocess.TimeoutExpired:
        pytest.fail("diagbench hung on a flight-recorder dump its server wrote")
    assert "internal_error" not in done.stdout + done.stderr, done.stdout + done.stderr
    (result,) = (tmp_path / "runs" / "latest").glob("cells/*/result.json")
    record = json.loads(result.read_text())
    assert record["outcome"] == "timeout" and record["hang"] is not None
