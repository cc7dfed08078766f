"""GRAPE (Zhang et al. 2026): grape_m and grape_a against the authors' PyTorch modules (golden
tensors written by tests/golden/make_grape.py from model-architectures/GRAPE), against golden
values derived by hand from the paper's equations (explicit matrix exponentials of the
generators, torch.linalg.matrix_exp, and the unipotent lift), and the properties the paper
claims: the special cases equal posenc's rope, alibi and fox; GRAPE-M's scores depend on the
offset only; the action composes, exp(nL) exp(mL) = exp((n + m)L)."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import posenc
from posenc.attention import attention
from posenc.encodings.grape import GrapeA, GrapeM
from posenc.functional.grape import rank2_exp

PROPS = settings(max_examples=20, deadline=None)
GOLDEN = Path(__file__).parents[1] / "golden" / "grape.pt"
B, H, DH, D = 2, 4, 8, 32


def rand(*shape, seed=0, dtype=torch.float32):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed), dtype=dtype)


def perturbed(enc, scale=0.3, seed=1):
    """The encoding with its parameters moved off their init (a trained state)."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in enc.parameters():
            p.add_(scale * torch.randn(p.shape, generator=g))
    return enc


def generator_matrix(enc: GrapeM, head: int = 0) -> torch.Tensor:
    """GRAPE-M's generator L = sum_i w_i (e_a e_b^T - e_b e_a^T) [Dh, Dh] float64, over its
    canonical planes (a, b) (the authors' orientation; RoPE's is -L), written out by hand."""
    w = enc.freq().double()
    w = w[head] if w.dim() == 2 else w
    dh, half = enc.head_dim, w.numel()
    L = torch.zeros(dh, dh, dtype=torch.float64)
    for i in range(half):
        a, b = (i, i + half) if enc.layout == "half" else (2 * i, 2 * i + 1)
        L[a, b], L[b, a] = w[i], -w[i]
    return L if enc.orientation == "grape" else -L


# ------------------------------------------------------------- parity: the authors' code


def test_grape_m_matches_the_authors_msgrape_commuting():
    """Parity with the reference code (golden file): MSGRAPECommuting with learned (perturbed)
    frequencies, shared and per head, on random q, k [B, T, H, D]."""
    golden = torch.load(GOLDEN)
    for case, per_head in (("m_shared", False), ("m_per_head", True)):
        g = golden[case]
        b, t, h, d = g["q"].shape
        enc = GrapeM(heads=h, head_dim=d, per_head=per_head)  # log_freq_scale 16, as theirs
        with torch.no_grad():
            enc.log_freq.copy_(g["log_freq"])
        pos = torch.arange(t)
        q, k = enc.rotate(g["q"].transpose(1, 2), g["k"].transpose(1, 2), pos, pos)
        torch.testing.assert_close(q, g["q_out"].transpose(1, 2), atol=2e-5, rtol=1e-5)
        torch.testing.assert_close(k, g["k_out"].transpose(1, 2), atol=2e-5, rtol=1e-5)


@pytest.mark.parametrize("gate", ["key", "query", "query_key"])
def test_grape_a_matches_the_authors_gated_additive_bias(gate):
    """Parity with the reference code (golden file): the key-, query- and query+key-gated
    additive biases (learned omega, probes u, v) on random q, k, on the pairs j <= i (the
    authors' bias is 0 past the query, ours the linear continuation: both masked)."""
    g = torch.load(GOLDEN)[f"a_{gate}"]
    b, t, h, d = g["q"].shape
    enc = GrapeA(heads=h, head_dim=d, gate=gate)
    with torch.no_grad():
        enc.omega.copy_(g["omega"])
        for probe in ("u", "v"):
            if probe in g:
                getattr(enc, probe).copy_(g[probe])
    pos = torch.arange(t)
    bias = enc.bias(g["q"].transpose(1, 2), g["k"].transpose(1, 2), pos, pos)
    causal = torch.ones(t, t, dtype=torch.bool).tril()
    torch.testing.assert_close(bias * causal, g["bias"] * causal, atol=1e-5, rtol=1e-5)


# ---------------------------------------------- golden values derived by hand: exp(n w L)


@PROPS
@given(st.integers(0, 2**16), st.floats(-40.0, 40.0), st.integers(2, 8))
def test_rank2_closed_form_is_the_matrix_exponential(seed, eta, d):
    """Hand-derived golden: the paper's Rodrigues form of exp(eta L), L = a b^T - b a^T, equals
    torch.linalg.matrix_exp, and is a rotation (orthogonal, det 1)."""
    a, b = rand(d, seed=seed, dtype=torch.float64), rand(d, seed=seed + 1, dtype=torch.float64)
    L = torch.outer(a, b) - torch.outer(b, a)
    G = rank2_exp(a, b, eta)
    torch.testing.assert_close(G, torch.linalg.matrix_exp(eta * L), atol=1e-9, rtol=1e-9)
    torch.testing.assert_close(G.T @ G, torch.eye(d, dtype=torch.float64), atol=1e-9, rtol=0)
    assert torch.linalg.det(G).item() == pytest.approx(1.0, abs=1e-9)


@pytest.mark.parametrize("layout", ["half", "interleaved"])
@pytest.mark.parametrize("orientation", ["grape", "rope"])
@pytest.mark.parametrize("per_head", [False, True])
def test_grape_m_is_the_matrix_exponential_of_its_generator(layout, orientation, per_head):
    """Hand-derived golden: rotate(x, n) = exp(n L) x with L the generator written out by
    hand (generator_matrix) and torch.linalg.matrix_exp, at integer and fractional n."""
    enc = perturbed(GrapeM(heads=H, head_dim=DH, layout=layout, orientation=orientation,
                           per_head=per_head), scale=2.0)  # fmt: skip
    pos = torch.tensor([0.0, 1.0, 2.5, 7.0, 31.0])
    x = rand(1, H, pos.numel(), DH, seed=3, dtype=torch.float64)
    rx, _ = enc.rotate(x, x, pos, pos)
    for h in range(H):
        L = generator_matrix(enc, h if per_head else 0)
        for t, n in enumerate(pos.tolist()):
            want = torch.linalg.matrix_exp(n * L) @ x[0, h, t]
            torch.testing.assert_close(rx[0, h, t], want, atol=1e-9, rtol=1e-9)


# ---------------------------------------------------- properties the paper claims


@PROPS
@given(st.integers(0, 500), st.integers(0, 500), st.integers(0, 2**16), st.booleans())
def test_grape_m_composes(n, m, seed, per_head):
    """The group law: exp(nL) exp(mL) = exp((n+m)L): rotating by m, then by n, is rotating by
    n + m (through posenc's rotate and through the generator's matrix exponential)."""
    enc = perturbed(GrapeM(heads=H, head_dim=DH, per_head=per_head), seed=seed % 7)
    x = rand(1, H, 1, DH, seed=seed, dtype=torch.float64)
    at = lambda p: torch.tensor([p])  # noqa: E731
    once, _ = enc.rotate(x, x, at(m), at(m))
    twice, _ = enc.rotate(once, once, at(n), at(n))
    direct, _ = enc.rotate(x, x, at(n + m), at(n + m))
    torch.testing.assert_close(twice, direct, atol=1e-9, rtol=1e-9)
    L = generator_matrix(enc)
    E = torch.linalg.matrix_exp
    torch.testing.assert_close(E(n * L) @ E(m * L), E((n + m) * L), atol=1e-9, rtol=1e-9)


@PROPS
@given(
    st.integers(0, 2**16), st.integers(1, 1000), st.booleans(), st.sampled_from(["grape", "rope"])
)
def test_grape_m_scores_depend_only_on_the_offset(seed, shift, per_head, orientation):
    """Exact relative law: <G(i) q, G(j) k> = <q, G(j - i) k>, so shifting every position by
    the same amount leaves every score unchanged (learned frequencies, shared or per head)."""
    enc = perturbed(GrapeM(heads=H, head_dim=DH, per_head=per_head, orientation=orientation),
                    seed=seed % 5)  # fmt: skip
    q, k = rand(B, H, 6, DH, seed=seed), rand(B, H, 6, DH, seed=seed + 1)
    pos = torch.tensor([0, 1, 3, 4, 9, 20])
    scores = lambda p: torch.einsum("bhid,bhjd->bhij", *enc.rotate(q, k, p, p))  # noqa: E731
    torch.testing.assert_close(scores(pos + shift), scores(pos), atol=2e-4, rtol=1e-4)


def test_grape_m_at_init_with_ropes_orientation_is_rope():
    """Special case (paper, prop. 3.1): canonical planes with RoPE's log-uniform spectrum are
    RoPE. grape_m(orientation="rope") at init equals posenc's rope: rotated q, k and the
    attention outputs on random inputs, for both layouts and a partial rotary dim; the authors'
    orientation is RoPE with each plane reflected (the generator's sign: its scores are
    RoPE's of q, k with the second channel of every pair negated)."""
    for kwargs in ({}, {"layout": "interleaved"}, {"rotary_dim": 4}):
        grape = posenc.build("grape_m", dim=D, heads=H, orientation="rope", **kwargs)
        rope = posenc.build("rope", dim=D, heads=H, **kwargs)
        q, k, v = rand(B, H, 9, DH, seed=1), rand(B, 2, 9, DH, seed=2), rand(B, 2, 9, DH, seed=3)
        pos = torch.arange(9)
        for a, b in zip(grape.rotate(q, k, pos, pos), rope.rotate(q, k, pos, pos)):
            torch.testing.assert_close(a, b, atol=1e-5, rtol=1e-5)
        torch.testing.assert_close(
            attention(q, k, v, grape, backend="eager"), attention(q, k, v, rope, backend="eager"),
            atol=1e-5, rtol=1e-5,
        )  # fmt: skip
    grape = posenc.build("grape_m", dim=D, heads=H)  # the authors' orientation
    rope = posenc.build("rope", dim=D, heads=H)
    q, k = rand(B, H, 9, DH, seed=4), rand(B, H, 9, DH, seed=5)
    pos = torch.arange(9)
    flip = torch.cat([torch.ones(DH // 2), -torch.ones(DH // 2)])  # reflect each plane
    s_grape = torch.einsum("bhid,bhjd->bhij", *grape.rotate(q, k, pos, pos))
    s_rope = torch.einsum("bhid,bhjd->bhij", *rope.rotate(q * flip, k * flip, pos, pos))
    torch.testing.assert_close(s_grape, s_rope, atol=1e-4, rtol=1e-5)


def test_grape_a_without_gates_is_alibi():
    """Special case (paper, section 4.2): the rank-1 unipotent with constant rate is ALiBi:
    grape_a(gate="none") at init equals posenc's alibi, its bias, score_mod, distance form and
    attention outputs (eager, sdpa and the distance backend)."""
    for heads in (4, 6):
        grape = posenc.build("grape_a", dim=8 * heads, heads=heads, gate="none")
        alibi = posenc.build("alibi", dim=8 * heads, heads=heads)
        assert grape.provides == alibi.provides and not grape.content_dependent
        q, k, v = (rand(B, heads, 11, DH, seed=s) for s in (1, 2, 3))
        pos = torch.arange(11)
        torch.testing.assert_close(grape.bias(q, k, pos, pos), alibi.bias(q, k, pos, pos),
                                   atol=1e-6, rtol=1e-6)  # fmt: skip
        d = torch.arange(0, 11)
        torch.testing.assert_close(grape.distance_bias(d, pos), alibi.distance_bias(d, pos),
                                   atol=1e-6, rtol=1e-6)  # fmt: skip
        for backend in ("eager", "sdpa", "distance"):
            torch.testing.assert_close(attention(q, k, v, grape, backend=backend),
                                       attention(q, k, v, alibi, backend=backend),
                                       atol=1e-5, rtol=1e-5)  # fmt: skip


def lifted(x: torch.Tensor, query: bool) -> torch.Tensor:
    """The paper's asymmetric homogeneous lift: [q; 1; 0] for queries, [k; 0; 1] for keys."""
    one, zero = torch.ones_like(x[..., :1]), torch.zeros_like(x[..., :1])
    return torch.cat([x, one, zero] if query else [x, zero, one], -1)


def test_grape_a_is_the_unipotent_action_on_the_lift():
    """Hand-derived golden (paper eqs. 4.4-4.6): for every head and pair, the score
    [q; 1; 0]^T G_add(j - i)^{-T} [k; 0; 1] with G_add(m) = matrix_exp(m w A_ij),
    A_ij = -Lambda_ij e_{d+2} e_{d+1}^T, Lambda_ij the query + key gates, equals posenc's
    logits q.k / sqrt(Dh) + bias(i, j), for every gate."""
    T, h_n = 5, 3
    for gate in ("query_key", "key", "query", "none"):
        enc = perturbed(GrapeA(heads=h_n, head_dim=DH, gate=gate), seed=2)
        q, k = rand(1, h_n, T, DH, seed=4), rand(1, h_n, T, DH, seed=5)
        pos = torch.arange(T)
        want = (q @ k.transpose(-1, -2)) * DH**-0.5 + enc.bias(q, k, pos, pos)
        rate = enc.rates(q, k)
        rate = torch.ones(1, h_n, T, T) if rate is None else rate.expand(1, h_n, T, T)
        w = enc._params()[0]  # w_h m_h, the per-head frequency of the action
        A0 = torch.zeros(DH + 2, DH + 2, dtype=torch.float64)
        A0[DH + 1, DH] = 1.0  # e_{d+2} e_{d+1}^T, A0 @ A0 = 0
        got = torch.empty(1, h_n, T, T, dtype=torch.float64)
        for h in range(h_n):
            for i in range(T):
                qi = lifted(q[0, h, i].double() * DH**-0.5, query=True)
                for j in range(T):
                    A = -rate[0, h, i, j].double() * A0
                    G = torch.linalg.matrix_exp((j - i) * w[h].double() * A)
                    got[0, h, i, j] = qi @ torch.linalg.inv(G).T @ lifted(k[0, h, j].double(),
                                                                         query=False)  # fmt: skip
        torch.testing.assert_close(want.double(), got, atol=1e-5, rtol=1e-5)


def test_fox_is_grape_a_with_data_dependent_rates():
    """Special case (paper, appendix C): FoX's bias is additive GRAPE's unipotent path product,
    prod over l in (j, i] of exp(w_l E), E = e_{d+1} e_{d+2}^T, w_l = log f_l the forget
    gates: written out as matrix products on the lift, it gives posenc's fox scores and
    attention outputs on random inputs."""
    T = 6
    fox = perturbed(posenc.build("fox", dim=D, heads=H), scale=1.0)
    q, k, v = (rand(B, H, T, DH, seed=s) for s in (6, 7, 8))
    w = fox.log_gates(k).double()  # [B, H, T] log f <= 0
    E = torch.zeros(DH + 2, DH + 2, dtype=torch.float64)
    E[DH, DH + 1] = 1.0
    scores = torch.full((B, H, T, T), -torch.inf, dtype=torch.float64)
    for b in range(B):
        for h in range(H):
            for i in range(T):
                qi = lifted(q[b, h, i].double() * DH**-0.5, query=True)
                for j in range(i + 1):
                    G = torch.eye(DH + 2, dtype=torch.float64)
                    for step in range(j + 1, i + 1):  # the path from key j to query i
                        G = G @ torch.linalg.matrix_exp(w[b, h, step] * E)
                    scores[b, h, i, j] = qi @ G @ lifted(k[b, h, j].double(), query=False)
    pos = torch.arange(T)
    logits = (q @ k.transpose(-1, -2)) * DH**-0.5 + fox.bias(q, k, pos, pos)
    causal = torch.ones(T, T, dtype=torch.bool).tril()
    torch.testing.assert_close(logits.double() * causal, scores.nan_to_num(0, 0, 0) * causal,
                               atol=1e-5, rtol=1e-5)  # fmt: skip
    want = torch.softmax(scores, -1) @ v.double()
    torch.testing.assert_close(attention(q, k, v, fox, backend="eager").double(), want,
                               atol=1e-5, rtol=1e-5)  # fmt: skip


def test_grape_a_penalty_grows_with_distance_and_is_relative():
    """Non-negative gates: the bias is <= 0 on j <= i and, with the key fixed, linear in the
    offset; shifting all positions leaves it unchanged (the exact relative law, eq. 4.3)."""
    enc = perturbed(GrapeA(heads=H, head_dim=DH, gate="query_key"))
    q, k = rand(B, H, 8, DH, seed=1), rand(B, H, 8, DH, seed=2)
    pos = torch.arange(8)
    bias = enc.bias(q, k, pos, pos)
    causal = torch.ones(8, 8, dtype=torch.bool).tril()
    assert (bias[..., causal] <= 0).all()
    torch.testing.assert_close(enc.bias(q, k, pos + 37, pos + 37), bias)
    assert enc.score_mod(pos, pos) is None and enc.distance_bias(pos, pos) is None


# ----------------------------------------------------------- training and bad input


def test_learnable_frequencies_and_rates_get_gradients():
    grape = GrapeM(heads=H, head_dim=DH)
    frozen = GrapeM(heads=H, head_dim=DH, learnable=False)
    assert grape.trainable and not frozen.trainable
    assert not frozen.log_freq.requires_grad
    q = rand(B, H, 5, DH, seed=1)
    pos = torch.arange(5)
    grape.rotate(q, q, pos, pos)[0].square().sum().backward()
    assert grape.log_freq.grad is not None and grape.log_freq.grad.abs().sum() > 0
    add = GrapeA(heads=H, head_dim=DH)
    add.bias(q, q, pos, pos).sum().backward()
    for p in (add.omega, add.u, add.v):
        assert p.grad is not None and p.grad.abs().sum() > 0


@pytest.mark.parametrize(
    "name, kwargs, match",
    [
        ("grape_m", {"orientation": "left"}, "orientation"),
        ("grape_m", {"log_freq_scale": 0.0}, "log_freq_scale"),
        ("grape_m", {"learnable": "yes"}, "learnable"),
        ("grape_m", {"per_head": True, "heads": None, "head_dim": 8}, "heads"),
        ("grape_m", {"dim": None, "heads": None}, "head dim"),
        ("grape_a", {"gate": "value"}, "gate"),
        ("grape_a", {"omega_init": -1.0}, "omega_init"),
        ("grape_a", {"heads": None}, "heads"),
        ("grape_a", {"dim": None, "head_dim": None}, "head_dim"),
    ],
)
def test_bad_settings_raise_a_value_error_naming_the_parameter(name, kwargs, match):
    with pytest.raises((ValueError, TypeError), match=match):
        posenc.build(name, **{"dim": D, "heads": H, **kwargs})


def test_per_head_frequencies_refuse_grouped_keys():
    enc = GrapeM(heads=H, head_dim=DH, per_head=True)
    q, k = rand(B, H, 3, DH), rand(B, 2, 3, DH)
    with pytest.raises(ValueError, match="per_head"):
        enc.rotate(q, k, torch.arange(3), torch.arange(3))
    with pytest.raises(ValueError, match="head_dim"):
        enc.rotate(rand(B, H, 3, 6), rand(B, H, 3, 6), torch.arange(3), torch.arange(3))


def test_frequencies_stay_float32_when_the_model_is_cast():
    """As the authors' code: model.to(bfloat16) keeps log_freq float32 (bfloat16 would move the
    frequencies by up to 6%), so the bfloat16 model rotates by float32 frequencies."""
    model = posenc.TransformerLM(vocab_size=11, dim=D, depth=1, heads=H, encoding="grape_m")
    enc = model.encodings[0]
    want = enc.freq().clone()
    model.to(torch.bfloat16)
    assert enc.log_freq.dtype == torch.float32 and enc.log_freq.requires_grad
    torch.testing.assert_close(enc.freq(), want, atol=0, rtol=0)
    logits = model(torch.randint(0, 11, (2, 5)))
    logits = logits if torch.is_tensor(logits) else logits[0]
    assert logits.dtype == torch.bfloat16
