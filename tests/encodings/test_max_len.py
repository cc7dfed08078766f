"""max_len is the hard limit and train_len the hint, for the encodings that scale a setting
with the training length (cope, fire, fope, t5, rope with a scaling): max_len never changes
their numbers below the limit, train_len does; randomized never enlarges its inner encoding's
max_len. (The hard limit itself, max_len given alone: test_contract.py, registry-wide.)"""

from __future__ import annotations

import warnings

import pytest
import torch
from support.changed import assert_changed

import posenc
from posenc.encodings.rotary import RoPE
from posenc.encodings.wrappers import Randomized

NAMES = sorted(posenc.ENCODINGS)
HINT_READERS = ("cope", "fire", "fope", "t5")  # a setting scaled with train_len
B, H, DH, D = 2, 4, 8, 32


def build(name, **kw):
    torch.manual_seed(0)
    return posenc.build(name, dim=D, heads=H, head_dim=DH, **kw).eval()


def outputs(enc, T):
    torch.manual_seed(1)
    q, k, v = (torch.randn(B, H, T, DH) for _ in range(3))
    with torch.no_grad():
        return posenc.attention(q, k, v, enc)


@pytest.mark.parametrize("name", NAMES)
def test_max_len_alone_builds_silently(name):
    """No encoding warns about max_len (no deprecated meaning left): it is the limit."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert build(name, max_len=16).max_len == 16


@pytest.mark.parametrize("name", HINT_READERS)
def test_the_hint_is_train_len_never_max_len(name):
    """max_len alone: the default hint's numbers (as no keyword at all) below the limit;
    train_len: other numbers, the same with a limit beside it."""
    L = 16
    default, limited = build(name), build(name, max_len=4 * L)
    hinted, both = build(name, train_len=L), build(name, train_len=L, max_len=4 * L)
    assert (limited.max_len, hinted.max_len, both.max_len) == (4 * L, None, 4 * L)
    want, got = outputs(default, 2 * L), outputs(limited, 2 * L)
    torch.testing.assert_close(got, want, rtol=0, atol=0)
    torch.testing.assert_close(outputs(both, 2 * L), outputs(hinted, 2 * L), rtol=0, atol=0)
    assert_changed(outputs(hinted, 2 * L), want)  # the hint changes the numbers


def test_rope_scaling_reads_its_trained_length_from_train_len():
    """RoPE scaling's missing max_position_embeddings: train_len; max_len is the limit only
    (a scaling that needs the trained length and gets none is a ValueError naming train_len)."""
    dyn = {"rope_type": "dynamic", "factor": 2.0}
    with warnings.catch_warnings():
        warnings.simplefilter("error", DeprecationWarning)
        new = RoPE(head_dim=8, scaling=dyn, train_len=4)
        bounded = RoPE(head_dim=8, scaling=dyn, train_len=4, max_len=12)
        plain = RoPE(head_dim=8, max_len=4)  # the default rope has no hint: a limit
    assert new.scaling["max_position_embeddings"] == bounded.scaling["max_position_embeddings"]
    assert (new.max_len, bounded.max_len, plain.max_len) == (None, 12, 4)
    with pytest.raises(ValueError, match="train_len"):
        RoPE(head_dim=8, scaling={"rope_type": "yarn", "factor": 2.0}, max_len=4)
    q, k = torch.randn(1, 2, 12, 8), torch.randn(1, 2, 12, 8)
    pos = torch.arange(12)
    want = new.rotate(q, k, pos, pos)
    unscaled = RoPE(head_dim=8).rotate(q, k, pos, pos)
    assert_changed(want[0], unscaled[0])  # seq_len 12 > 4: dynamic scaling is on
    for a, b in zip(bounded.rotate(q, k, pos, pos), want, strict=True):
        torch.testing.assert_close(a, b, rtol=0, atol=0)
    with pytest.raises(ValueError, match=r"go up to 12\b.*max_len=12\b"):
        bounded.rotate(q[:, :, :1], k, pos[-1:] + 1, torch.arange(13))


def test_randomized_never_enlarges_its_inner_max_len():
    enc = Randomized(encoding="learned", dim=16, sample_len=300)  # no max_len: the table
    assert enc.max_len == enc.inner.max_len == 300  # covers the training positions
    enc = Randomized(encoding="learned", dim=16, max_len=300, sample_len=300)
    assert enc.max_len == enc.inner.max_len == 300
    enc = Randomized(encoding="rope", head_dim=8, max_len=20)  # sample_len defaults within it
    assert (enc.sample_len, enc.max_len, enc.inner.max_len) == (20, 20, 20)
    with pytest.raises(ValueError, match=r"sample_len=300 > max_len=20"):
        Randomized(encoding="learned", dim=16, max_len=20, sample_len=300)
    with pytest.raises(ValueError, match=r"sample_len=300 > max_len=20"):
        Randomized(encoding=posenc.build("rope", head_dim=8, max_len=20), sample_len=300)
    with pytest.raises(ValueError, match=r"max_len=30: the wrapped instance has max_len=20"):
        Randomized(encoding=posenc.build("rope", head_dim=8, max_len=20), max_len=30)
    inner = posenc.build("alibi", heads=2, max_len=20)
    assert Randomized(encoding=inner).sample_len == 20  # an instance's limit bounds it too
