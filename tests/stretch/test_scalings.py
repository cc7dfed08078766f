"""posenc.stretch.scalings: labels -> rope_parameters that posenc.hf reads."""

import re

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from posenc.stretch.scalings import READS, SCALINGS, Scaling, parse, parse_all, split_labels


def test_every_scaling_builds_a_rope_posenc_reads():
    from posenc import build

    for name in SCALINGS:
        p = parse(name).params(context=256, head_dim=16, factor=2.0)
        if p is None:
            assert name == "none"
            continue
        rope = build("rope", head_dim=16, scaling={"rope_theta": 1e4, **p})
        inv_freq, af = rope.frequencies(torch.arange(512)[None], 16)
        assert inv_freq.shape == (8,) and torch.isfinite(inv_freq).all() and af > 0


def test_default_factor_and_keywords():
    assert parse("yarn").params(context=100, head_dim=8, factor=3.0)["factor"] == 3.0
    p = parse("yarn(factor=4,beta_fast=16)").params(context=100, head_dim=8, factor=3.0)
    assert p["factor"] == 4.0 and p["beta_fast"] == 16
    assert p["original_max_position_embeddings"] == 100
    lr = parse("longrope").params(context=100, head_dim=8, factor=2.0)
    assert lr["long_factor"][0] == 1.0 and lr["long_factor"][-1] == 2.0
    assert lr["short_factor"] == [1.0] * 4
    assert "factor" not in parse("dynamic_yarn").params(context=100, head_dim=8, factor=2.0)


def test_labels_split_on_top_level_commas_only():
    assert split_labels("none, yarn(factor=2,beta_fast=16) ,linear") == [
        "none", "yarn(factor=2,beta_fast=16)", "linear"]  # fmt: skip
    assert [s.label for s in parse_all("yarn(factor=2),yarn(factor=2)")] == ["yarn(factor=2)"]


@pytest.mark.parametrize("bad", ["", " , ", "yran", "yarn(factor)", "yarn(", "yarn)",
                                 "none(factor=2)", "yarn(rope_type=linear)"])  # fmt: skip
def test_bad_labels_are_one_line_value_errors(bad):
    with pytest.raises(ValueError, match="--scalings"):
        parse_all(bad)


FACTORED = [n for n in SCALINGS if "factor" in READS[n]]
NUMBERS = st.floats(1.0, 64.0) | st.integers(1, 64)


@given(st.sampled_from(FACTORED), NUMBERS, st.none() | st.sampled_from(["full_attention", "x_1"]),
       st.booleans())  # fmt: skip
def test_label_round_trips(name, factor, layer_type, truncate):
    at = f"@{layer_type}" if layer_type else ""
    extra = f",truncate={str(truncate).lower()}" if name == "yarn" else ""
    s = parse(f" {name}{at}( factor = {factor!r}{extra} )")
    assert parse(s.label) == s and isinstance(s, Scaling)
    assert s.layer_type == layer_type and dict(s.kwargs)["factor"] == factor
    assert split_labels(f"{s.label},none") == [s.label, "none"]


@given(st.text(max_size=30))
def test_any_text_is_a_scaling_or_one_value_error_naming_the_flag(text):
    try:
        scalings = parse_all(text)
    except ValueError as err:
        assert "--scalings" in str(err) and "\n" not in str(err)
    else:
        for s in scalings:
            assert s.name in SCALINGS and parse(s.label) == s
            assert set(dict(s.kwargs)) <= set(READS[s.name])


@given(st.sampled_from(SCALINGS[1:]), st.sampled_from(["factor", "beta_fast", "truncate",
                                                     "low_freq_factor", "mscale"]),
       st.sampled_from(["abc", "true", "false", "nan", "inf", "-1", "0", "2", "1e9"]))  # fmt: skip
def test_a_keyword_is_taken_only_where_the_variant_reads_it_with_its_type_and_range(
    name, key, value
):
    label = f"{name}({key}={value})"
    try:
        s = parse(label)
    except ValueError as err:
        assert str(err).startswith(f"--scalings {label!r}") or "--scalings" in str(err)
        return
    v = dict(s.kwargs)[key]
    assert key in READS[name]
    assert isinstance(v, bool) == (key == "truncate")
    if key != "truncate":
        assert v == v and abs(v) != float("inf") and v > 0


@pytest.mark.parametrize("bad, says", [
    ("yarn(factor=abc)", "factor must be a number"),
    ("yarn(factor=true)", "factor must be a number"),
    ("dynamic_yarn(factor=4)", "does not read 'factor'"),
    ("linear(beta_fast=32)", "does not read 'beta_fast'"),
    ("yarn(factor=2,factor=3)", "given twice"),
    ("yarn@(factor=2)", "name@layer_type"),
    ("none@full_attention", "no layer type"),
])  # fmt: skip
def test_labels_that_claim_what_they_do_not_do_are_refused(bad, says):
    with pytest.raises(ValueError, match=re.escape(says)) as err:
        parse(bad)
    assert f"--scalings {bad!r}" in str(err.value)


def test_layer_types_resolve_against_the_model():
    flat = parse("yarn(factor=4)")
    assert flat.for_model(None, None) == flat  # one rope: the label as it is
    aimed = flat.for_model(["sliding_attention", "full_attention"], ["full_attention"])
    assert aimed.targets == ("full_attention",) and aimed.label == "yarn(factor=4)"
    p = aimed.params(context=100, head_dim=8, factor=2.0)
    assert set(p) == {"full_attention"} and p["full_attention"]["factor"] == 4.0
    one = parse("yarn@sliding_attention(factor=4)").for_model(["sliding_attention", "full"], None)
    assert set(one.params(context=100, head_dim=8, factor=2.0)) == {"sliding_attention"}
    with pytest.raises(ValueError, match="name a type"):
        flat.for_model(["sliding_attention", "full_attention"], None)
    with pytest.raises(ValueError, match="layer types with RoPE"):
        parse("yarn@global(factor=2)").for_model(["sliding_attention", "full_attention"], None)
    with pytest.raises(ValueError, match="one rope for every layer"):
        parse("yarn@full_attention").for_model(None, None)
