"""posenc.functional, biases section: alibi_slopes, t5_bucket, sandwich_curve."""

import pytest
import torch

from posenc.functional import alibi_slopes, sandwich_curve, t5_bucket

# ---------------------------------------------------------------------------- alibi_slopes


def test_alibi_slopes_equal_bloom_for_1_to_64_heads():
    bloom = pytest.importorskip("transformers.models.bloom.modeling_bloom")
    mask = torch.ones(1, 3, dtype=torch.long)
    for heads in range(1, 65):
        # BLOOM's alibi is slope * position; position 1 is the slope itself, position 2 twice it
        ref = bloom.build_alibi_tensor(mask, heads, torch.float32).view(heads, 3)
        slopes = alibi_slopes(heads)
        assert slopes.shape == (heads,) and slopes.dtype == torch.float32
        assert torch.equal(slopes, ref[:, 1]), heads
        assert torch.equal(2 * slopes, ref[:, 2]), heads


def test_alibi_slopes_power_of_two_is_the_papers_geometric_series():
    # Press et al.: for 8 heads, 1/2, 1/4, ..., 1/256
    assert torch.equal(alibi_slopes(8), 2.0 ** -torch.arange(1, 9, dtype=torch.float32))


@pytest.mark.parametrize("bad", [0, -3])
def test_alibi_slopes_rejects_non_positive(bad):
    with pytest.raises(ValueError, match="heads must be >= 1"):
        alibi_slopes(bad)


@pytest.mark.parametrize("bad", [2.0, True, "8"])
def test_alibi_slopes_rejects_non_int(bad):
    with pytest.raises(TypeError, match="heads must be an int"):
        alibi_slopes(bad)


# ---------------------------------------------------------------------------- t5_bucket

T5_SETTINGS = [(32, 128), (8, 20), (16, 9), (64, 1000), (6, 5), (4, 3)]


@pytest.mark.parametrize("bidirectional", [True, False])
@pytest.mark.parametrize("num_buckets,max_distance", T5_SETTINGS)
def test_t5_bucket_equals_transformers(bidirectional, num_buckets, max_distance):
    t5 = pytest.importorskip("transformers.models.t5.modeling_t5")
    g = torch.Generator().manual_seed(num_buckets * 1000 + max_distance)
    rel = torch.cat(
        [
            torch.arange(-300, 301),  # every small distance, both directions
            torch.randint(-5000, 5001, (2010,), generator=g),  # |rel| >> max_distance
            torch.tensor([10**9, -(10**9), 2**40, -(2**40)]),
        ]
    ).view(-1, 5)  # any shape
    ref = t5.T5Attention._relative_position_bucket(rel, bidirectional, num_buckets, max_distance)
    got = t5_bucket(rel, bidirectional, num_buckets, max_distance)
    assert got.dtype == torch.int64 and got.shape == rel.shape
    assert torch.equal(got, ref)
    assert got.min() >= 0 and got.max() < num_buckets


def test_t5_bucket_int32_input_gives_the_same_buckets():
    rel = torch.arange(-200, 200)
    assert torch.equal(t5_bucket(rel.int()), t5_bucket(rel))


def test_t5_bucket_unidirectional_puts_future_keys_in_bucket_zero():
    rel = torch.arange(0, 50)  # key at or after the query
    assert torch.equal(t5_bucket(rel, bidirectional=False), torch.zeros(50, dtype=torch.long))


@pytest.mark.parametrize(
    "kwargs,match",
    [
        (dict(bidirectional=True, num_buckets=3), "even int >= 4"),
        (dict(bidirectional=True, num_buckets=2), "even int >= 4"),
        (dict(bidirectional=False, num_buckets=1), "num_buckets must be >= 2"),
        (dict(bidirectional=True, num_buckets=32, max_distance=8), "max_distance must be > 8"),
        (dict(bidirectional=False, num_buckets=32, max_distance=16), "max_distance must be > 16"),
    ],
)
def test_t5_bucket_rejects_bad_arguments(kwargs, match):
    with pytest.raises(ValueError, match=match):
        t5_bucket(torch.arange(5), **kwargs)


def test_t5_bucket_rejects_wrong_types():
    with pytest.raises(TypeError, match="integer tensor"):
        t5_bucket(torch.arange(5.0))
    with pytest.raises(TypeError, match="bidirectional must be a bool"):
        t5_bucket(torch.arange(5), bidirectional=1)
    with pytest.raises(TypeError, match="num_buckets must be an int"):
        t5_bucket(torch.arange(5), num_buckets=32.0)


# ---------------------------------------------------------------------------- sandwich_curve


def test_sandwich_curve_is_the_inner_product_of_sinusoidal_embeddings():
    dim = 16
    g = torch.Generator().manual_seed(0)
    m = torch.randint(0, 10_000, (50,), generator=g).double()
    n = torch.randint(0, 10_000, (50,), generator=g).double()
    freqs = 10000.0 ** (-2.0 * torch.arange(1, dim // 2 + 1, dtype=torch.float64) / dim)

    def embed(p):  # [sin, cos] pairs at frequencies i = 1..d'/2
        return torch.cat([torch.sin(p[:, None] * freqs), torch.cos(p[:, None] * freqs)], -1)

    expected = (embed(m) * embed(n)).sum(-1) - dim // 2
    torch.testing.assert_close(sandwich_curve(m - n, dim), expected, rtol=0, atol=1e-9)


def test_sandwich_curve_is_zero_at_zero_symmetric_and_non_positive():
    d = torch.arange(-500, 501)
    curve = sandwich_curve(d)
    assert curve.dtype == torch.float64
    assert curve[500] == 0
    assert torch.equal(curve, curve.flip(0))
    assert (curve <= 0).all()
    assert (curve[501:] < 0).all()


@pytest.mark.parametrize("bad", [0, 7, -2])
def test_sandwich_curve_rejects_bad_dim(bad):
    with pytest.raises(ValueError, match="even int >= 2"):
        sandwich_curve(torch.arange(3), bad)
