"""posenc.checks: the validators, and the one vocabulary: every old parameter name still works
for one release, with a DeprecationWarning, and gives what the new name gives."""

import pytest
import torch

import posenc
from posenc.checks import check_float, check_int, grid_positions, lookup, renamed
from posenc.functional import alibi_slopes, deberta_bucket


def test_validators_name_the_parameter_and_the_range():
    assert check_int("n", 3, low=1) == 3
    with pytest.raises(TypeError, match="n must be an int, got bool"):
        check_int("n", True)
    with pytest.raises(ValueError, match="n must be >= 1, got 0"):
        check_int("n", 0, low=1)
    with pytest.raises(ValueError, match="n must be an even int >= 2, got 3"):
        check_int("n", 3, low=2, even=True)
    assert check_float("x", 2) == 2.0
    for bad in (float("nan"), float("inf"), 0.0):
        with pytest.raises(ValueError, match="x must be a finite number > 0"):
            check_float("x", bad, gt=0)
    with pytest.raises(ValueError, match="did you mean 'rope'"):
        lookup("encoding", "ropee", posenc.ENCODINGS)
    assert grid_positions(torch.arange(3), 2).tolist() == [[0, 0], [1, 1], [2, 2]]


def test_renamed_keyword_warns_and_refuses_both_names():
    @renamed(old="new")
    def f(*, new=0):
        return new

    with pytest.warns(DeprecationWarning, match="old= is deprecated, use new="):
        assert f(old=5) == 5
    with pytest.raises(TypeError, match="pass new= only"):
        f(old=1, new=2)


OLD_AND_NEW = [
    (lambda: alibi_slopes(num_heads=6), lambda: alibi_slopes(heads=6)),
    (lambda: deberta_bucket(torch.arange(-40, 40), bucket_size=8, max_position=20),
     lambda: deberta_bucket(torch.arange(-40, 40), num_buckets=8, max_distance=20)),
    (lambda: posenc.build("shaw", head_dim=8, max_relative_position=3).max_distance,
     lambda: posenc.build("shaw", head_dim=8, max_distance=3).max_distance),
    (lambda: posenc.build("deberta", dim=16, heads=2, position_buckets=8,
                          max_relative_positions=20).span,
     lambda: posenc.build("deberta", dim=16, heads=2, num_buckets=8, max_distance=20).span),
    (lambda: posenc.build("cope", head_dim=8, npos_max=5).max_distance,
     lambda: posenc.build("cope", head_dim=8, max_distance=5).max_distance),
    (lambda: posenc.build("randomized", base="alibi", base_kwargs={"bidirectional": True},
                          max_positions=64, heads=2).inner.bidirectional,
     lambda: posenc.build("randomized", encoding="alibi", encoding_kwargs={"bidirectional": True},
                          sample_len=64, heads=2).inner.bidirectional),
    (lambda: posenc.build("t5", heads=2, max_len=20).max_distance,  # max_len as a hint
     lambda: posenc.build("t5", heads=2, train_len=20, num_buckets=32).max_distance),
    (lambda: posenc.build("fire", heads=2, max_len=64).init_L,
     lambda: posenc.build("fire", heads=2, train_len=64).init_L),
]  # fmt: skip


@pytest.mark.parametrize("old, new", OLD_AND_NEW)
def test_old_names_keep_working_with_a_deprecation_warning(old, new):
    with pytest.warns(DeprecationWarning, match="deprecated"):
        got = old()
    want = new()
    assert torch.equal(got, want) if isinstance(got, torch.Tensor) else got == want


def test_attention_old_position_keywords():
    q = k = v = torch.randn(1, 2, 4, 8)
    pos = torch.arange(4)
    enc = posenc.build("alibi", heads=2)
    with pytest.warns(DeprecationWarning, match="q_positions= is deprecated"):
        old = posenc.attention(q, k, v, enc, q_positions=pos, k_positions=pos)
    torch.testing.assert_close(old, posenc.attention(q, k, v, enc, q_pos=pos, k_pos=pos))


@pytest.mark.parametrize("name", ["sinusoidal", "sinusoidal_2d", "sinusoidal_3d"])
def test_the_embedding_scale_is_the_encodings_fact_also_under_a_wrapper(name):
    """sqrt(D) for the sinusoids (Vaswani 3.4), read from the encoding: `randomized` over
    sinusoidal used to lose it (the model kept a list of names)."""
    model = posenc.TransformerLM(vocab_size=5, dim=16, depth=1, heads=2, encoding=name)
    assert model.embed_scale == 4.0 and model.tok_emb.weight.std() > 0.1
    if name == "sinusoidal":
        wrapped = posenc.TransformerLM(
            vocab_size=5,
            dim=16,
            depth=1,
            heads=2,
            encoding="randomized",
            encoding_kwargs={"encoding": name},
        )
        assert wrapped.embed_scale == 4.0  # fmt: skip
    plain = posenc.TransformerLM(vocab_size=5, dim=16, depth=1, heads=2, encoding="rope")
    assert plain.embed_scale == 1.0
