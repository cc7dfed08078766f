"""The registry: names, build(), standard keywords, unknown names."""

import inspect
import warnings

import pytest

import posenc
from posenc.base import FAMILIES, STANDARD_KWARGS, PositionalEncoding

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
    assert set(STANDARD_KWARGS) <= set(inspect.signature(type(enc).__init__).parameters)


@pytest.mark.parametrize("name", sorted(posenc.ENCODINGS))
def test_build_rejects_unknown_keywords(name):
    with pytest.raises(TypeError):
        posenc.build(name, dim=32, heads=4, head_dim=8, train_len=16, not_a_real_option=1)


def test_unknown_name_lists_closest():
    with pytest.raises(ValueError, match="did you mean 'sinusoidal'"):
        posenc.build("sinusodial")
    with pytest.raises(ValueError, match="Known encodings"):
        posenc.build("zzzz")
    with pytest.raises(TypeError, match="must be a str"):
        posenc.build(3)
