"""posenc's PaTH (content): parity with the authors' plain-PyTorch reference (golden files),
its scores against explicit per-pair products of Householder matrices (derived by hand from the
paper's equation), and the properties the paper claims as hypothesis tests."""

from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st

import posenc
from posenc.attention import attention, choose_backend
from posenc.encodings.content import PaTH
from posenc.functional.content import forget_bias, householder, path_scores, run_starts, short_conv

PROPS = settings(max_examples=20, deadline=None)
B, H, DH, D = 2, 4, 8, 32
GOLDEN = Path(__file__).parents[1] / "golden" / "path.pt"


def qkv(tq=7, tk=7, seed=0, h=H, dh=DH, b=B):
    g = torch.Generator().manual_seed(seed)
    return [torch.randn(b, h, t, dh, generator=g) for t in (tq, tk, tk)]


def build(seed=0, **kwargs) -> PaTH:
    torch.manual_seed(seed)
    enc = PaTH(dim=D, heads=H, **kwargs)
    with torch.no_grad():  # move off the init (beta_bias 0, gate_bias 5) so every part acts
        for p in enc.parameters():
            p.add_(0.3 * torch.randn_like(p))
    return enc


def fix_transforms(enc: PaTH, w, beta, log_f=None) -> PaTH:
    """Replace the transforms the encoding derives from k by given ones (the reference's
    inputs): w [B, H, T, Dh], beta [B, H, T], log_f [B, H, T]; a backend that passes the first
    Tk keys only (chunked: keys past a block's last query) gets the first Tk of each."""
    enc.reflections = lambda k, k_pos: (w[:, :, : k.shape[2]], beta[:, :, : k.shape[2]])
    if log_f is not None:
        enc.log_gates = lambda k: log_f[:, :, : k.shape[2]]
    return enc


def explicit_scores(q, k, w, beta, q_pos, k_pos):
    """Golden values derived by hand from the paper's equation: for each pair, the product of
    the Householder matrices H_l = I - beta_l w_l w_l^T of the keys l in L(i, j) (after key j,
    in its run of increasing positions, at or before the query), latest first, one matrix at a
    time. q [B, H, Tq, Dh], k, w [B, H, Tk, Dh], beta [B, H, Tk], positions [Tq] / [Tk]."""
    q, k, w, beta = (x.double() for x in (q, k, w, beta))
    Hm = householder(w, beta)  # [B, H, Tk, Dh, Dh]
    out = torch.zeros(q.shape[0], q.shape[1], q.shape[2], k.shape[2], dtype=torch.float64)
    for i in range(q.shape[2]):
        for j in range(k.shape[2]):
            run = [j]
            while run[-1] + 1 < k.shape[2] and k_pos[run[-1] + 1] > k_pos[run[-1]]:
                run.append(run[-1] + 1)
            P = torch.eye(q.shape[-1], dtype=torch.float64).expand_as(Hm[:, :, 0])
            for l in reversed(run[1:]):  # H_last ... H_{j+1}: latest first
                if k_pos[l] <= q_pos[i]:
                    P = P @ Hm[:, :, l]
            out[:, :, i, j] = torch.einsum("bhd,bhde,bhe->bh", q[:, :, i], P, k[:, :, j])
    return out


def test_registry_facts_and_backends():
    assert posenc.ENCODINGS["path"] is PaTH and PaTH.family == "content"
    assert PaTH.provides == frozenset({"bias"}) and PaTH.trainable and PaTH.cache_exact
    assert "2505.16381" in PaTH.paper and not PaTH.bidirectional
    enc = build()
    assert enc.content_dependent and enc.score_mod(None, None) is None
    q, k, v = qkv()
    with torch.no_grad():
        ref = attention(q, k, v, enc, backend="eager")
        for backend, kw in (("sdpa", {}), ("chunked", {"block_size": 3})):
            torch.testing.assert_close(attention(q, k, v, enc, backend=backend, **kw), ref)
        with pytest.raises(ValueError, match="flex"):
            attention(q, k, v, enc, backend="flex")
        with pytest.raises(ValueError, match="one-directional"):
            attention(q, k, v, enc, causal=False)
    assert choose_backend(enc, q, k) in ("sdpa", "chunked")


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"conv_size": -1}, "conv_size"),
        ({"conv_size": 2.5}, "conv_size"),
        ({"forget_gate": "yes"}, "forget_gate"),
        ({"gate_bias": "x"}, "gate_bias"),
    ],
)
def test_bad_settings_name_the_parameter(kwargs, match):
    with pytest.raises((ValueError, TypeError), match=match):
        PaTH(dim=D, heads=H, **kwargs)


def test_needs_heads():
    with pytest.raises(ValueError, match="heads"):
        PaTH(head_dim=DH)


# --------------------------------------------------------------------------- parity


@pytest.mark.skipif(not GOLDEN.exists(), reason="tests/golden/path.pt not generated")
@pytest.mark.parametrize("backend", ["eager", "sdpa", "chunked"])
def test_matches_the_authors_reference(backend):
    """Parity with golden files: flash-linear-attention's naive_path_attn (the authors' plain
    PyTorch reference, chunked UT-transform form) on seeded random q, k, v, w, beta and
    forget gates (tests/golden/make_path.py), against posenc's attention with PaTH given the
    same w, beta and gates; grouped-query heads, T not a multiple of the chunk."""
    for case in torch.load(GOLDEN):
        q, k, v, w, beta, g = (case[n] for n in ("q", "k", "v", "w", "beta", "g"))
        hq, dh = q.shape[2], q.shape[3]
        group = hq // k.shape[2]
        gate = bool(g.abs().sum() > 0)
        enc = PaTH(heads=hq, head_dim=dh, forget_gate=gate)
        assert enc.softmax_scale(dh) == pytest.approx(case["scale"])
        w, beta = (x.transpose(1, 2).repeat_interleave(group, dim=1) for x in (w, beta))
        fix_transforms(enc, w, beta, g.transpose(1, 2) if gate else None)
        with torch.no_grad():
            out = attention(
                q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), enc, backend=backend,
                **({"block_size": 4} if backend == "chunked" else {}),
            )  # fmt: skip
        torch.testing.assert_close(out, case["o"].transpose(1, 2), atol=2e-5, rtol=1e-4)


def packed_positions(lengths) -> torch.Tensor:
    return torch.cat([torch.arange(n) for n in lengths])


@PROPS
@given(
    lengths=st.lists(st.integers(1, 5), min_size=1, max_size=3),
    dh=st.sampled_from([2, 4]),
    tq=st.integers(1, 15),
    beta_hi=st.sampled_from([1.0, 2.0]),
    seed=st.integers(0, 10**6),
)
def test_scores_equal_explicit_products_of_householder_matrices(lengths, dh, tq, beta_hi, seed):
    """Hand-derived golden values: path_scores (one sweep over the keys) equals, pair by pair,
    q_i^T H_i ... H_{j+1} k_j formed from explicit Dh x Dh matrices; packed runs of positions
    (a restart keeps one run's transforms from another), queries any of the keys."""
    k_pos = packed_positions(lengths)
    tk = len(k_pos)
    g = torch.Generator().manual_seed(seed)
    q = torch.randn(1, 2, tk, dh, generator=g)
    k = torch.randn(1, 2, tk, dh, generator=g)
    w = F.normalize(torch.randn(1, 2, tk, dh, generator=g), dim=-1)
    beta = beta_hi * torch.rand(1, 2, tk, generator=g)
    rows = torch.randperm(tk, generator=g)[: min(tq, tk)]  # a block of queries, any order
    q, q_pos = q[:, :, rows], k_pos[rows]
    got = path_scores(q, k, w, beta, q_pos[None], k_pos[None])
    want = explicit_scores(q, k, w, beta, q_pos, k_pos)
    torch.testing.assert_close(got.double(), want, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("c", [1, 2, 3, 5])
def test_short_conv_is_a_causal_depthwise_conv1d_per_document(c):
    """short_conv equals SiLU(torch's depthwise Conv1d with c - 1 zeros of left padding), the
    form of FLA's ShortConvolution on w (its weight [C, 1, c] is ours flipped: its last tap
    is the current key), on each packed document (run of positions) on its own."""
    g = torch.Generator().manual_seed(c)
    u = torch.randn(2, 3, 9, 4, generator=g)  # [B, H, Tk, Dh]
    weight = torch.randn(3, 4, c, generator=g)  # [H, Dh, c]

    def conv1d(x):  # [B, H, T, Dh] -> torch's Conv1d over T, one channel per (h, d)
        b, h, t, d = x.shape
        flat = x.permute(0, 1, 3, 2).reshape(b, h * d, t)
        out = F.conv1d(F.pad(flat, (c - 1, 0)), weight.flip(-1).reshape(h * d, 1, c), groups=h * d)
        return F.silu(out).reshape(b, h, d, t).permute(0, 1, 3, 2)

    torch.testing.assert_close(short_conv(u, weight, torch.arange(9)[None]), conv1d(u))
    packed = short_conv(u, weight, packed_positions([4, 5])[None])
    torch.testing.assert_close(packed[:, :, :4], conv1d(u[:, :, :4]))
    torch.testing.assert_close(packed[:, :, 4:], conv1d(u[:, :, 4:]))


def test_run_starts():
    pos = torch.tensor([[0, 1, 2, 0, 1, 5, 5, 6]])
    assert run_starts(pos).tolist() == [[0, 0, 0, 3, 3, 3, 6, 6]]


# --------------------------------------------------------------------------- properties


@PROPS
@given(
    t=st.integers(2, 9),
    cut=st.integers(0, 8),
    conv_size=st.sampled_from([0, 1, 3]),
    forget_gate=st.booleans(),
    seed=st.integers(0, 10**6),
)
def test_causal_later_tokens_never_change_earlier_outputs(t, cut, conv_size, forget_gate, seed):
    """The paper's transforms accumulate from the key up to the query: replacing q, k, v of
    every token after position `cut` leaves the outputs at positions <= cut unchanged (the
    short convolution over keys looks back only)."""
    cut = min(cut, t - 1)
    enc = build(seed % 7, conv_size=conv_size, forget_gate=forget_gate)
    q, k, v = qkv(t, t, seed)
    q2, k2, v2 = (x.clone() for x in (q, k, v))
    g = torch.Generator().manual_seed(seed + 1)
    for x in (q2, k2, v2):
        x[:, :, cut + 1 :] = torch.randn(x[:, :, cut + 1 :].shape, generator=g)
    with torch.no_grad():
        a = attention(q, k, v, enc, backend="eager")
        b = attention(q2, k2, v2, enc, backend="eager")
    torch.testing.assert_close(a[:, :, : cut + 1], b[:, :, : cut + 1])


@PROPS
@given(t=st.integers(1, 9), zero=st.sampled_from(["beta", "w"]), seed=st.integers(0, 10**6))
def test_identity_transforms_give_nope_attention(t, zero, seed):
    """With beta_t = 0 (or w_t = 0) every H_t = I: PaTH is attention with no positional
    encoding (NoPE), q.k * Dh^-0.5 under the causal mask."""
    enc = build(seed % 7)
    with torch.no_grad():
        if zero == "beta":
            enc.beta_weight.zero_()
            enc.beta_bias.fill_(-1e4)  # 2 sigmoid(-1e4) = 0 in float32
        else:
            enc.w_weight.zero_()
        q, k, v = qkv(t, t, seed)
        w, beta = enc.reflections(k, torch.arange(t)[None])
        assert (beta == 0).all() if zero == "beta" else (w == 0).all()
        torch.testing.assert_close(attention(q, k, v, enc), attention(q, k, v, None))


@PROPS
@given(
    dh=st.integers(1, 6),
    beta=st.sampled_from([0.0, 2.0]),
    seed=st.integers(0, 10**6),
)
def test_each_transform_is_orthogonal_at_beta_0_and_2(dh, beta, seed):
    """H = I - beta w w^T with |w| = 1 is symmetric with eigenvalues 1 (Dh - 1 times) and
    1 - beta: orthogonal for beta in {0, 2} (the identity, a reflection: det -1), and a
    contraction (spectral norm 1, the w direction scaled by 1 - beta) for beta in (0, 2)."""
    g = torch.Generator().manual_seed(seed)
    w = F.normalize(torch.randn(dh, generator=g, dtype=torch.float64), dim=0)
    Hm = householder(w, torch.tensor(beta, dtype=torch.float64))
    torch.testing.assert_close(Hm @ Hm.T, torch.eye(dh, dtype=torch.float64))
    assert torch.linalg.det(Hm).item() == pytest.approx(1.0 - beta)
    mid = torch.rand((), generator=g, dtype=torch.float64) * 2  # beta in (0, 2)
    eig = torch.linalg.eigvalsh(householder(w, mid))
    want = torch.cat([(1 - mid)[None], torch.ones(dh - 1, dtype=torch.float64)]).sort().values
    torch.testing.assert_close(eig, want)


@PROPS
@given(t=st.integers(1, 8), reflect=st.booleans(), seed=st.integers(0, 10**6))
def test_accumulated_transform_preserves_or_shrinks_the_query(t, reflect, seed):
    """A product of reflections (beta = 2) is orthogonal: the transformed query
    H_{j+1} ... H_i q_i keeps the norm of q_i (read through keys e_1 .. e_Dh: the squares of
    its coordinates sum to |q_i|^2 for every key j <= i); with beta in (0, 2) the product is a
    contraction: |S_ij| <= |q_i| |k_j|."""
    g = torch.Generator().manual_seed(seed)
    q, k = torch.randn(2, 1, 2, t, 4, generator=g, dtype=torch.float64)
    w = F.normalize(torch.randn(1, 2, t, 4, generator=g), dim=-1).double()
    beta = torch.full((1, 2, t), 2.0) if reflect else 2 * torch.rand(1, 2, t, generator=g)
    pos = torch.arange(t)[None]
    s = path_scores(q, k, w, beta.double(), pos, pos).double()
    bound = q.norm(dim=-1)[..., :, None] * k.norm(dim=-1)[..., None, :]
    assert (s.abs() <= bound + 1e-5).all()
    basis = torch.eye(4, dtype=torch.float64)
    coords = [path_scores(q, e.expand_as(k), w, beta.double(), pos, pos) for e in basis]
    sq = torch.stack(coords).double().square().sum(0)  # [1, 2, Tq, Tk]: |P_ij q_i|^2
    causal = torch.ones(t, t, dtype=torch.bool).tril()
    norm2 = q.square().sum(-1)[..., None].expand_as(sq)
    if reflect:
        torch.testing.assert_close(sq[..., causal], norm2[..., causal], atol=1e-5, rtol=1e-5)
    else:
        assert (sq[..., causal] <= norm2[..., causal] + 1e-5).all()


@pytest.mark.parametrize("forget_gate", [False, True])
def test_decoding_blocks_and_packed_documents_equal_the_full_forward(forget_gate):
    """The last Tq queries over every key (a decode step), and each packed document (positions
    that restart, a block-diagonal mask) on its own, give the full forward's numbers."""
    enc = build(1, forget_gate=forget_gate)
    q, k, v = qkv(9, 9, seed=3)
    with torch.no_grad():
        full = attention(q, k, v, enc)
        for tq in (1, 4):
            step = attention(q[:, :, -tq:], k, v, enc, q_pos=torch.arange(9 - tq, 9))
            torch.testing.assert_close(step, full[:, :, -tq:])
        pos = packed_positions([4, 5])
        doc = torch.tensor([0] * 4 + [1] * 5)
        mask = doc[:, None] == doc[None, :]
        packed = attention(q, k, v, enc, q_pos=pos, k_pos=pos, mask=mask)
        torch.testing.assert_close(
            packed[:, :, :4], attention(*(x[:, :, :4] for x in (q, k, v)), enc)
        )
        torch.testing.assert_close(
            packed[:, :, 4:], attention(*(x[:, :, 4:] for x in (q, k, v)), enc)
        )


def test_gate_term_is_foxs_bias_scaled_as_the_reference():
    """forget_gate=True adds the FoX bias of the gates times softmax_scale (as the authors'
    kernels), on top of PaTH's transforms."""
    plain, gated = build(2), build(2, forget_gate=True)
    gated.load_state_dict(plain.state_dict(), strict=False)  # the same transforms
    q, k, _ = qkv(6, 6, seed=4)
    pos = torch.arange(6)
    with torch.no_grad():
        diff = gated.bias(q, k, pos, pos) - plain.bias(q, k, pos, pos)
        want = forget_bias(gated.log_gates(k), pos[None], pos[None]) * DH**-0.5
    torch.testing.assert_close(diff, want)


def test_every_parameter_gets_a_gradient():
    enc = build(3, forget_gate=True)
    q, k, v = qkv(6, 6, seed=5)
    attention(q, k, v, enc).square().sum().backward()
    for name, p in enc.named_parameters():
        assert p.grad is not None and p.grad.abs().sum() > 0, name
