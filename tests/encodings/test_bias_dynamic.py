"""posenc.encodings.bias_dynamic: the dynamic position bias and the distance-basis bias against
x-transformers (DynamicPositionBias, RelativeProjPositionalBias) on random inputs and weights,
directly (the reference is an installed package); the dynamic bias depends only on the
distance, and its score_mod and distance forms equal its bias."""

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from torch.nn import functional as F

import posenc
from posenc.attention import attention
from posenc.encodings.bias_dynamic import DistanceBasisBias, DynamicPositionBias

xt = pytest.importorskip("x_transformers.x_transformers")
PROPS = settings(max_examples=15, deadline=None)
B, H, DH, D = 2, 4, 8, 32


def dpb_and_reference(depth=2, log_distance=False, norm=False, width=8, seed=0):
    """A DynamicPositionBias and x-transformers' with the same (random) weights."""
    torch.manual_seed(seed)
    ref = xt.DynamicPositionBias(width, heads=H, depth=depth, log_distance=log_distance, norm=norm)
    enc = DynamicPositionBias(heads=H, mlp_width=width, depth=depth, log_distance=log_distance,
                              norm=norm)  # fmt: skip
    with torch.no_grad():
        for p in ref.parameters():
            p.normal_(0, 0.5)
        ours, theirs = list(enc.parameters()), list(ref.parameters())
        assert [p.shape for p in ours] == [p.shape for p in theirs]
        for a, b in zip(ours, theirs, strict=True):
            a.copy_(b)
    return enc, ref


def test_registered_with_papers_and_facts():
    dpb, basis = posenc.ENCODINGS["dynamic_bias"], posenc.ENCODINGS["distance_basis"]
    assert dpb is DynamicPositionBias and basis is DistanceBasisBias
    assert dpb.family == "bias" and dpb.provides == {"bias", "score_mod", "distance"}
    assert basis.family == "content" and basis.provides == {"bias"}
    assert dpb.bidirectional and not basis.bidirectional
    assert posenc.build("dynamic_bias", dim=64, heads=H).mlp[0].out_features == 16  # dim // 4
    assert posenc.build("distance_basis", dim=D, heads=H, train_len=24).max_dist == 24
    for bad in (dict(depth=0), dict(mlp_width=0), dict(log_distance=1)):
        with pytest.raises((ValueError, TypeError), match=next(iter(bad))):
            DynamicPositionBias(heads=H, **bad)
    for bad in (dict(num_basis=0), dict(max_dist=0)):
        with pytest.raises(ValueError, match=next(iter(bad))):
            DistanceBasisBias(heads=H, head_dim=DH, **bad)
    with pytest.raises(ValueError, match="integers"):
        dpb(heads=H).bias(*torch.zeros(2, 1, H, 3, DH), torch.arange(3) + 0.5, torch.arange(3.0))


@pytest.mark.parametrize(
    "depth, log_distance, norm",
    [(1, False, False), (2, True, False), (3, False, True), (2, True, True)],
)
def test_dynamic_bias_equals_x_transformers(depth, log_distance, norm):
    """x-transformers' forward(i, j): the last i queries over j keys, [H, i, j]."""
    enc, ref = dpb_and_reference(depth, log_distance, norm)
    q = torch.zeros(1, H, 9, DH)
    with torch.no_grad():
        for i, j in ((9, 9), (3, 9), (1, 9)):
            got = enc.bias(q[:, :, :i], q[:, :, :j], torch.arange(j - i, j), torch.arange(j))
            torch.testing.assert_close(got[0], ref(i, j), atol=1e-6, rtol=1e-5)


@pytest.mark.parametrize("causal", [True, False])
def test_dynamic_bias_attention_equals_x_transformers_attention(causal):
    """x-transformers' Attention with rel_pos=its DynamicPositionBias against posenc.attention on
    the same projections, on every backend that runs a position bias on CPU."""
    enc, ref = dpb_and_reference(2, True, False, seed=3)
    torch.manual_seed(4)
    attn = xt.Attention(D, heads=H, dim_head=DH, causal=causal)
    x = torch.randn(B, 9, D)
    with torch.no_grad():
        want = attn(x, rel_pos=ref)
        q, k, v = (
            f(x).view(B, 9, H, DH).transpose(1, 2) for f in (attn.to_q, attn.to_k, attn.to_v)
        )
        for backend in ("eager", "sdpa", "chunked", "distance"):
            if backend == "distance" and not causal:
                continue  # the distance backend runs causal attention only
            out = attention(q, k, v, enc, causal=causal, backend=backend, block_size=4)
            got = attn.to_out(out.transpose(1, 2).reshape(B, 9, D))
            torch.testing.assert_close(got, want, atol=1e-5, rtol=1e-5)


@PROPS
@given(
    pos=st.lists(st.integers(0, 60), min_size=1, max_size=8),
    keys=st.lists(st.integers(0, 60), min_size=1, max_size=8),
    shift=st.integers(0, 40),
    log_distance=st.booleans(),
)
def test_dynamic_bias_depends_only_on_the_distance(pos, keys, shift, log_distance):
    """bias(i, j) = f(i - j): shifting every position leaves it, pairs at equal distance get
    equal values, and score_mod / distance_bias give bias()'s numbers at every pair."""
    enc, _ = dpb_and_reference(2, log_distance, False, seed=len(pos))
    enc = enc.double()  # a float64 MLP (its table rounded to float32): the paths differ by
    # rounding alone, ~1 float32 ulp (a float32 MLP over other row sets: up to 8e-6)
    qp, kp = torch.tensor(pos), torch.tensor(keys)
    q, k = (torch.zeros(1, H, n, DH, dtype=torch.float64) for n in (len(pos), len(keys)))
    with torch.no_grad():
        bias = enc.bias(q, k, qp, kp)[0]  # [H, Tq, Tk]
        torch.testing.assert_close(enc.bias(q, k, qp + shift, kp + shift)[0], bias)
        d = qp[:, None] - kp[None, :]
        table = enc.distance_bias(d.flatten(), qp).view(H, *d.shape)
        torch.testing.assert_close(table.double(), bias, atol=1e-7, rtol=3e-7)
        mod = enc.score_mod(qp, kp)
        h = torch.arange(H)[:, None, None]
        scored = mod(
            torch.zeros((), dtype=torch.float64),
            0,
            h,
            torch.arange(len(pos))[:, None],
            torch.arange(len(keys)),
        )
        torch.testing.assert_close(scored, bias, atol=1e-7, rtol=3e-7)
    for dist in d.unique():  # equal distance, equal value
        at = bias[:, d == dist]
        assert torch.equal(at, at[:, :1].expand_as(at))


def basis_and_reference(max_dist=5, num_basis=3, seed=0):
    """A DistanceBasisBias reading q = W_q x, and x-transformers' RelativeProjPositionalBias
    reading x through the composed Linear (W_h^T W_q,h, bias c_h)."""
    torch.manual_seed(seed)
    enc = DistanceBasisBias(heads=H, head_dim=DH, num_basis=num_basis, max_dist=max_dist)
    ref = xt.RelativeProjPositionalBias(D, H, num_distance_basis=num_basis, max_dist=max_dist)
    w_q = torch.randn(H, DH, D) * D**-0.5
    with torch.no_grad():
        enc.bank.normal_(0, 1.0)
        ref.distance_bank.copy_(enc.bank)
        linear = ref.to_distance_weights[0]
        linear.weight.copy_(torch.einsum("hdr,hde->hre", enc.weight, w_q).reshape(H * num_basis, D))
        linear.bias.copy_(enc.weight_bias.reshape(-1))
    return enc, ref, w_q


@pytest.mark.parametrize("tq, tk", [(9, 9), (3, 9), (1, 4)])
def test_distance_basis_equals_x_transformers(tq, tk):
    """Keys farther than max_dist (5 here) and keys after the query get 0, as x-transformers."""
    enc, ref, w_q = basis_and_reference()
    x = torch.randn(B, tq, D)
    q = torch.einsum("hde,bte->bhtd", w_q, x)
    k = torch.randn(B, H, tk, DH)  # supplies the key count only
    with torch.no_grad():
        got = enc.bias(q, k, torch.arange(tk - tq, tk), torch.arange(tk))
        torch.testing.assert_close(got, ref(x, seq_len_k=tk), atol=1e-5, rtol=1e-5)
        out = attention(q, k, k, enc, backend="chunked", block_size=2)
        logits = q @ k.transpose(-1, -2) * DH**-0.5 + got
        allowed = torch.ones(tq, tk, dtype=torch.bool).tril(tk - tq)
        want = logits.masked_fill(~allowed, -torch.inf).softmax(-1) @ k
        torch.testing.assert_close(out, want, atol=1e-5, rtol=1e-5)


def test_distance_basis_is_causal_and_gradients_flow():
    enc, _, _ = basis_and_reference(max_dist=32, seed=1)
    q = torch.randn(B, H, 6, DH)
    pos = torch.arange(6)
    bias = enc.bias(q, q, pos, pos)
    assert (bias[..., torch.ones(6, 6, dtype=torch.bool).triu(1)] == 0).all()
    F.softplus(attention(q, q, q, enc)).sum().backward()
    assert all(p.grad is not None and p.grad.abs().sum() > 0 for p in enc.parameters())
