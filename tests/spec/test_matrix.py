from __future__ import annotations

from pathlib import Path

import pytest

from diagbench.errors import UserError
from diagbench.spec.load import load_spec
from diagbench.spec.matrix import parse_only, select_cells

SPEC = """\
name: m
server: {command: "srv --port {port}"}
matrix:
  kernel:  {env: SGLANG_SM120_MMA_FLASHMLA, values: {mma: "1", stock: "0"}}
  compile: {flag: --enable-torch-compile, values: [on, off]}
  max_bs:  {args: [--cuda-graph-max-bs, "{value}", --torch-compile-max-bs, "{value}"], values: [32, 64]}
  inductor_graphs: {env: TORCHINDUCTOR_CUDAGRAPHS, values: [unset, "0"]}
  exclude: [{compile: off, inductor_graphs: "0"}]
  include:
    - {kernel: mma, compile: off, max_bs: 32, inductor_graphs: "0"}
"""


@pytest.fixture
def spec(tmp_path: Path):
    path = tmp_path / "m.yaml"
    path.write_text(SPEC)
    return load_spec(path)


def test_product_minus_exclude_plus_include_in_stable_order(spec):
    ids = [c.id for c in spec.cells]
    assert len(ids) == 2 * 2 * 2 * 2 - 4 + 1
    assert ids[0] == "kernel=mma,compile=on,max_bs=32,inductor_graphs=unset"
    assert ids[-1] == "kernel=mma,compile=off,max_bs=32,inductor_graphs=0"
    assert len(set(ids)) == len(ids)
    assert [c.index for c in spec.cells] == list(range(1, len(ids) + 1))


def test_yaml_booleans_keep_their_written_labels(spec):
    assert spec.axes[1].labels == ("on", "off")
    on = spec.cells[0]
    assert on.params["compile"] == "on"
    assert "--enable-torch-compile" in on.args


def test_axis_kinds_set_args_and_env(spec):
    cell = next(c for c in spec.cells if c.id == "kernel=stock,compile=off,max_bs=64,inductor_graphs=unset")
    assert cell.args == ("--cuda-graph-max-bs", "64", "--torch-compile-max-bs", "64")
    assert dict(cell.env) == {"SGLANG_SM120_MMA_FLASHMLA": "0", "TORCHINDUCTOR_CUDAGRAPHS": None}


def test_slug_is_a_safe_folder_name(spec):
    assert spec.cells[0].slug == "kernel-mma.compile-on.max_bs-32.inductor_graphs-unset"


def test_slug_keeps_labels_apart_from_the_separators() -> None:
    from diagbench.spec.matrix import Cell

    def slug(params: dict[str, str]) -> str:
        return Cell(1, "x", params, (), {}).slug

    assert slug({"root": ".", "bogus": "off"}) == "root-_.bogus-off"  # was root-..bogus-off
    assert slug({"root": "..", "bogus": "off"}) == "root-__.bogus-off"
    assert slug({"a": "-x", "b": "y-"}) == "a-_x.b-y_"
    assert slug({"torch": "2.4.0", "path": "a/b c"}) == "torch-2.4.0.path-a_b_c"  # dots inside stay


def test_only_narrows_and_repeats_mean_either(spec):
    only = parse_only(["compile=on", "max_bs=32", "max_bs=64", "kernel=stock"], spec.axes)
    chosen = select_cells(spec.cells, only)
    assert {c.params["compile"] for c in chosen} == {"on"}
    assert {c.params["max_bs"] for c in chosen} == {"32", "64"}
    assert len(chosen) == 4


@pytest.mark.parametrize(
    ("term", "message"),
    [
        ("compile", "--only compile: expected AXIS=LABEL, e.g. --only compile=on"),
        ("compiel=on", "--only compiel=on: unknown axis 'compiel' (did you mean 'compile'?)"),
        ("compile=true", "--only compile=true: unknown label 'true' for axis 'compile' (labels are: on, off)"),
    ],
)
def test_only_errors(spec, term, message):
    with pytest.raises(UserError) as caught:
        parse_only([term], spec.axes)
    assert str(caught.value) == message


def test_excluding_everything_is_an_error(tmp_path: Path):
    path = tmp_path / "m.yaml"
    path.write_text("name: m\nserver: {command: s}\nmatrix:\n  a: {flag: --x, values: [on]}\n  exclude: [{a: on}]\n")
    with pytest.raises(UserError, match="every cell is excluded"):
        load_spec(path)
