"""posenc.bias: ALiBi, T5, KERPLE, FIRE, Sandwich."""

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import posenc
from posenc.encodings.bias import ENCODINGS, FIRE, KERPLE, ALiBi, Sandwich, T5Bias
from posenc.functional import alibi_slopes, relu_mlp_pieces, sandwich_curve

H, DH = 4, 8

# name -> constructor keywords; every family member and variant
VARIANTS = {
    "alibi": ("alibi", {}),
    "alibi_bidirectional": ("alibi", {"bidirectional": True}),
    "t5": ("t5", {}),
    "t5_bidirectional": ("t5", {"bidirectional": True, "num_buckets": 8, "max_distance": 12}),
    "kerple_log": ("kerple", {"variant": "log"}),
    "kerple_power": ("kerple", {"variant": "power"}),
    "fire": ("fire", {"train_len": 6}),
    "sandwich": ("sandwich", {}),
    "sandwich_small": ("sandwich", {"sandwich_dim": 8}),
}
SHIFT_INVARIANT = [v for v in VARIANTS if not v.startswith("fire")]


def make(variant: str, heads: int = H):
    name, kwargs = VARIANTS[variant]
    torch.manual_seed(0)
    return posenc.build(name, heads=heads, **kwargs)


def qk(batch: int, tq: int, tk: int, dtype=torch.float32):
    return torch.zeros(batch, H, tq, DH, dtype=dtype), torch.zeros(batch, H, tk, DH, dtype=dtype)


def assert_same(got, expected):
    """Equal up to the last bit or two: torch's vectorized and scalar pow paths differ by ulps."""
    torch.testing.assert_close(got, expected, rtol=1e-6, atol=1e-7)


def grid_score_mod(fn, batch: int, tq: int, tk: int) -> torch.Tensor:
    """Evaluate a score_mod on broadcast index grids with score 0 -> [batch or 1, H, Tq, Tk]."""
    b = torch.arange(batch).view(-1, 1, 1, 1)
    h = torch.arange(H).view(1, -1, 1, 1)
    q_idx = torch.arange(tq).view(1, 1, -1, 1)
    kv_idx = torch.arange(tk).view(1, 1, 1, -1)
    return fn(torch.zeros(()), b, h, q_idx, kv_idx)


def test_registry_has_the_bias_family():
    for name in ("alibi", "t5", "kerple", "fire", "sandwich"):
        assert posenc.ENCODINGS[name] is ENCODINGS[name]
        assert ENCODINGS[name].family == "bias"
        assert ENCODINGS[name].paper and ENCODINGS[name].summary
    assert T5Bias.integer_positions and not ALiBi.integer_positions
    assert {n for n, c in ENCODINGS.items() if c.trainable} == {"t5", "kerple", "fire"}


# ---------------------------------------------------------------------------- shapes, dtypes


@pytest.mark.parametrize("variant", VARIANTS)
def test_bias_shape_and_dtype(variant):
    enc = make(variant)
    q, k = qk(2, 3, 5, torch.bfloat16)
    out = enc.bias(q, k, torch.arange(2, 5), torch.arange(5))
    assert out.shape == (1, H, 3, 5) and out.dtype == torch.bfloat16
    out = enc.bias(q, k, torch.arange(2, 5).expand(2, 3), torch.arange(5))
    assert out.shape == (2, H, 3, 5)
    assert enc.max_len is None  # formula or bucket based: no length limit


# ---------------------------------------------------------------------------- score_mod == bias


@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize("batched", [False, True])
def test_score_mod_equals_bias(variant, batched):
    enc = make(variant)
    tq, tk, batch = 4, 9, 3
    g = torch.Generator().manual_seed(1)
    if batched:  # [B, T]: left padding offsets, packed restarts
        k_pos = torch.randint(0, 40, (batch, tk), generator=g).sort(-1).values
        q_pos = k_pos[:, -tq:]
    else:
        k_pos = torch.arange(tk) + 3
        q_pos = k_pos[-tq:]
    q, k = qk(batch, tq, tk)
    expected = enc.bias(q, k, q_pos, k_pos)
    got = grid_score_mod(enc.score_mod(q_pos, k_pos), batch, tq, tk)
    assert_same(got.expand_as(expected), expected)


@pytest.mark.parametrize("variant", ["alibi", "kerple_log", "fire", "sandwich"])
def test_score_mod_equals_bias_for_float_positions(variant):
    enc = make(variant)
    k_pos = torch.linspace(0, 30, 7)  # interpolated positions
    q_pos = k_pos[-3:]
    q, k = qk(1, 3, 7)
    expected = enc.bias(q, k, q_pos, k_pos)
    got = grid_score_mod(enc.score_mod(q_pos, k_pos), 1, 3, 7)
    assert_same(got, expected)


@pytest.mark.parametrize("variant", VARIANTS)
def test_score_mod_broadcasts_batch_one_positions(variant):
    """[1, T] positions serve every batch row b > 0 (row 0 is read), as in bias()."""
    enc = make(variant)
    tq, tk, batch = 3, 6, 3
    k_pos = (torch.arange(tk) + 5)[None]  # [1, Tk]
    q_pos = k_pos[:, -tq:]
    q, k = qk(batch, tq, tk)
    expected = enc.bias(q, k, q_pos[0], k_pos[0])  # the same positions as [T]
    assert_same(enc.bias(q, k, q_pos, k_pos), expected)
    got = grid_score_mod(enc.score_mod(q_pos, k_pos), batch, tq, tk)
    assert_same(got.expand_as(expected), expected)
    k_rows = torch.stack([k_pos[0], k_pos[0] + 2, k_pos[0] * 2])  # [B, Tk] keys, [1, Tq] queries
    expected = enc.bias(q, k, q_pos, k_rows)
    assert_same(grid_score_mod(enc.score_mod(q_pos, k_rows), batch, tq, tk), expected)
    with pytest.raises(ValueError, match="batch sizes differ: 2 and 3"):
        enc.score_mod(q_pos.expand(2, tq), k_rows)


# ---------------------------------------------------------------------------- positions


@pytest.mark.parametrize("variant", VARIANTS)
def test_query_blocks_and_batched_positions_equal_the_full_bias(variant):
    enc = make(variant)
    pos = torch.arange(10) + 2
    q, k = qk(1, 10, 10)
    full = enc.bias(q, k, pos, pos)
    block = enc.bias(q[:, :, 6:], k, pos[6:], pos)  # chunked / cached decoding
    assert_same(block, full[:, :, 6:])
    batched = torch.stack([pos, torch.arange(10) * 3])
    out = enc.bias(*qk(2, 10, 10), batched, batched)
    assert_same(out[0], full[0])
    assert_same(out[1], enc.bias(q, k, batched[1], batched[1])[0])


position_lists = st.lists(st.integers(0, 300), min_size=1, max_size=8)


@pytest.mark.parametrize("variant", SHIFT_INVARIANT)
@settings(max_examples=20, deadline=None)
@given(q_pos=position_lists, k_pos=position_lists, shift=st.integers(1, 10_000))
def test_shifting_all_positions_leaves_the_bias_unchanged(variant, q_pos, k_pos, shift):
    enc = make(variant)
    qp, kp = torch.tensor(q_pos), torch.tensor(k_pos)
    q, k = qk(1, len(q_pos), len(k_pos))
    assert_same(enc.bias(q, k, qp + shift, kp + shift), enc.bias(q, k, qp, kp))


two_or_more = st.lists(st.integers(0, 300), min_size=2, max_size=8)


@settings(max_examples=20, deadline=None)
@given(positions=two_or_more, shift=st.integers(5, 10_000))
def test_shifting_positions_changes_fire(positions, shift):
    fire = FIRE(heads=H, train_len=4)
    with torch.no_grad():  # a strictly increasing MLP: any change of its input shows
        for layer in (fire.mlp[0], fire.mlp[2]):
            layer.weight.uniform_(0.5, 1.0)
            layer.bias.uniform_(0.1, 0.5)
    pos = torch.tensor(positions)
    q, k = qk(1, len(positions), len(positions))
    before, after = fire.bias(q, k, pos, pos), fire.bias(q, k, pos + shift, pos + shift)
    differ = pos[:, None] != pos[None, :]  # i == j gives psi(0) = 0 before and after
    assert (before != after)[0, :, differ].all()
    assert torch.equal(before[0, :, ~differ], after[0, :, ~differ])


# ---------------------------------------------------------------------------- parity and formulas


def test_alibi_softmax_equals_bloom_with_left_padding():
    bloom = pytest.importorskip("transformers.models.bloom.modeling_bloom")
    mask = torch.tensor([[0, 0, 1, 1, 1, 1], [1, 1, 1, 1, 1, 1], [0, 1, 1, 1, 1, 1]])
    heads = 6  # not a power of two
    ref = bloom.build_alibi_tensor(mask, heads, torch.float32).view(3, heads, 1, 6)
    positions = (mask.cumsum(-1) - 1).clamp(min=0)  # BLOOM's positions under left padding
    q = torch.zeros(3, heads, 6, DH)
    ours = ALiBi(heads=heads).bias(q, q, positions, positions)
    blocked = torch.where(mask[:, None, None, :].bool(), 0.0, float("-inf"))
    # BLOOM adds m*j, ALiBi -m*(i - j): equal up to a per-query constant, so equal softmax
    torch.testing.assert_close(
        torch.softmax(ours + blocked, -1), torch.softmax(ref + blocked, -1).expand_as(ours)
    )


def test_alibi_values():
    q = torch.zeros(1, 3, 4, DH)
    pos = torch.arange(4)
    m = alibi_slopes(3).view(3, 1, 1)
    rel = (pos[:, None] - pos[None, :]).float()
    assert torch.equal(ALiBi(heads=3).bias(q, q, pos, pos)[0], -m * rel)
    assert torch.equal(ALiBi(heads=3, bidirectional=True).bias(q, q, pos, pos)[0], -m * rel.abs())


@pytest.mark.parametrize("is_decoder", [False, True])
def test_t5_equals_transformers_compute_bias_with_copied_weights(is_decoder):
    t5 = pytest.importorskip("transformers.models.t5.modeling_t5")
    config = t5.T5Config(
        d_model=16,
        d_kv=DH,
        num_heads=H,
        relative_attention_num_buckets=10,
        relative_attention_max_distance=20,
        is_decoder=is_decoder,
    )
    ref = t5.T5Attention(config, has_relative_attention_bias=True, layer_idx=0)
    ours = T5Bias(heads=H, bidirectional=not is_decoder, num_buckets=10, max_distance=20)
    with torch.no_grad():
        ref.relative_attention_bias.weight.normal_()
        ours.relative_attention_bias.weight.copy_(ref.relative_attention_bias.weight)
    tq, tk = 5, 60
    expected = ref.compute_bias(tq, tk, past_seen_tokens=tk - tq)
    q, k = qk(1, tq, tk)
    got = ours.bias(q, k, torch.arange(tk - tq, tk), torch.arange(tk))
    assert torch.equal(got, expected)


def test_t5_bias_is_trainable():
    t5 = T5Bias(heads=H)
    q, k = qk(1, 5, 5)
    t5.bias(q, k, torch.arange(5), torch.arange(5)).sum().backward()
    assert t5.relative_attention_bias.weight.grad.abs().sum() > 0


def test_t5_max_distance_follows_the_training_length():
    assert T5Bias(heads=2).max_distance == 128
    assert T5Bias(heads=2, train_len=20).max_distance == 20
    assert T5Bias(heads=2, train_len=20, max_distance=50).max_distance == 50
    # below the start of the log buckets (16 for 32 one-way buckets) it stays valid
    assert T5Bias(heads=2, train_len=5, num_buckets=32).max_distance == 17
    assert T5Bias(heads=2, train_len=5, num_buckets=32, bidirectional=True).max_distance == 9
    assert T5Bias(heads=2, train_len=20).max_len is None  # a hint, not a limit
    t5 = T5Bias(heads=2, max_len=20)  # the limit, not a hint
    assert (t5.max_len, t5.max_distance) == (20, 128)


@pytest.mark.parametrize("variant", ["log", "power"])
def test_kerple_values_match_the_formula(variant):
    enc = KERPLE(heads=3, variant=variant)
    pos = torch.tensor([0, 2, 7, 30])
    out = enc.bias(torch.zeros(1, 3, 4, DH), torch.zeros(1, 3, 4, DH), pos, pos)[0]
    r1, r2 = enc.r1.tolist(), enc.r2.tolist()
    for h in range(3):
        for i in range(4):
            for j in range(4):
                d = abs(pos[i].item() - pos[j].item())
                if variant == "log":
                    expected = -r1[h] * torch.log1p(torch.tensor(r2[h] * d)).item()
                else:
                    expected = -r1[h] * d ** r2[h]
                assert out[h, i, j].item() == pytest.approx(expected, rel=1e-5, abs=1e-6)


def test_kerple_parameters_stay_positive_and_gradients_finite():
    for variant in ("log", "power"):
        enc = KERPLE(heads=H, variant=variant)
        with torch.no_grad():
            enc.r1_raw.fill_(-30.0)
            enc.r2_raw.fill_(30.0)
        assert (enc.r1 > 0).all() and (enc.r2 > 0).all()
        if variant == "power":
            assert (enc.r2 <= 2).all()
        enc = KERPLE(heads=H, variant=variant)
        q = torch.zeros(1, H, 5, DH)
        enc.bias(q, q, torch.arange(5), torch.arange(5)).sum().backward()  # includes |i-j| = 0
        for p in (enc.r1_raw, enc.r2_raw):
            assert torch.isfinite(p.grad).all() and p.grad.abs().sum() > 0


def test_fire_equals_the_papers_vectorized_mlp():
    fire = make("fire")
    pos = torch.arange(12)
    q = torch.zeros(1, H, 12, DH)
    out = fire.bias(q, q, pos, pos)
    # the paper's formulation: normalized distance through the nn.Sequential MLP
    p = pos.float()
    c, L = fire.c.detach(), fire.threshold.detach()
    rel = torch.log(torch.abs(c * (p[:, None] - p[None, :])) + 1)
    norm = torch.log(torch.abs(c * torch.maximum(p, L)) + 1)[:, None] + fire.eps
    expected = fire.mlp(rel.div(norm).unsqueeze(-1)).permute(2, 0, 1)
    torch.testing.assert_close(out[0], expected, rtol=1e-5, atol=1e-6)


@settings(max_examples=50, deadline=None)
@given(
    U=st.integers(1, 40), H=st.integers(1, 4), seed=st.integers(0, 2**16),
    zero=st.floats(0, 1),
)  # fmt: skip
def test_relu_mlp_pieces_are_the_mlp(U, H, seed, zero):
    """A[h, k] * x + B[h, k], k = #{z < x}, is Linear(1, U) - ReLU - Linear(U, H) at any x."""
    g = torch.Generator().manual_seed(seed)
    w1, b1 = torch.randn(U, generator=g), torch.randn(U, generator=g)
    w1[torch.rand(U, generator=g) < zero] = 0  # units that never turn on or off
    w2, b2 = torch.randn(H, U, generator=g), torch.randn(H, generator=g)
    z, A, B = relu_mlp_pieces(w1, b1, w2, b2)
    assert (z[1:] >= z[:-1]).all() and A.shape == B.shape == (H, z.numel() + 1)
    x = torch.cat([torch.randn(200, generator=g) * 4, z, z + 1e-3, z - 1e-3])  # at the ends too
    k = torch.searchsorted(z, x)  # #{z < x}
    want = torch.relu(x[:, None].double() * w1.double() + b1.double()) @ w2.double().t() + b2
    torch.testing.assert_close((A[:, k] * x + B[:, k]).t().double(), want, atol=1e-4, rtol=1e-4)


def test_fire_mlp_form_is_its_bias():
    """MLP(psi[|i - j|] / den[i]) with mlp_form's tables equals bias(), past the threshold."""
    fire = FIRE(heads=H, train_len=4)
    pos = torch.arange(12)
    q = torch.randn(1, H, 12, 8)
    psi, den, (z, A, B) = fire.mlp_form(pos, 11)
    x = psi[(pos[:, None] - pos).abs()] / den[:, None]  # [T, T]
    k = torch.searchsorted(z, x)
    torch.testing.assert_close((A[:, k] * x + B[:, k])[None], fire.bias(q, q, pos, pos))


def test_fire_threshold_starts_at_the_training_length():
    assert FIRE(heads=2).threshold.item() == 512
    assert FIRE(heads=2, train_len=64).threshold.item() == 64
    assert FIRE(heads=2, train_len=64).max_len is None
    assert FIRE(heads=2, max_len=64).threshold.item() == 512  # the limit, not a hint
    fire = FIRE(heads=2, train_len=8)
    q = torch.zeros(1, 2, 6, DH)
    fire.bias(q, q, torch.arange(6) + 10, torch.arange(6) + 10).sum().backward()
    assert fire.c.grad != 0 and fire.L_multiplier.grad is not None


def test_sandwich_values_and_head_compression():
    enc = Sandwich(heads=H, sandwich_dim=16)
    pos = torch.tensor([0, 1, 5, 40])
    out = enc.bias(torch.zeros(1, H, 4, DH), torch.zeros(1, H, 4, DH), pos, pos)[0]
    curve = sandwich_curve(pos[:, None] - pos[None, :], 16).float()
    for h in range(H):
        ratio = 8 * (h + 1) / H
        torch.testing.assert_close(out[h], curve / ratio, rtol=1e-6, atol=0)
    assert torch.equal(out, out.transpose(1, 2))
    assert (out.diagonal(dim1=1, dim2=2) == 0).all() and (out <= 0).all()
    assert not list(enc.parameters())


def test_sandwich_far_apart_positions_skip_the_table():
    enc = Sandwich(heads=H)
    q_pos, k_pos = torch.tensor([3_000_000]), torch.tensor([0, 1, 2_999_999])
    out = enc.bias(*qk(1, 1, 3), q_pos, k_pos)  # a 3M-entry table would be refused
    curve = sandwich_curve(q_pos[:, None] - k_pos[None, :]).float()
    torch.testing.assert_close(out[0, 0], curve * enc.inv_ratio[0], rtol=0, atol=0)


# ---------------------------------------------------------------------------- bad input


@pytest.mark.parametrize("name", ["alibi", "t5", "kerple", "fire", "sandwich"])
def test_heads_is_required(name):
    with pytest.raises(ValueError, match="needs heads="):
        posenc.build(name)
    with pytest.raises(ValueError, match="heads must be >= 1"):
        posenc.build(name, heads=0)
    with pytest.raises(TypeError, match="heads must be an int"):
        posenc.build(name, heads=2.0)
    with pytest.raises(TypeError):
        posenc.build(name, heads=2, not_a_keyword=1)
    posenc.build(name, dim=32, heads=2, head_dim=16, max_len=64)  # standard keywords


def test_bad_constructor_arguments():
    with pytest.raises(ValueError, match="num_buckets must be an even int >= 4"):
        T5Bias(heads=2, bidirectional=True, num_buckets=7)
    with pytest.raises(ValueError, match="max_distance must be > 8"):
        T5Bias(heads=2, bidirectional=True, num_buckets=32, max_distance=4)
    with pytest.raises(TypeError, match="num_buckets must be an int"):
        T5Bias(heads=2, num_buckets="32")
    with pytest.raises(ValueError, match=r"variant must be one of \('log', 'power'\)"):
        KERPLE(heads=2, variant="cubic")
    with pytest.raises(ValueError, match="even int >= 2"):
        Sandwich(heads=2, sandwich_dim=5)
    with pytest.raises(ValueError, match="max_len must be >= 1"):
        FIRE(heads=2, max_len=0)
    with pytest.raises(TypeError, match="bidirectional must be a bool"):
        ALiBi(heads=2, bidirectional="yes")


@pytest.mark.parametrize("variant", VARIANTS)
def test_bad_positions(variant):
    enc = make(variant)
    q, k = qk(1, 3, 3)
    good = torch.arange(3)
    with pytest.raises(ValueError, match=">= 0"):
        enc.bias(q, k, good - 1, good)
    with pytest.raises(ValueError, match=">= 0"):
        enc.score_mod(good, good - 2)
    with pytest.raises(ValueError, match="k_pos has 4 positions but the sequence has 3"):
        enc.bias(q, k, good, torch.arange(4))
    with pytest.raises(ValueError, match="batch size 2, expected 1"):
        enc.bias(q, k, good.expand(2, 3), good)
    with pytest.raises(ValueError, match=f"built for heads={H}, but q has 2 heads"):
        enc.bias(q[:, :2], k[:, :2], good, good)


def test_t5_needs_integer_positions():
    t5 = T5Bias(heads=H)
    q, k = qk(1, 3, 3)
    with pytest.raises(ValueError, match="must be integers"):
        t5.bias(q, k, torch.tensor([0.0, 1.5, 2.0]), torch.arange(3))
    whole = t5.bias(q, k, torch.arange(3).float(), torch.arange(3))  # integral floats are fine
    assert torch.equal(whole, t5.bias(q, k, torch.arange(3), torch.arange(3)))
