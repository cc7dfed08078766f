"""posenc.functional, relative section: deberta_bucket, rel_shift, relative_sinusoid."""

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from posenc.functional import deberta_bucket, rel_shift, relative_sinusoid

PROPS = settings(max_examples=25, deadline=None)


@pytest.mark.parametrize(
    "bucket_size, max_position",
    [(256, 512), (8, 32), (8, 20), (4, 10), (2, 5), (3, 100), (32, 64), (64, 1024), (7, 9)],
)
def test_deberta_bucket_matches_transformers(bucket_size, max_position):
    modeling = pytest.importorskip("transformers.models.deberta_v2.modeling_deberta_v2")
    g = torch.Generator().manual_seed(bucket_size * 1000 + max_position)
    random = torch.randint(-4 * max_position, 4 * max_position, (40, 100), generator=g)
    every = torch.arange(-max_position - 3, max_position + 4)
    for rel in (random, every):
        want = modeling.make_log_bucket_position(rel, bucket_size, max_position)
        got = deberta_bucket(rel, bucket_size, max_position)
        assert got.dtype == torch.long and got.shape == rel.shape
        assert torch.equal(got, want.long())


def test_deberta_bucket_properties():
    rel = torch.arange(-2000, 2001)
    b = deberta_bucket(rel, 256, 512)
    inner = rel.abs() <= 128
    assert torch.equal(b[inner], rel[inner])  # exact inside the bucket span
    assert torch.equal(b, -deberta_bucket(-rel, 256, 512))  # odd
    assert (b[1:] >= b[:-1]).all()  # monotone
    assert b[rel == 511].item() == 255  # |r| = max_position - 1 -> bucket_size - 1


@pytest.mark.parametrize("num_buckets, max_distance", [(1, 10), (0, 10), (8, 5), (8, 4)])
def test_deberta_bucket_bad_arguments(num_buckets, max_distance):
    with pytest.raises(ValueError, match="num_buckets"):
        deberta_bucket(torch.arange(5), num_buckets, max_distance)


def transformer_xl_rel_shift(x):
    """Transformer-XL's own layout: x [qlen, klen, bsz, n_head]; zero pad, view, drop a row."""
    zero_pad = torch.zeros((x.size(0), 1, *x.size()[2:]), dtype=x.dtype)
    padded = torch.cat([zero_pad, x], dim=1).view(x.size(1) + 1, x.size(0), *x.size()[2:])
    return padded[1:].view_as(x)


@PROPS
@given(tq=st.integers(1, 9), extra=st.integers(0, 9), b=st.integers(1, 3))
def test_rel_shift_matches_transformer_xl_layout(tq, extra, b):
    kr = tq + extra
    x = torch.randn(b, 2, tq, kr)  # [B, H, Tq, Tk_rel]
    ours = rel_shift(x)
    ref = transformer_xl_rel_shift(x.permute(2, 3, 0, 1)).permute(2, 3, 0, 1)
    assert torch.equal(ours, ref)
    for i in range(tq):  # out[i, j] = x[i, j + Tq - 1 - i] wherever that column exists
        for j in range(kr - tq + i + 1):
            assert torch.equal(ours[..., i, j], x[..., i, j + tq - 1 - i])


def test_rel_shift_aligns_distances():
    tq, tk = 4, 6
    dmax = tq - 1  # query positions 0..3 against keys 0..5: column c holds distance dmax - c
    x = (dmax - torch.arange(tq + tk - 1)).float().expand(tq, -1)
    want = (torch.arange(tq)[:, None] - torch.arange(tk)[None, :]).float()
    assert torch.equal(rel_shift(x)[:, :tk], want)


def test_relative_sinusoid():
    d = torch.tensor([-7, -1, 0, 3, 1000])
    got = relative_sinusoid(d, 8)
    f = 10000.0 ** (-torch.arange(0, 8, 2, dtype=torch.float64) / 8)
    ang = d[:, None].double() * f
    assert got.dtype == torch.float32 and got.shape == (5, 8)
    torch.testing.assert_close(got, torch.cat([ang.sin(), ang.cos()], -1).float())
    with pytest.raises(ValueError, match="even dim"):
        relative_sinusoid(d, 7)
