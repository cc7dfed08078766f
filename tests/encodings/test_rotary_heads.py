"""posenc.encodings.rotary_heads: RoPE on some heads against x-transformers' Attention with
rotate_num_heads on random inputs (directly: the reference is an installed package); all
heads is rope, none is nope; grouped-query attention and cached decoding."""

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import posenc
from posenc import TransformerLM
from posenc.attention import attention
from posenc.encodings.rotary_heads import PartialHeadsRoPE
from posenc.hf import to_rope_parameters

PROPS = settings(max_examples=15, deadline=None)
B, H, DH, D, T = 2, 4, 8, 32, 7


def qkv(h=H, hkv=H, t=T, seed=0):
    g = torch.Generator().manual_seed(seed)
    return [torch.randn(B, n, t, DH, generator=g) for n in (h, hkv, hkv)]


def test_registered_and_bad_input():
    enc = posenc.build("rope_heads", dim=D, heads=H)
    assert isinstance(enc, PartialHeadsRoPE) and enc.family == "rotary"
    assert enc.rotate_heads == H // 2 and enc.provides == {"rotate", "angles"}
    with pytest.raises(ValueError, match="heads"):
        PartialHeadsRoPE(head_dim=DH)
    with pytest.raises(ValueError, match="rotate_heads must be in 0..heads=4"):
        PartialHeadsRoPE(heads=H, head_dim=DH, rotate_heads=5)
    with pytest.raises(TypeError, match="rotate_heads"):
        PartialHeadsRoPE(heads=H, head_dim=DH, rotate_heads=1.5)
    odd = PartialHeadsRoPE(heads=H, head_dim=DH, rotate_heads=1)
    with pytest.raises(
        ValueError, match=r"multiple of the query heads per kv head \(H / Hkv = 2\)"
    ):
        attention(*qkv(hkv=2), odd)
    with pytest.raises(ValueError, match="heads=4"):
        attention(*qkv(h=2, hkv=2), odd)
    q, k, _ = qkv(h=1, hkv=1)  # a one-head probe (posenc explain): one rotated head, or none
    pos = torch.arange(T)
    rope = posenc.build("rope", head_dim=DH)
    none = PartialHeadsRoPE(heads=H, head_dim=DH, rotate_heads=0)
    for enc, want in ((odd, rope.rotate(q, k, pos, pos)), (none, (q, k))):
        for got, ref in zip(enc.rotate(q, k, pos, pos), want, strict=True):
            torch.testing.assert_close(got, ref)


@pytest.mark.parametrize("rotate", [1, 2, 3, 4])
def test_equals_x_transformers_rotate_num_heads(rotate):
    """x-transformers' Attention(rotate_num_heads=n) with its RotaryEmbedding (interleaved
    pairs) against posenc.attention on the same projections."""
    xt = pytest.importorskip("x_transformers.x_transformers")
    torch.manual_seed(rotate)
    attn = xt.Attention(D, heads=H, dim_head=DH, causal=True, rotate_num_heads=rotate)
    rotary = xt.RotaryEmbedding(DH)
    enc = PartialHeadsRoPE(heads=H, head_dim=DH, rotate_heads=rotate, layout="interleaved")
    x = torch.randn(B, T, D)
    with torch.no_grad():
        want = attn(x, rotary_pos_emb=rotary.forward_from_seq_len(T))
        q, k, v = (
            f(x).view(B, T, H, DH).transpose(1, 2) for f in (attn.to_q, attn.to_k, attn.to_v)
        )
        for backend in ("eager", "sdpa", "chunked"):
            out = attention(q, k, v, enc, backend=backend, block_size=3)
            got = attn.to_out(out.transpose(1, 2).reshape(B, T, D))
            torch.testing.assert_close(got, want, atol=1e-5, rtol=1e-5)


@PROPS
@given(
    heads=st.sampled_from([1, 2, 4, 6]),
    group=st.sampled_from([1, 2]),
    seed=st.integers(0, 2**16),
    layout=st.sampled_from(["half", "interleaved"]),
)
def test_all_heads_is_rope_and_none_is_nope(heads, group, seed, layout):
    """rotate_heads = H equals rope, 0 equals nope (attention outputs, GQA included); a
    subset equals rope on those heads and nope on the rest."""
    if heads % group:
        group = 1
    q, k, v = qkv(h=heads, hkv=heads // group, seed=seed)
    rope = posenc.build("rope", heads=heads, head_dim=DH, layout=layout)
    full = PartialHeadsRoPE(heads=heads, head_dim=DH, rotate_heads=heads, layout=layout)
    none = PartialHeadsRoPE(heads=heads, head_dim=DH, rotate_heads=0, layout=layout)
    torch.testing.assert_close(attention(q, k, v, full), attention(q, k, v, rope))
    torch.testing.assert_close(attention(q, k, v, none), attention(q, k, v, None))
    n = (heads // 2) // group * group  # whole groups
    part = PartialHeadsRoPE(heads=heads, head_dim=DH, rotate_heads=n, layout=layout)
    got = attention(q, k, v, part)
    torch.testing.assert_close(got[:, heads - n :], attention(q, k, v, rope)[:, heads - n :])
    torch.testing.assert_close(got[:, : heads - n], attention(q, k, v, None)[:, : heads - n])


def test_the_hf_bridge_refuses_it_rather_than_rotating_every_head():
    with pytest.raises(ValueError, match="PartialHeadsRoPE.*no transformers rope_parameters"):
        to_rope_parameters(PartialHeadsRoPE(heads=H, head_dim=DH))


def test_grouped_query_attention_equals_repeated_kv_heads():
    """With kv heads shared by groups of 2, rotating whole groups equals rotating the same
    query heads over the repeated kv heads."""
    q, k, v = qkv(hkv=2, seed=3)
    enc = PartialHeadsRoPE(heads=H, head_dim=DH, rotate_heads=2)
    rep = [t.repeat_interleave(2, dim=1) for t in (k, v)]
    torch.testing.assert_close(attention(q, k, v, enc), attention(q, *rep, enc))


def test_cached_decoding_equals_the_full_forward():
    torch.manual_seed(0)
    kwargs = dict(encoding="rope_heads", encoding_kwargs={"rotate_heads": 2})
    model = TransformerLM(vocab_size=11, dim=D, heads=H, kv_heads=2, depth=2, **kwargs).eval()
    tokens = torch.randint(0, 11, (B, 9))
    with torch.no_grad():
        full = model(tokens)
        cache = model.new_cache(B, 9)
        step = [model(tokens[:, :5], cache=cache)]
        step += [model(tokens[:, t : t + 1], cache=cache) for t in range(5, 9)]
    torch.testing.assert_close(torch.cat(step, dim=1), full, atol=1e-5, rtol=1e-5)
