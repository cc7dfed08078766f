"""posenc.content: FoX against x-transformers' DataDependentAlibi, DAPE against the authors'
formulas (KERPLE and ALiBi bases), stick-breaking against golden values derived by hand from
the paper and the authors' reference formulation; the invariants each paper claims."""

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from torch import nn

import posenc
from posenc.attention import attention, choose_backend
from posenc.encodings.content import DAPE, FoX, StickBreaking
from posenc.encodings.wrappers import Randomized
from posenc.functional.content import forget_bias, stick_breaking

PROPS = settings(max_examples=25, deadline=None)
B, H, DH, D = 2, 4, 8, 32


def qkv(tq=7, tk=7, seed=0, h=H, dh=DH):
    g = torch.Generator().manual_seed(seed)
    return [torch.randn(B, h, t, dh, generator=g) for t in (tq, tk, tk)]


def causal_softmax(logits: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    T = logits.shape[-1]
    allowed = torch.ones(T, T, dtype=torch.bool).tril()
    return torch.softmax(logits.masked_fill(~allowed, -torch.inf), dim=-1) @ v


def test_registry_and_facts():
    for name, cls in [("fox", FoX), ("dape", DAPE), ("stickbreaking", StickBreaking)]:
        assert posenc.ENCODINGS[name] is cls and cls.family == "content"
        enc = posenc.build(name, dim=D, heads=H)
        assert enc.content_dependent and enc.score_mod(None, None) is None
    assert not FoX.bidirectional and not StickBreaking.bidirectional and DAPE.bidirectional
    assert FoX.trainable and DAPE.trainable and not StickBreaking.trainable
    assert FoX(heads=H, head_dim=DH).score_hooks == ()
    assert DAPE(heads=H).score_hooks == ("transform_logits",)
    assert StickBreaking().score_hooks == ("normalize",)


@pytest.mark.parametrize("name", ["dape", "stickbreaking"])
def test_fused_backends_refuse_by_name_and_auto_runs_chunked(name):
    enc = posenc.build(name, dim=D, heads=H)
    q, k, v = qkv()
    for backend in ("sdpa", "flex"):
        with torch.no_grad(), pytest.raises(ValueError, match=f"{backend}.*'chunked' or 'eager'"):
            attention(q, k, v, enc, backend=backend)
    assert choose_backend(enc, q, k) == "chunked"
    wrapped = Randomized(encoding=enc)  # the wrapper forwards the new hooks
    assert wrapped.score_hooks == enc.score_hooks
    torch.testing.assert_close(attention(q, k, v, wrapped), attention(q, k, v, enc))


# --------------------------------------------------------------------------- FoX


def fox_and_reference(seed=0, T=9):
    """A FoX, x-transformers' DataDependentAlibi with the gate Linear composed with the key
    projection (w_h W_k,h), the layer input x [B, T, D] and the keys k [B, H, T, Dh]."""
    xt = pytest.importorskip("x_transformers.x_transformers")
    torch.manual_seed(seed)
    fox = FoX(dim=D, heads=H, gate_bias=1.0)
    with torch.no_grad():
        fox.gate_weight.normal_(0, 1.0)
        fox.gate_bias.normal_(1.0, 1.0)
    w_k = torch.randn(H, DH, D) / math.sqrt(D)  # the key projection, head by head
    x = torch.randn(B, T, D)
    k = torch.einsum("btd,hed->bhte", x, w_k)
    ref = xt.DataDependentAlibi(D, H, causal=True)
    with torch.no_grad():
        ref.to_forget_gates[0].weight.copy_(torch.einsum("he,hed->hd", fox.gate_weight, w_k))
        ref.to_forget_gates[0].bias.copy_(fox.gate_bias)
    return fox, ref, x, k


def test_fox_bias_equals_x_transformers_data_dependent_alibi():
    fox, ref, x, k = fox_and_reference()
    T = x.shape[1]
    want = ref(x)  # [B, H, T, T]; only keys up to the query count (causal)
    pos = torch.arange(T)
    got = fox.bias(k, k, pos, pos)
    causal = torch.ones(T, T, dtype=torch.bool).tril()
    torch.testing.assert_close(got[..., causal], want[..., causal], atol=1e-5, rtol=1e-5)
    assert (got[..., ~causal] == 0).all()  # keys after the query: nothing accumulated
    # decoding: the last 3 queries over every key, with [B, T] positions
    last = fox.bias(k[:, :, -3:], k, pos[-3:].expand(B, 3), pos.expand(B, T))
    torch.testing.assert_close(last, got[:, :, -3:], atol=1e-6, rtol=0)


def test_fox_attention_equals_softmax_with_the_reference_bias():
    fox, ref, x, k = fox_and_reference(seed=1)
    g = torch.Generator().manual_seed(2)
    q, v = torch.randn(2, B, H, x.shape[1], DH, generator=g)
    want = causal_softmax(q @ k.transpose(-1, -2) / math.sqrt(DH) + ref(x), v)
    for backend in ("eager", "sdpa", "chunked"):
        got = attention(q, k, v, fox, backend=backend, block_size=2)
        torch.testing.assert_close(got, want, atol=1e-5, rtol=1e-5, msg=backend)


@PROPS
@given(
    seed=st.integers(0, 2**16),
    T=st.integers(1, 12),
    scale=st.floats(0.0, 20.0),
    gaps=st.booleans(),
)
def test_fox_bias_is_nonpositive_and_monotone_in_distance(seed, T, scale, gaps):
    """Gates f <= 1: bias(i, j) <= 0, and a farther key never gets more: bias(i, j - 1) <=
    bias(i, j) for every key up to the query (exactly, in float32)."""
    g = torch.Generator().manual_seed(seed)
    log_f = torch.nn.functional.logsigmoid(scale * torch.randn(B, H, T, generator=g))
    pos = torch.arange(T) * (torch.randint(1, 5, (1,), generator=g) if gaps else 1)
    bias = forget_bias(log_f, pos, pos)
    assert (bias <= 0).all()
    causal = torch.ones(T, T, dtype=torch.bool).tril()
    step = bias[..., 1:] - bias[..., :-1]  # bias(i, j + 1) - bias(i, j)
    assert (step[..., causal[:, 1:]] >= 0).all()
    # and it is the sum of the gates between key and query: bias(i, i - 1) = log f_i
    if T > 1:
        torch.testing.assert_close(bias.diagonal(-1, -2, -1), log_f[..., 1:], atol=1e-6, rtol=0)


def test_fox_with_equal_gates_is_alibi_over_token_counts():
    """One gate value f for every token: bias(i, j) = (i - j) log f, ALiBi with slope -log f."""
    fox = FoX(heads=H, head_dim=DH)
    with torch.no_grad():
        fox.gate_weight.zero_()
        fox.gate_bias.copy_(torch.tensor([-1.0, 0.0, 2.0, 5.0]))
    T = 6
    pos = torch.arange(T)
    q = torch.randn(1, H, T, DH)
    bias = fox.bias(q, q, pos, pos)[0]
    dist = (pos[:, None] - pos[None, :]).clamp(min=0).float()
    want = dist * torch.nn.functional.logsigmoid(fox.gate_bias.detach())[:, None, None]
    torch.testing.assert_close(bias, want, atol=1e-6, rtol=1e-6)


def test_fox_packed_documents_never_count_each_others_gates():
    """Positions restart per document: on a document's own pairs the bias equals that
    document alone, whatever the keys of the other documents are."""
    torch.manual_seed(0)
    fox = FoX(heads=H, head_dim=DH)
    lens = [3, 4, 2]
    pos = torch.cat([torch.arange(n) for n in lens])
    k = torch.randn(1, H, sum(lens), DH)
    full = fox.bias(k, k, pos, pos)
    start = 0
    for n in lens:
        s = slice(start, start + n)
        alone = fox.bias(k[:, :, s], k[:, :, s], pos[s], pos[s])
        torch.testing.assert_close(full[:, :, s, s], alone, atol=1e-6, rtol=0)
        other = k.clone()
        other[:, :, :start] += 3.0
        other[:, :, start + n :] -= 3.0
        again = fox.bias(other, other, pos, pos)[:, :, s, s]
        torch.testing.assert_close(again, full[:, :, s, s], atol=1e-6, rtol=0)
        start += n


def test_fox_gates_are_trained():
    fox = FoX(heads=H, head_dim=DH)
    q, k, v = qkv()
    attention(q, k, v, fox, backend="chunked", block_size=3).square().sum().backward()
    assert fox.gate_weight.grad.abs().sum() > 0 and fox.gate_bias.grad.abs().sum() > 0


# --------------------------------------------------------------------------- DAPE


def authors_dape(logits, base, mlp):
    """The authors' DAPE forward (their KerpleLog_DAPE / AliBi_DAPE): x + a + mlp2(cat(x, a))
    over the head axis, a the base bias [H, T, T] on the lower triangle, 0 above it."""
    a = torch.tile(base, (logits.shape[0], 1, 1, 1))
    feats = torch.cat((logits, a), dim=1).permute(0, 2, 3, 1)
    return logits + a + mlp(feats).permute(0, 3, 1, 2)


def dape_built(encoding: str, seed: int = 0) -> tuple[DAPE, nn.Sequential]:
    torch.manual_seed(seed)
    enc = DAPE(heads=H, encoding=encoding, mlp_width=16)
    with torch.no_grad():
        for p in enc.mlp.parameters():
            p.normal_(0, 0.5)
    mlp = nn.Sequential(nn.Linear(2 * H, 16), nn.LeakyReLU(), nn.Linear(16, H))
    mlp.load_state_dict(enc.mlp.state_dict())
    return enc, mlp


@pytest.mark.parametrize("encoding", ["kerple", "alibi"])
def test_dape_equals_the_authors_formula(encoding):
    enc, mlp = dape_built(encoding)
    T = 8
    diff = torch.arange(T)[:, None] - torch.arange(T)[None, :]
    diff = diff.tril().float()  # the authors' tril(i - j): 0 for keys after the query
    if encoding == "kerple":  # -p * log(1 + a * (i - j)), their ParallelKerpleLog
        p, a = enc.positional.r1.detach(), enc.positional.r2.detach()
        base = -p[:, None, None] * torch.log(1 + a[:, None, None] * diff)
    else:  # -m_h * (i - j), their AliBi
        base = -posenc.functional.alibi_slopes(H)[:, None, None] * diff
    q, k, v = qkv(T, T, seed=3)
    logits = q @ k.transpose(-1, -2) / math.sqrt(DH)
    with torch.no_grad():
        want = authors_dape(logits, base, mlp)
        pos = torch.arange(T)
        got = enc.transform_logits(logits, q, k, pos, pos)
        causal = torch.ones(T, T, dtype=torch.bool).tril()
        torch.testing.assert_close(got[..., causal], want[..., causal], atol=1e-5, rtol=1e-5)
        for backend in ("eager", "chunked"):
            out = attention(q, k, v, enc, backend=backend, block_size=3)
            torch.testing.assert_close(out, causal_softmax(want, v), atol=1e-5, rtol=1e-5)


@PROPS
@given(seed=st.integers(0, 2**16), cols=st.lists(st.integers(0, 6), min_size=1, max_size=7))
def test_dape_acts_on_each_pair_alone(seed, cols):
    """Entry (i, j) reads only the H logits and biases of (i, j): any subset of the keys gives
    the same entries (so query blocks and the KV cache are exact)."""
    enc, _ = dape_built("kerple", seed)
    q, k, _ = qkv(5, 7, seed=seed)
    logits = q @ k.transpose(-1, -2)
    qp, kp = torch.arange(2, 7), torch.arange(7)
    with torch.no_grad():
        full = enc.transform_logits(logits, q, k, qp, kp)
        idx = torch.tensor(sorted(set(cols)))
        part = enc.transform_logits(logits[..., idx], q, k[:, :, idx], qp, kp[idx])
    torch.testing.assert_close(part, full[..., idx], atol=1e-6, rtol=0)


def test_dape_with_a_silent_mlp_is_its_base_bias():
    enc = DAPE(heads=H, encoding="kerple")
    with torch.no_grad():
        enc.mlp[2].weight.zero_()
        enc.mlp[2].bias.zero_()
    q, k, v = qkv()
    torch.testing.assert_close(attention(q, k, v, enc), attention(q, k, v, enc.positional))


# --------------------------------------------------------------------------- stick-breaking


def one_hot_attention(z: torch.Tensor, enc: StickBreaking) -> torch.Tensor:
    """The weights attention() gives for logits z [T, T]: k = identity rows, q_i = z_i *
    sqrt(T) (so q.k * T^-1/2 = z), v = identity: the output is the weight matrix."""
    T = z.shape[0]
    eye = torch.eye(T)[None, None]
    return attention((z * math.sqrt(T))[None, None], eye, eye, enc, backend="eager")[0, 0]


def test_stickbreaking_golden_values_from_the_paper():
    """A_ij = beta_ij prod_{j<l<i} (1 - beta_il), beta = sigmoid(z), for keys j < i. With
    sigmoid(log 3) = 3/4 and sigmoid(0) = 1/2, by hand:
    row 1: [1/2]; row 2: beta_21 = 3/4, beta_20 = 1/2 -> [1/2 * 1/4, 3/4] = [1/8, 3/4];
    row 3: beta = (1/2, 1/2, 3/4) -> [1/2 * 1/2 * 1/4, 1/2 * 1/4, 3/4] = [1/16, 1/8, 3/4].
    attend_current=True also breaks at the query itself, beta_ii = 1/2 on the diagonal."""
    L = math.log(3)
    z = torch.tensor([[0.0, 0, 0, 0], [0, 0, 0, 0], [0, L, 0, 0], [0, 0, L, 0]])
    want = torch.tensor(
        [[0, 0, 0, 0], [1 / 2, 0, 0, 0], [1 / 8, 3 / 4, 0, 0], [1 / 16, 1 / 8, 3 / 4, 0]]
    )
    torch.testing.assert_close(one_hot_attention(z, StickBreaking()), want, atol=1e-6, rtol=0)
    cur = one_hot_attention(z, StickBreaking(attend_current=True))
    want_cur = torch.tensor(
        [
            [1 / 2, 0, 0, 0],
            [1 / 4, 1 / 2, 0, 0],
            [1 / 16, 3 / 8, 1 / 2, 0],  # beta_22 = 1/2 first, then 3/4 of the rest, ...
            [1 / 32, 1 / 16, 3 / 8, 1 / 2],
        ]
    )
    torch.testing.assert_close(cur, want_cur, atol=1e-6, rtol=0)


def authors_reference(q, k, v):
    """The authors' reference formulation (stickbreaking_attention/sb_ref.py, as read): with
    mask = triu(0) (the query and later keys), log_z = logsigmoid(z) masked to -1e5, log_beta =
    logsigmoid(-z) masked to 0, and cum_weight = tril(-1): att = exp(log_z + log_beta @ cum)."""
    T = q.shape[2]
    z = q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1])
    mask = torch.ones(T, T).triu(0).bool()
    log_z = torch.nn.functional.logsigmoid(z).masked_fill(mask, -1e5)
    log_beta = torch.nn.functional.logsigmoid(-z).masked_fill(mask, 0)
    att = torch.exp(log_z + torch.einsum("bhij,jk->bhik", log_beta, torch.ones(T, T).tril(-1)))
    return att @ v


def test_stickbreaking_equals_the_authors_reference():
    q, k, v = qkv(11, 11, seed=5)
    want = authors_reference(q, k, v)
    for backend in ("eager", "chunked", "auto"):
        got = attention(q, k, v, StickBreaking(), backend=backend, block_size=4)
        torch.testing.assert_close(got, want, atol=1e-5, rtol=1e-5, msg=backend)
    last = attention(q[:, :, -2:], k, v, StickBreaking())  # a decode step: the last 2 queries
    torch.testing.assert_close(last, want[:, :, -2:], atol=1e-5, rtol=1e-5)


@PROPS
@given(seed=st.integers(0, 2**16), T=st.integers(1, 10), scale=st.floats(0.0, 100.0))
def test_stickbreaking_weights_share_one_stick(seed, T, scale):
    """Weights are >= 0, and what no key took is the product of every allowed key's (1 - beta)
    (telescoping): 1 - sum_j A_ij = prod_j (1 - beta_ij); finite for logits up to +-100 * N(0,1)."""
    g = torch.Generator().manual_seed(seed)
    z = scale * torch.randn(B, H, T, T, generator=g)
    allowed = torch.ones(T, T, dtype=torch.bool).tril()
    a = stick_breaking(z, allowed)
    assert torch.isfinite(a).all() and (a >= 0).all() and (a[..., ~allowed] == 0).all()
    rest = torch.where(allowed, torch.sigmoid(-z.double()), 1.0).prod(-1)
    torch.testing.assert_close(1 - a.double().sum(-1), rest, atol=1e-5, rtol=0)


def test_bad_arguments():
    with pytest.raises(ValueError, match="heads"):
        FoX(head_dim=DH)
    with pytest.raises(TypeError, match="gate_bias"):
        FoX(heads=H, head_dim=DH, gate_bias="5")
    with pytest.raises(ValueError, match="heads"):
        DAPE()
    with pytest.raises(ValueError, match="did you mean 'kerple'"):
        DAPE(heads=H, encoding="kerpel")
    with pytest.raises(ValueError, match="mlp_width"):
        DAPE(heads=H, mlp_width=0)
    with pytest.raises(TypeError, match="attend_current"):
        StickBreaking(attend_current=1)
    q, k, v = qkv(3, 5)
    with pytest.raises(ValueError, match="q_pos"):
        attention(q, k, v, FoX(heads=H, head_dim=DH), q_pos=torch.arange(4), k_pos=torch.arange(5))
