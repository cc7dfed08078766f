"""The registry: names, build(), standard keywords, unknown names."""

import inspect
import warnings

import pytest
import torch

import posenc
from posenc.base import FAMILIES, STANDARD_KWARGS, PositionalEncoding, model_kwargs, takes

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
    whose signature takes it, silently; the class given one it does not use directly still
    builds the same encoding, for one release, with a DeprecationWarning naming them."""
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
    unused = [k for k in STANDARD_KWARGS if k not in used]
    torch.manual_seed(0)
    if not unused:  # it takes them all: nothing to drop, nothing to warn about
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            got = cls(**std).state_dict()
    else:
        with pytest.warns(DeprecationWarning, match=f"{cls.__name__} does not use {unused[0]}"):
            got = cls(**std).state_dict()
    assert got.keys() == want.keys()
    for key in want:
        torch.testing.assert_close(got[key], want[key])


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
