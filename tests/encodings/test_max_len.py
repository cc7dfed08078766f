"""max_len's old meaning as a training-length hint: still read, for one release, with a
DeprecationWarning, where an encoding has a hint (train_len is its keyword); randomized never
enlarges its inner encoding's max_len. (The hard limit itself: test_contract.py, registry-wide.)"""

from __future__ import annotations

import warnings

import pytest
import torch

import posenc
from posenc.encodings.rotary import RoPE
from posenc.encodings.wrappers import Randomized

NAMES = sorted(posenc.ENCODINGS)
HINT_READERS = {"cope", "fire", "fope", "t5"}  # built by name with max_len alone
B, H, DH, D = 2, 4, 8, 32


def build(name, **kw):
    torch.manual_seed(0)
    return posenc.build(name, dim=D, heads=H, head_dim=DH, **kw).eval()


def outputs(enc, T):
    torch.manual_seed(1)
    q, k, v = (torch.randn(B, H, T, DH) for _ in range(3))
    with torch.no_grad():
        out = [posenc.attention(q, k, v, enc)]
        if enc.family == "absolute":
            out.append(enc.embed(torch.randn(B, T, D), torch.arange(T)))
    return out


@pytest.mark.parametrize("name", NAMES)
def test_max_len_alone_is_a_hard_limit_or_the_deprecated_hint(name):
    """max_len given alone: the hard limit, silently; or, for an encoding with a training-
    length hint, that hint as before (the same numbers as train_len=), no limit, and a
    DeprecationWarning naming train_len. No other encoding warns."""
    L = 16
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        alone = build(name, max_len=L)
    warned = [w for w in caught if issubclass(w.category, DeprecationWarning)]
    assert bool(warned) == (name in HINT_READERS), [str(w.message) for w in warned]
    if not warned:
        assert alone.max_len == L
        return
    assert "train_len" in str(warned[0].message)
    assert alone.max_len is None  # the old meaning: no limit
    with warnings.catch_warnings():
        warnings.simplefilter("error", DeprecationWarning)
        # T5's num_buckets follows train_len only, never the old hint: keep what it was
        extra = {"num_buckets": alone.num_buckets} if name == "t5" else {}
        hinted = build(name, train_len=L, **extra)
    for a, b in zip(outputs(alone, 2 * L), outputs(hinted, 2 * L), strict=True):
        torch.testing.assert_close(a, b, rtol=0, atol=0)  # past L: no limit, as before


def test_rope_scaling_reads_its_trained_length_from_train_len():
    """RoPE scaling's missing max_position_embeddings: train_len; max_len alone as before
    (deprecated, no limit); max_len with train_len: the limit. The numbers follow the hint."""
    dyn = {"rope_type": "dynamic", "factor": 2.0}
    with pytest.warns(DeprecationWarning, match="train_len"):
        old = RoPE(head_dim=8, scaling=dyn, max_len=4)
    with warnings.catch_warnings():
        warnings.simplefilter("error", DeprecationWarning)
        new = RoPE(head_dim=8, scaling=dyn, train_len=4)
        bounded = RoPE(head_dim=8, scaling=dyn, train_len=4, max_len=12)
        plain = RoPE(head_dim=8, max_len=4)  # the default rope has no hint: a limit, silently
    assert old.scaling["max_position_embeddings"] == new.scaling["max_position_embeddings"] == 4
    assert (old.max_len, new.max_len, bounded.max_len, plain.max_len) == (None, None, 12, 4)
    q, k = torch.randn(1, 2, 12, 8), torch.randn(1, 2, 12, 8)
    pos = torch.arange(12)
    want = new.rotate(q, k, pos, pos)
    unscaled = RoPE(head_dim=8).rotate(q, k, pos, pos)
    assert not torch.allclose(want[0], unscaled[0])  # seq_len 12 > 4: dynamic scaling is on
    for enc in (old, bounded):
        for a, b in zip(enc.rotate(q, k, pos, pos), want, strict=True):
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
