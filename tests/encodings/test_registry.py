"""The registry: names, build(), standard keywords, unknown names."""

import inspect
import warnings

import pytest
import torch

import posenc
from posenc.base import FAMILIES, MODEL_KWARGS, PositionalEncoding, model_kwargs, takes

DESIGN_NAMES = [
    *("sinusoidal", "learned", "scaled_sinusoidal", "onehot", "index", "phase"),
    *("sinusoidal_2d", "sinusoidal_3d", "rope", "xpos", "rope_2d", "alibi", "t5", "kerple"),
    *("fire", "sandwich", "shaw", "transformer_xl", "deberta", "cope", "nope", "randomized"),
]


def test_registry_is_a_plain_dict_of_encoding_classes():
    assert isinstance(posenc.ENCODINGS, dict)
    for name, cls in posenc.ENCODINGS.items():
        assert name == name.lower() and " " not in name
        assert issubclass(cls, PositionalEncoding)
        assert cls.family in FAMILIES, name
        assert cls.summary and cls.paper, f"{name} needs a summary and a paper for `posenc list`"


@pytest.mark.parametrize("name", DESIGN_NAMES)
def test_every_design_name_is_registered(name):
    assert name in posenc.ENCODINGS


@pytest.mark.parametrize("name", sorted(posenc.ENCODINGS))
def test_build_accepts_the_standard_keywords(name):
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the standard keywords never warn
        enc = posenc.build(name, dim=32, heads=4, head_dim=8, max_len=64, train_len=16)
    assert isinstance(enc, PositionalEncoding)
    # each constructor takes the standard keywords it uses (max_len, the hard limit, all)
    params = set(inspect.signature(type(enc)).parameters)
    assert "max_len" in params and takes(type(enc)) >= params


@pytest.mark.parametrize("name", sorted(posenc.ENCODINGS))
def test_each_keyword_reaches_only_the_constructors_that_take_it(name):
    """build() passes a standard keyword (the model's shape and lengths) only to a constructor
    whose signature takes it, silently; the class given one it does not take directly is a
    TypeError naming it (no deprecated path)."""
    cls = posenc.ENCODINGS[name]
    std = dict(dim=32, heads=4, head_dim=8, max_len=64, train_len=16)
    used = {k: v for k, v in std.items() if k in inspect.signature(cls).parameters}
    assert model_kwargs(cls, {**std, "kv_heads": 2}) == {
        **used, **({"kv_heads": 2} if "kv_heads" in takes(cls) else {})
    }  # fmt: skip
    torch.manual_seed(0)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        want = cls(**used).state_dict()
    torch.manual_seed(0)
    got = posenc.build(name, **std).state_dict()
    assert got.keys() == want.keys()
    for key in want:
        torch.testing.assert_close(got[key], want[key])
    for key in (k for k in std if k not in used):
        with pytest.raises(TypeError, match=key):
            cls(**{**used, key: std[key]})


# Standard keywords a constructor reads only under one of its options (without it, nothing of
# the encoding scales with them): the option under which each is read.
YARN = {"rope_type": "yarn", "factor": 2.0}  # its max_position_embeddings comes from train_len
READ_UNDER = {
    ("dape", "train_len"): dict(encoding="fire"),  # given to its inner bias, where that takes it
    ("learned", "train_len"): dict(max_len=None),  # the table's rows when max_len is not given
    ("learned_window", "train_len"): dict(max_len=None),
    ("rope", "train_len"): dict(scaling=YARN),
    ("rope_heads", "train_len"): dict(scaling=YARN),  # its RoPE's
    ("rope_pp", "train_len"): dict(scaling=YARN),
}


def test_read_under_names_registered_encodings():
    assert {name for name, _ in READ_UNDER} <= set(posenc.ENCODINGS)


@pytest.mark.parametrize("name", sorted(posenc.ENCODINGS))
def test_each_standard_keyword_a_constructor_takes_is_read(name):
    """A constructor takes only the standard keywords it uses: each one it takes is read and
    checked, so a bad value is a TypeError / ValueError naming it, at the defaults or, for a
    keyword read only under an option, under READ_UNDER's option (without which it is
    ignored). A constructor taking a keyword it never reads fails here."""
    cls = posenc.ENCODINGS[name]
    std = dict(dim=32, heads=4, head_dim=8, max_len=64, train_len=16)
    kwargs = model_kwargs(cls, std)
    for key in (k for k in MODEL_KWARGS if k in kwargs):
        option = READ_UNDER.get((name, key), {})
        if option:  # not read without the option (else the entry is not needed)
            cls(**{**kwargs, key: "bogus"})
        for bad in ("bogus", 2.5, -3):
            with pytest.raises((TypeError, ValueError), match=key):
                cls(**{**kwargs, **option, key: bad})


@pytest.mark.parametrize("name", sorted(posenc.ENCODINGS))
def test_build_rejects_unknown_keywords(name):
    with pytest.raises(TypeError, match=f"{name} takes no keyword 'not_a_real_option'"):
        posenc.build(name, dim=32, heads=4, head_dim=8, train_len=16, not_a_real_option=1)
    with pytest.raises(TypeError, match="not_a_real_option"):  # the class itself: Python's error
        posenc.ENCODINGS[name](max_len=8, not_a_real_option=1)


def test_unknown_name_lists_closest():
    with pytest.raises(ValueError, match="did you mean 'sinusoidal'"):
        posenc.build("sinusodial")
    with pytest.raises(ValueError, match="Known encodings"):
        posenc.build("zzzz")
    with pytest.raises(TypeError, match="must be a str"):
        posenc.build(3)
