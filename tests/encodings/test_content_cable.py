"""posenc.encodings.content: CABLE against its reference code (golden tensors written by
tests/golden/make_cable.py from axiomlab/Cable), against an explicit loop over the paper's
sum, and the properties the paper claims (causal; ALiBi when the penalties are constant)."""

from pathlib import Path

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from torch.nn import functional as F

import posenc
from posenc.attention import attention
from posenc.encodings.content import CABLE
from posenc.encodings.wrappers import Randomized
from posenc.functional import alibi_slopes

PROPS = settings(max_examples=20, deadline=None)
GOLDEN = Path(__file__).resolve().parents[1] / "golden" / "cable.pt"
B, H, DH = 2, 4, 8


def qkv(tq=7, tk=7, seed=0, h=H, dh=DH):
    g = torch.Generator().manual_seed(seed)
    return [torch.randn(B, h, t, dh, generator=g) for t in (tq, tk, tk)]


def randomized(seed=0) -> CABLE:
    torch.manual_seed(seed)
    enc = CABLE(heads=H, head_dim=DH)
    with torch.no_grad():
        enc.penalty_weight.normal_(0, 1.0)
        enc.penalty_bias.normal_(0, 1.0)
    return enc


def test_registered_with_its_paper_and_facts():
    assert posenc.ENCODINGS["cable"] is CABLE
    enc = posenc.build("cable", dim=32, heads=H)
    assert enc.family == "content" and "2503.08067" in enc.paper
    assert enc.content_dependent and enc.provides == {"bias"} and enc.score_mod(None, None) is None
    assert not enc.bidirectional and enc.trainable
    with pytest.raises(ValueError, match="heads"):
        CABLE(head_dim=DH)
    with pytest.raises(ValueError, match="head_dim"):
        CABLE(heads=H)
    with pytest.raises(ValueError, match="causal=False"):
        attention(*qkv(), enc, causal=False)


@pytest.mark.parametrize("backend", ["eager", "sdpa", "chunked"])
def test_attention_equals_the_reference_code(backend):
    """Golden parity: tests/golden/cable.pt holds axiomlab/Cable's CausalSelfAttention output on
    seeded random inputs, its weights, and the penalty weights in posenc's form."""
    gold = torch.load(GOLDEN, weights_only=True)
    x, state = gold["x"], gold["state"]
    b, t, d = x.shape
    h, dh = gold["penalty_weight"].shape
    enc = CABLE(heads=h, head_dim=dh)
    with torch.no_grad():
        enc.penalty_weight.copy_(gold["penalty_weight"])
        enc.penalty_bias.copy_(gold["penalty_bias"])
    qkv_ = F.linear(x, state["c_attn.weight"], state["c_attn.bias"])
    q, k, v = (z.view(b, t, h, dh).transpose(1, 2) for z in qkv_.split(d, dim=-1))
    # the reference's logits are q.k unscaled (it divides by sqrt(C / n_embd) = 1)
    out = attention(q * dh**0.5, k, v, enc, backend=backend, block_size=3)
    y = F.linear(out.transpose(1, 2).reshape(b, t, d), state["c_proj.weight"], state["c_proj.bias"])
    torch.testing.assert_close(y, gold["y"], atol=1e-5, rtol=1e-5)


def test_bias_equals_the_loop_over_the_papers_sum():
    """Hand-derived: bias_h(i, j) = -sum_{l=j+1..i} softplus(w_h . k_hl + c_h) for j <= i,
    0 after the query, summed term by term; decoding (the last queries) reads the same rows."""
    enc = randomized()
    _, k, _ = qkv(tk=6)
    T = k.shape[2]
    with torch.no_grad():
        got = enc.bias(k, k, torch.arange(T), torch.arange(T))
        want = torch.zeros(B, H, T, T)
        for bb in range(B):
            for hh in range(H):
                for i in range(T):
                    for j in range(i + 1):
                        for l_ in range(j + 1, i + 1):
                            s = k[bb, hh, l_] @ enc.penalty_weight[hh] + enc.penalty_bias[hh]
                            want[bb, hh, i, j] -= F.softplus(s)
        torch.testing.assert_close(got, want, atol=1e-5, rtol=1e-5)
        last = enc.bias(k[:, :, -2:], k, torch.arange(T - 2, T), torch.arange(T))
        torch.testing.assert_close(last, want[:, :, -2:], atol=1e-5, rtol=1e-5)


@PROPS
@given(seed=st.integers(0, 2**16), T=st.integers(2, 10), cut=st.integers(1, 9))
def test_causal_a_keys_bias_never_depends_on_later_tokens(seed, T, cut):
    """Changing the tokens after position `cut` leaves every bias of queries up to `cut`."""
    cut = min(cut, T - 1)
    enc = randomized(seed % 7)
    _, k, _ = qkv(tk=T, seed=seed)
    changed = k.clone()
    changed[:, :, cut + 1 :] = torch.randn_like(changed[:, :, cut + 1 :]) * 3
    pos = torch.arange(T)
    with torch.no_grad():
        a, b = enc.bias(k, k, pos, pos), enc.bias(changed, changed, pos, pos)
    torch.testing.assert_close(a[:, :, : cut + 1], b[:, :, : cut + 1], atol=0, rtol=0)


@PROPS
@given(heads=st.integers(1, 9), T=st.integers(1, 12), seed=st.integers(0, 2**16))
def test_constant_penalties_are_alibi(heads, T, seed):
    """w = 0 and softplus(c_h) = ALiBi's slope m_h: the bias is ALiBi's -m_h (i - j) at every
    key up to the query, and attention (causal) equals ALiBi's on every backend."""
    enc = CABLE(heads=heads, head_dim=DH)
    slopes = alibi_slopes(heads)
    with torch.no_grad():
        enc.penalty_weight.zero_()
        enc.penalty_bias.copy_(slopes + torch.log(-torch.expm1(-slopes)))  # softplus^-1
    q, k, v = qkv(T, T, seed=seed, h=heads)
    pos = torch.arange(T)
    alibi = posenc.build("alibi", heads=heads)
    with torch.no_grad():
        got, want = enc.bias(q, k, pos, pos), alibi.bias(q, k, pos, pos).expand(B, -1, -1, -1)
    past = torch.ones(T, T, dtype=torch.bool).tril()
    torch.testing.assert_close(got[..., past], want[..., past], atol=1e-5, rtol=1e-5)
    assert (got[..., ~past] == 0).all()
    for backend in ("eager", "sdpa", "chunked"):
        torch.testing.assert_close(
            attention(q, k, v, enc, backend=backend), attention(q, k, v, alibi, backend="eager"),
            atol=1e-5, rtol=1e-5,
        )  # fmt: skip


def test_bias_is_nonpositive_and_packed_documents_do_not_mix():
    enc = randomized(1)
    _, k, _ = qkv(tk=8)
    with torch.no_grad():
        full = enc.bias(k, k, torch.arange(8), torch.arange(8))
        assert (full <= 0).all()
        packed = torch.tensor([0, 1, 2, 0, 1, 2, 3, 4])  # two documents
        bias = enc.bias(k, k, packed, packed)
        second = enc.bias(k[:, :, 3:], k[:, :, 3:], torch.arange(5), torch.arange(5))
    torch.testing.assert_close(bias[:, :, 3:, 3:], second)


def test_the_wrapper_and_gradients():
    enc = randomized(2)
    q, k, v = qkv()
    wrapped = Randomized(encoding=enc).eval()
    torch.testing.assert_close(attention(q, k, v, wrapped), attention(q, k, v, enc))
    attention(q, k, v, enc).square().sum().backward()
    assert enc.penalty_weight.grad.abs().sum() > 0 and enc.penalty_bias.grad.abs().sum() > 0
