"""Factors from two command lines and from a spec's axes (pure: no launch)."""

from __future__ import annotations

import pytest

from diagbench.errors import UserError
from diagbench.isolate.axes import axis_space
from diagbench.isolate.factors import Factor, FactorKind, derive, shown_command
from diagbench.spec.matrix import Axis, AxisKind, Level


def pairs(good: str, bad: str, **kw) -> list[tuple[str, str, str | None, str | None]]:
    return [(f.name, f.kind.value, f.good, f.bad) for f in derive(good, bad, **kw).factors]


def test_flags_options_and_the_equals_form():
    got = pairs(
        "serve --port {port} --max-bs 32 --log-level=info",
        "serve --port {port} --max-bs=64 --log-level info --enable-torch-compile",
    )
    assert got == [("--max-bs", "option", "32", "64"), ("--enable-torch-compile", "flag", None, "on")]


def test_leading_env_words_and_env_options_are_factors():
    got = pairs("A=1 B=2 serve", "A=1 serve", good_env=["C=x"], bad_env=["B=3", "D="])
    assert got == [("B", "env", "2", "3"), ("C", "env", "x", None), ("D", "env", None, "")]


def test_positional_words_and_the_program():
    got = pairs("python3 serve.py model-a --tp 2", "python3.11 serve.py model-b --tp 2 extra")
    assert got == [
        ("program", "positional", "python3", "python3.11"),
        ("positional#2", "positional", "model-a", "model-b"),
        ("positional#3", "positional", None, "extra"),
    ]


def test_short_options_negative_numbers_and_repeated_options():
    got = pairs("prog -m mod --lora a --lora b --temp -1", "prog -m mod2 --lora a --lora c --temp -2")
    assert got == [("-m", "option", "mod", "mod2"), ("--lora#2", "option", "b", "c"), ("--temp", "option", "-1", "-2")]


def test_a_flag_before_a_word_is_told_apart_by_the_other_line():
    space = derive("prog --verbose input.txt", "prog --verbose --fast input.txt")
    assert [(f.name, f.kind) for f in space.factors] == [("--fast", FactorKind.FLAG)]
    assert space.notes == (
        "--fast: read as a flag (as an option with a value, the two lines would differ in 1 more place(s))",
    )
    assert shown_command(space.configuration(["--fast"])) == "prog --verbose --fast input.txt"


def test_an_option_that_takes_a_value_is_read_so_and_said():
    space = derive("prog --port {port}", "prog --port {port} --max-bs 64")
    assert [(f.name, f.bad) for f in space.factors] == [("--max-bs", "64")]
    assert space.notes == (
        "--max-bs: read as an option with a value (as a flag, the two lines would differ in 1 more place(s))",
    )


def test_words_after_double_dash_are_positional():
    got = pairs("prog -- --x 1", "prog -- --x 2")
    assert got == [("positional#3", "positional", "1", "2")]


def test_configurations_rebuild_good_bad_and_any_mix_in_place():
    space = derive("K=0 prog --a 1 --b --c x", "K=1 prog --a 2 --b --c x --d")
    assert space.configuration([]).args == ("prog", "--a", "1", "--b", "--c", "x")
    assert dict(space.configuration([]).env) == {"K": "0"}
    everything = [f.name for f in space.factors]
    assert space.configuration(everything).args == ("prog", "--a", "2", "--b", "--c", "x", "--d")
    mixed = space.configuration(["K", "--d"])
    assert (mixed.args, dict(mixed.env)) == (("prog", "--a", "1", "--b", "--c", "x", "--d"), {"K": "1"})
    assert mixed.params == {"K": "1", "--a": "1", "--d": "on"}


def test_a_bad_line_in_another_order_runs_as_written_and_says_so():
    space = derive("prog --a 1 --b 2 --c 3", "prog --b 2 --a 1 --c 4 --d")
    assert [f.name for f in space.factors] == ["--c", "--d"]
    assert space.configuration(["--c", "--d"]).args == ("prog", "--b", "2", "--a", "1", "--c", "4", "--d")
    assert space.configuration(["--d"]).args == ("prog", "--a", "1", "--b", "2", "--c", "3", "--d")
    assert space.notes[-1].startswith("the bad line puts shared words in another order")


def test_a_variable_only_good_sets_is_left_inherited_when_applied():
    space = derive("X=1 prog", "prog")
    assert dict(space.configuration(["X"]).env) == {}


def test_secrets_are_redacted_in_what_is_written_down():
    space = derive("prog", "HF_TOKEN=hf_abcdefghijklmnop prog --api-key sk-abcdefghijklmnop")
    assert [f.to_json()["bad"] for f in space.factors] == ["<redacted>", "<redacted>"]
    shown = shown_command(space.configuration([f.name for f in space.factors]))
    assert "hf_abc" not in shown and "sk-abc" not in shown


@pytest.mark.parametrize(
    ("good", "bad", "env", "message"),
    [
        (
            "prog 'open",
            "prog",
            [],
            "--good: cannot split the command like a shell would: No closing quotation (close the quote)",
        ),
        ("A=1", "prog", [], "--good: no command to run (write it after any NAME=value words)"),
        ("prog", "prog", ["oops"], "--bad-env oops: expected NAME=VALUE (e.g. --bad-env TORCHINDUCTOR_CUDAGRAPHS=1)"),
    ],
)
def test_unusable_command_lines_say_where(good, bad, env, message):
    with pytest.raises(UserError) as caught:
        derive(good, bad, bad_env=env)
    assert str(caught.value) == message


AXES = (
    Axis("kernel", AxisKind.ENV, ("K",), (Level("mma", "1"), Level("stock", "0"))),
    Axis("compile", AxisKind.FLAG, ("--enable-torch-compile",), (Level("on", "on"), Level("off", None))),
    Axis("bs", AxisKind.ARGS, ("--max-bs", "{value}"), (Level("32", "32"), Level("64", "64"))),
)


def test_spec_axes_whose_labels_differ_are_the_factors():
    space = axis_space(AXES, "kernel=stock,compile=off", "kernel=mma,compile=on")
    assert space.factors == (
        Factor("kernel", FactorKind.AXIS, "stock", "mma"),
        Factor("compile", FactorKind.AXIS, "off", "on"),
    )
    assert space.notes == ("bs: named on neither side; both take its first label '32'",)
    probe = space.configuration(["compile"])
    assert (probe.args, dict(probe.env), dict(probe.params)) == (
        ("--enable-torch-compile", "--max-bs", "32"),
        {"K": "0"},
        {"kernel": "stock", "compile": "on", "bs": "32"},
    )


def test_an_axis_named_on_one_side_only_is_a_mistake():
    with pytest.raises(UserError) as caught:
        axis_space(AXES, "bs=64", "bs=64,kernel=mma")
    assert str(caught.value) == "--good: axis 'kernel' is named in --bad only (name it in both; labels: mma, stock)"


@pytest.mark.parametrize(
    ("good", "message"),
    [
        ("kernal=mma", "--good kernal=mma: unknown axis 'kernal' (did you mean 'kernel'?)"),
        ("kernel=fast", "--good kernel=fast: unknown label 'fast' for axis 'kernel' (labels are: mma, stock)"),
        ("kernel", "--good kernel: expected AXIS=LABEL, e.g. --good compile=off,kernel=stock"),
        ("kernel=mma,kernel=stock", "--good kernel=stock: axis 'kernel' is already 'mma' (name each axis once)"),
    ],
)
def test_unusable_axis_terms_say_which(good, message):
    with pytest.raises(UserError) as caught:
        axis_space(AXES, good, "kernel=mma")
    assert str(caught.value) == message


# -- env(1) in front of the command ---------------------------------------------------------


def test_an_env_word_with_its_variables_is_the_environment_not_the_command():
    space = derive("prog --port {port} --a 1", "env FOO=bad prog --port {port} --a 2")
    assert [(f.name, f.kind.value, f.good, f.bad) for f in space.factors] == [
        ("FOO", "env", None, "bad"),
        ("--a", "option", "1", "2"),
    ]
    assert space.bad.words == ("prog", "--port", "{port}", "--a", "2")
    assert dict(space.configuration(["FOO"]).env) == {"FOO": "bad"}


@pytest.mark.parametrize(
    "good",
    ["env -u X prog", "env --unset=X prog", "env -uX prog", "env --unset X prog", "A=0 env -u X -- prog"],
)
def test_env_u_unsets_a_variable_on_its_side(good):
    space = derive(good, "X=1 prog")
    x = next(f for f in space.factors if f.name == "X")
    assert (x.kind, x.good, x.bad, x.good_unset, x.bad_unset) == (FactorKind.ENV, None, "1", True, False)
    assert (x.label(False), x.label(True)) == ("(unset)", "1")
    assert x.to_json() == {"name": "X", "kind": "env", "good": None, "bad": "1", "unset": ["good"]}
    assert space.configuration([]).args == ("prog",)
    assert space.configuration([]).env["X"] is None  # unset for the launch, not inherited
    assert space.configuration(["X"]).env["X"] == "1"


def test_unset_against_inherited_is_a_factor_and_applying_it_inherits():
    space = derive("env -u X prog", "prog --y")
    assert [(f.name, f.label(False), f.label(True)) for f in space.factors] == [
        ("X", "(unset)", "-"),
        ("--y", "-", "on"),
    ]
    assert "X" not in space.configuration(["X"]).env


def test_the_line_diagbench_prints_pastes_back_to_the_same_factors():
    space = derive(
        "env -u TORCHINDUCTOR_CUDAGRAPHS K=0 prog --port {port}",
        "K=1 TORCHINDUCTOR_CUDAGRAPHS=1 prog --port {port} --x",
    )
    everything = [f.name for f in space.factors]
    good, bad = shown_command(space.configuration([])), shown_command(space.configuration(everything))
    assert good == "env -u TORCHINDUCTOR_CUDAGRAPHS K=0 prog --port {port}"
    again = derive(good, bad)
    assert again.factors == space.factors
    assert [c.env for c in (again.configuration([]), again.configuration(everything))] == [
        {"TORCHINDUCTOR_CUDAGRAPHS": None, "K": "0"},
        {"K": "1", "TORCHINDUCTOR_CUDAGRAPHS": "1"},
    ]


@pytest.mark.parametrize(
    ("good", "message"),
    [
        (
            "env -i prog",
            "--good: env -i: not supported; isolate reads env's -u NAME, --unset=NAME and NAME=value "
            "(each launch inherits diagbench's environment: unset what must not be there with -u NAME)",
        ),
        ("env -C /tmp prog", "--good: env -C: not supported; isolate reads"),
        ("env - prog", "--good: env -: not supported; isolate reads"),
        ("env --ignore-environment prog", "--good: env --ignore-environment: not supported"),
        ("env -u", "--good: env -u: expected a variable name to unset (env -u NAME cmd ...)"),
        ("env --unset=A=B prog", "--good: env --unset=A=B: expected a variable name to unset"),
        ("env A=1 -u B prog", "--good: env would run '-u' as the command (write env's -u NAME before its NAME=value"),
        ("env -u X", "--good: no command to run (write it after any NAME=value words)"),
    ],
)
def test_env_options_diagbench_cannot_follow_are_refused(good, message):
    with pytest.raises(UserError) as caught:
        derive(good, "prog")
    assert str(caught.value).startswith(message)


# -- notes and costs ---------------------------------------------------------------------------


def test_one_part_written_two_ways_is_not_another_order():
    space = derive("prog --x=1 --y 2", "prog --x 1 --y=2 --z")
    assert [f.name for f in space.factors] == ["--z"]
    assert not any("another order" in note for note in space.notes)


def test_a_tie_between_the_two_readings_is_said_to_be_a_guess():
    space = derive("prog --x y", "prog --x z")
    assert [(f.name, f.kind) for f in space.factors] == [("--x", FactorKind.OPTION)]
    assert space.notes == (
        "--x: read as an option with a value, a guess: as a flag the two lines differ in as many places "
        "(if it is a flag, put --x at the end or before another option)",
    )
    assert derive("prog --port {port} --x y", "prog --port {port} --x y --z").notes == ()  # nothing named hangs on it


@pytest.mark.parametrize(("factors", "alone"), [(1, 2), (2, 4), (8, 10)])
def test_one_at_a_time_costs_good_bad_and_each_factor_alone_unless_that_is_bad(factors, alone):
    from diagbench.render.isolation import costs

    assert costs(factors, 1) == (
        f"toggling one factor at a time: {alone} launches (finds no interaction); "
        f"the full matrix: {2**factors} launches"
    )
