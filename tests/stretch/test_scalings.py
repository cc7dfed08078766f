"""posenc.stretch.scalings: labels -> rope_parameters that posenc.hf reads."""

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from posenc.stretch.scalings import SCALINGS, Scaling, parse, parse_all, split_labels


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


@given(st.sampled_from(SCALINGS[1:]), st.floats(1.0, 64.0))
def test_label_round_trips(name, factor):
    s = parse(f"{name}(factor={factor!r})")
    assert parse(s.label) == s and isinstance(s, Scaling)
