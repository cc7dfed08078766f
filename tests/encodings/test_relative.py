"""posenc.relative: Shaw, Transformer-XL, DeBERTa and CoPE against the papers' direct formulas
and transformers' DeBERTa-v2; shift invariance, cached / chunked queries, bad input."""

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import posenc
from posenc.attention import attention
from posenc.encodings.relative import CoPE, DeBERTa, Shaw, TransformerXL
from posenc.functional import relative_sinusoid

PROPS = settings(max_examples=20, deadline=None)
H, DH = 2, 8


def qk(b=2, tq=6, tk=6, h=H, dh=DH, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(b, h, tq, dh, generator=g), torch.randn(b, h, tk, dh, generator=g)


def build(name, **kw):
    torch.manual_seed(0)
    enc = {
        "shaw": lambda: Shaw(head_dim=DH, max_distance=3, values=True, **kw),
        "transformer_xl": lambda: TransformerXL(heads=H, head_dim=DH, **kw),
        "deberta": lambda: DeBERTa(heads=H, head_dim=DH, num_buckets=8, max_distance=20, **kw),
        "cope": lambda: CoPE(head_dim=DH, max_distance=5, **kw),
    }[name]()
    with torch.no_grad():  # away from the small init, so every term matters
        for p in enc.parameters():
            p.normal_(0.0, 0.5)
    return enc


ALL = ["shaw", "transformer_xl", "deberta", "cope"]
SHIFT_INVARIANT = ["shaw", "transformer_xl", "deberta"]
ENCS = {name: build(name) for name in ALL}


def test_registry():
    for name, cls in [
        ("shaw", Shaw),
        ("transformer_xl", TransformerXL),
        ("deberta", DeBERTa),
        ("cope", CoPE),
    ]:
        assert posenc.ENCODINGS[name] is cls
        assert cls.family == "relative" and cls.trainable
        enc = posenc.build(name, dim=16, heads=2, max_len=32)
        assert enc.content_dependent and enc.has_bias and enc.score_mod(None, None) is None


# --------------------------------------------------------------------------- DeBERTa


@pytest.mark.parametrize(
    "norm, types", [("none", ("c2p", "p2c")), ("layer_norm", ("c2p", "p2c")), ("none", ("c2p",))]
)
def test_deberta_attention_matches_transformers(norm, types):
    transformers = pytest.importorskip("transformers")
    from transformers.models.deberta_v2.modeling_deberta_v2 import DebertaV2Encoder

    D, heads, B, T = 32, 4, 2, 30  # T past max_distance: log buckets and clamping
    cfg = transformers.DebertaV2Config(
        hidden_size=D,
        num_attention_heads=heads,
        num_hidden_layers=1,
        intermediate_size=16,
        relative_attention=True,
        pos_att_type=list(types),
        position_buckets=8,
        max_relative_positions=20,
        share_att_key=False,
        norm_rel_ebd=norm,
    )
    torch.manual_seed(0)
    ref_enc = DebertaV2Encoder(cfg).eval()
    with torch.no_grad():
        for p in ref_enc.parameters():
            p.normal_(0.0, 0.2)
    ref = ref_enc.layer[0].attention.self
    hs = torch.randn(B, T, D)
    ones = torch.ones(B, 1, T, T, dtype=torch.bool)

    enc = DeBERTa(
        dim=D,
        heads=heads,
        num_buckets=8,
        max_distance=20,
        norm_rel_ebd=norm,
        pos_att_type=types,
    )
    state = {"rel_embeddings": ref_enc.rel_embeddings.weight}
    if norm == "layer_norm":
        state.update({f"rel_norm.{k}": v for k, v in ref_enc.LayerNorm.state_dict().items()})
    for proj in ("pos_key_proj", "pos_query_proj"):
        if hasattr(ref, proj):
            state.update({f"{proj}.{k}": v for k, v in getattr(ref, proj).state_dict().items()})
    enc.load_state_dict(state)
    assert enc.softmax_scale(D // heads) == pytest.approx((D // heads * (1 + len(types))) ** -0.5)

    def split(x):  # [B, T, D] -> [B, H, T, Dh]
        return x.view(B, T, heads, -1).transpose(1, 2)

    with torch.no_grad():
        want, _ = ref(
            hs,
            ones,
            relative_pos=ref_enc.get_rel_pos(hs),
            rel_embeddings=ref_enc.get_rel_embedding(),
        )
        q, k, v = (split(p(hs)) for p in (ref.query_proj, ref.key_proj, ref.value_proj))
        got = attention(q, k, v, enc, backend="eager", causal=False)
    got = got.transpose(1, 2).reshape(B, T, D)
    assert (got - want).abs().max().item() <= 1e-5


# --------------------------------------------------------------------------- Transformer-XL


def transformer_xl_direct(enc, q, k, q_pos, k_pos):
    """(q_i + u).k_j + (q_i + v).W_r R[i - j], one pair at a time, times 1/sqrt(Dh)."""
    b, h, tq, dh = q.shape
    out = torch.empty(b, h, tq, k.shape[2])
    for i in range(tq):
        for j in range(k.shape[2]):
            r = relative_sinusoid(q_pos[i] - k_pos[j], enc.rel_dim)
            wr = enc.w_r(r).view(h, dh)  # [H, Dh]
            ac = ((q[:, :, i] + enc.u) * k[:, :, j]).sum(-1)
            bd = ((q[:, :, i] + enc.v) * wr).sum(-1)
            out[:, :, i, j] = (ac + bd) / dh**0.5
    return out


@pytest.mark.parametrize(
    "q_pos, k_pos",
    [
        (torch.arange(6), torch.arange(6)),  # self-attention
        (torch.arange(7, 10), torch.arange(10)),  # decoding: queries are the last keys
        (torch.arange(3, 7), torch.arange(2, 5)),  # keys behind and ahead of queries
        (torch.tensor([0, 4, 5, 9]), torch.tensor([1, 2, 5, 8, 12])),  # gaps: gather path
    ],
)
def test_transformer_xl_shift_and_gather_equal_direct(q_pos, k_pos):
    enc = ENCS["transformer_xl"]
    q, k = qk(tq=len(q_pos), tk=len(k_pos))
    with torch.no_grad():
        want = transformer_xl_direct(enc, q, k, q_pos, k_pos) - q @ k.transpose(-1, -2) / DH**0.5
        enc.shift = True
        shifted = enc.bias(q, k, q_pos, k_pos)
        enc.shift = False
        gathered = enc.bias(q, k, q_pos, k_pos)
        enc.shift = True
    torch.testing.assert_close(shifted, want, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(gathered, want, atol=1e-5, rtol=1e-5)


# --------------------------------------------------------------------------- Shaw


@pytest.mark.parametrize("values", [False, True])
@pytest.mark.parametrize("causal", [False, True])
def test_shaw_matches_paper_equations(values, causal):
    torch.manual_seed(1)
    enc = Shaw(head_dim=DH, max_distance=2, values=values)
    with torch.no_grad():
        for p in enc.parameters():
            p.normal_(0.0, 0.5)
    b, t, kk = 1, 6, 2
    q, k = qk(b=b, tq=t, tk=t)
    v = torch.randn(b, H, t, DH)
    want = torch.empty(b, H, t, DH)
    with torch.no_grad():
        for i in range(t):
            js = range(i + 1) if causal else range(t)
            a = [max(-kk, min(kk, j - i)) + kk for j in js]  # clip(j - i, -k, k)
            e = (
                torch.stack(
                    [
                        (q[:, :, i] * (k[:, :, j] + enc.rel_keys[a[n]])).sum(-1)
                        for n, j in enumerate(js)
                    ],
                    dim=-1,
                )
                / DH**0.5
            )  # e_ij = q_i (k_j + a^K_ij) / sqrt(d)
            alpha = e.softmax(-1)
            z = 0
            for n, j in enumerate(js):  # z_i = sum_j alpha_ij (v_j + a^V_ij)
                av = enc.rel_values[a[n]] if values else 0
                z = z + alpha[..., n, None] * (v[:, :, j] + av)
            want[:, :, i] = z
        got = attention(q, k, v, enc, causal=causal, backend="eager")
        chunked = attention(q, k, v, enc, causal=causal, backend="chunked", block_size=4)
    assert enc.has_values == values
    torch.testing.assert_close(got, want, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(chunked, want, atol=1e-5, rtol=1e-5)


# --------------------------------------------------------------------------- CoPE


def cope_direct(enc, q, k, q_pos, k_pos):
    """g_it = sigmoid(q_i.k_t / sqrt(Dh)); p_ij = sum_{t=j..i} g_it; q_i.e[p_ij] interpolated."""
    b, h, tq, dh = q.shape
    out = torch.empty(b, h, tq, k.shape[2])
    e = enc.pos_emb
    for i in range(tq):
        for j in range(k.shape[2]):
            p = torch.zeros(b, h)
            for t in range(j, k.shape[2]):
                if k_pos[t] <= q_pos[i]:
                    p = p + torch.sigmoid((q[:, :, i] * k[:, :, t]).sum(-1) / dh**0.5)
            p = p.clamp(max=enc.max_distance - 1)
            lo, w = p.floor(), p - p.floor()
            emb = w[..., None] * e[p.ceil().long()] + (1 - w[..., None]) * e[lo.long()]
            out[:, :, i, j] = (q[:, :, i] * emb).sum(-1)
    return out


@pytest.mark.parametrize(
    "q_pos, k_pos",
    [(torch.arange(6), torch.arange(6)), (torch.arange(4, 7), torch.arange(7))],
)
def test_cope_matches_direct_loop(q_pos, k_pos):
    enc = ENCS["cope"]  # max_distance = 5 < T: clamping happens
    q, k = qk(tq=len(q_pos), tk=len(k_pos))
    with torch.no_grad():
        got = enc.bias(q, k, q_pos, k_pos)
        want = cope_direct(enc, q, k, q_pos, k_pos)
        pos = enc.positions(q, k, q_pos, k_pos)
    torch.testing.assert_close(got, want, atol=1e-5, rtol=1e-5)
    future = k_pos[None, :] > q_pos[:, None]  # non-causal pairs: p = 0, bias q.e[0]
    assert (pos[..., future] == 0).all()
    assert (pos[..., ~future] > 0).all()
    assert (pos[..., 1:] <= pos[..., :-1] + 1e-6).all()  # positions grow toward the past


def test_cope_packed_documents_do_not_count_each_other():
    enc = ENCS["cope"]
    q, k = qk(tq=7, tk=7)
    packed = torch.tensor([0, 1, 2, 3, 0, 1, 2])  # two documents, positions restart
    with torch.no_grad():
        full = enc.bias(q, k, packed, packed)
        doc1 = enc.bias(q[:, :, :4], k[:, :, :4], packed[:4], packed[:4])
        doc2 = enc.bias(q[:, :, 4:], k[:, :, 4:], packed[4:], packed[4:])
    torch.testing.assert_close(full[..., :4, :4], doc1)
    torch.testing.assert_close(full[..., 4:, 4:], doc2)


# --------------------------------------------------------------------------- all of them


@PROPS
@given(
    name=st.sampled_from(SHIFT_INVARIANT),
    pos=st.lists(st.integers(0, 60), min_size=1, max_size=8),
    shift=st.integers(1, 500),
    contiguous=st.booleans(),
)
def test_shifting_positions_leaves_bias_unchanged(name, pos, shift, contiguous):
    enc = ENCS[name]
    p = torch.arange(len(pos)) + pos[0] if contiguous else torch.tensor(pos)
    q, k = qk(b=1, tq=len(pos), tk=len(pos))
    with torch.no_grad():
        torch.testing.assert_close(
            enc.bias(q, k, p + shift, p + shift), enc.bias(q, k, p, p), atol=1e-4, rtol=1e-4
        )


@pytest.mark.parametrize("name", ALL)
def test_query_blocks_and_decoding_equal_rows_of_full_bias(name):
    enc = ENCS[name]
    q, k = qk(tq=9, tk=9)
    pos = torch.arange(9) + 3
    with torch.no_grad():
        full = enc.bias(q, k, pos, pos)
        assert full.shape == (2, H, 9, 9) and full.dtype == torch.float32
        for lo, hi in [(8, 9), (5, 9), (2, 6)]:  # one decode step, a suffix, a middle block
            block = enc.bias(q[:, :, lo:hi], k, pos[lo:hi], pos)
            torch.testing.assert_close(block, full[:, :, lo:hi], atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("name", ALL)
def test_batched_positions_equal_per_row(name):
    enc = ENCS[name]
    q, k = qk(b=2, tq=5, tk=5)
    pos = torch.tensor([[0, 1, 2, 3, 4], [3, 5, 6, 9, 10]])
    with torch.no_grad():
        both = enc.bias(q, k, pos, pos)
        for r in range(2):
            row = enc.bias(q[r : r + 1], k[r : r + 1], pos[r], pos[r])
            torch.testing.assert_close(both[r : r + 1], row, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("name", ALL)
def test_dtype_and_gradients(name):
    enc = build(name)
    q, k = qk(tq=4, tk=5)
    pos = torch.arange(5)
    out = enc.bias(q.bfloat16(), k.bfloat16(), pos[1:], pos)
    assert out.dtype == torch.bfloat16 and out.shape == (2, H, 4, 5)
    q.requires_grad_(True)
    loss = enc.bias(q, k, pos[1:], pos).square().sum()
    if enc.has_values:
        loss = loss + enc.values(torch.rand(2, H, 4, 5), pos[1:], pos).sum()
    loss.backward()
    assert q.grad is not None and q.grad.abs().sum() > 0
    for pname, p in enc.named_parameters():
        assert p.grad is not None and p.grad.abs().sum() > 0, pname


# --------------------------------------------------------------------------- bad input


@pytest.mark.parametrize(
    "cls, kwargs, match",
    [
        (Shaw, {}, "head_dim"),
        (CoPE, {"heads": 4}, "head_dim"),
        (TransformerXL, {"head_dim": 8}, "heads"),
        (DeBERTa, {"head_dim": 8}, "heads"),
        (DeBERTa, {"dim": 30, "heads": 4}, "divisible"),
        (Shaw, {"head_dim": 0}, "head_dim"),
        (Shaw, {"head_dim": 8, "max_distance": 0}, "max_distance"),
        (TransformerXL, {"heads": 2, "head_dim": 8, "rel_dim": 7}, "rel_dim"),
        (DeBERTa, {"heads": 2, "head_dim": 8, "norm_rel_ebd": "rms"}, "norm_rel_ebd"),
        (DeBERTa, {"heads": 2, "head_dim": 8, "pos_att_type": ("p2p",)}, "pos_att_type"),
        (DeBERTa, {"heads": 2, "head_dim": 8, "max_distance": 64}, "num_buckets"),
        (CoPE, {"head_dim": 8, "max_distance": 0}, "max_distance"),
    ],
)
def test_bad_constructor_arguments(cls, kwargs, match):
    with pytest.raises(ValueError, match=match):
        cls(**kwargs)


@pytest.mark.parametrize("name", ALL)
def test_bad_bias_input(name):
    enc = ENCS[name]
    q, k = qk(tq=4, tk=4)
    pos = torch.arange(4)
    with pytest.raises(TypeError):
        type(enc)(heads=H, head_dim=DH, no_such_option=1)
    with pytest.raises(ValueError, match=f"head_dim={DH}"):
        enc.bias(q[..., :4], k[..., :4], pos, pos)
    with pytest.raises(ValueError, match="q_pos"):
        enc.bias(q, k, torch.arange(3), pos)
    with pytest.raises(ValueError, match="k_pos"):
        enc.bias(q, k, pos, torch.tensor([0, 1, -2, 3]))
    if name != "cope":
        with pytest.raises(ValueError, match="integers"):
            enc.bias(q, k, pos + 0.5, pos)
    if getattr(enc, "heads", None):
        with pytest.raises(ValueError, match="heads"):
            enc.bias(torch.cat([q, q], 1), torch.cat([k, k], 1), pos, pos)
