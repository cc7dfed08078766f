"""posenc.absolute: the embed hook of every absolute encoding, parity and bad input."""

import math

import pytest
import torch

import posenc
from posenc import build
from posenc.encodings.absolute import ENCODINGS
from posenc.functional import sinusoidal_table

B, T, D = 2, 10, 16


def _x(dim=D, dtype=torch.float32, t=T):
    return torch.randn(B, t, dim, generator=torch.Generator().manual_seed(0)).to(dtype)


def test_registry_and_attributes():
    assert set(ENCODINGS) == {
        "sinusoidal", "scaled_sinusoidal", "learned", "onehot", "index", "phase",
        "sinusoidal_2d", "sinusoidal_3d", "nope", "nope_temperature", "learned_window",
    }  # fmt: skip
    for name, cls in ENCODINGS.items():
        assert posenc.ENCODINGS[name] is cls
        assert cls.family == ("none" if name.startswith("nope") else "absolute")
        assert cls.paper and cls.summary
    assert ENCODINGS["learned"].integer_positions and ENCODINGS["learned"].trainable
    assert ENCODINGS["onehot"].integer_positions
    assert not ENCODINGS["phase"].cache_exact
    assert ENCODINGS["sinusoidal_2d"].position_dims == 2
    assert ENCODINGS["sinusoidal_3d"].position_dims == 3


def test_keyword_only_constructors():
    for cls in ENCODINGS.values():
        with pytest.raises(TypeError):
            cls(16)
        with pytest.raises(TypeError):
            cls(dim=16, max_len=32, bogus=1)


# ------------------------------------------------------------------------------ sinusoidal


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
def test_sinusoidal_adds_the_table_in_x_dtype(dtype):
    x = _x(dtype=dtype)
    pos = torch.arange(3, 3 + T)
    out = posenc.build("sinusoidal", dim=D).embed(x, pos)
    assert out.dtype == dtype and out.shape == (B, T, D)
    assert torch.equal(out, x + sinusoidal_table(pos, D).to(dtype))


def test_float64_x_gets_a_float64_table():
    # seed 002's d=4 table at position 1: 0.8415 0.5403 0.0100 1.0000 (cos 0.01 = 0.99995;
    # float32 rounds it to 0.99994999, which prints as 0.9999)
    x = torch.zeros(1, 3, 4, dtype=torch.float64)
    out = posenc.build("sinusoidal", dim=4).embed(x, torch.arange(3))
    assert out.dtype == torch.float64
    assert [f"{v:.4f}" for v in out[0, 1].tolist()] == ["0.8415", "0.5403", "0.0100", "1.0000"]
    assert abs(out[0, 2, 3].item() - math.cos(0.02)) < 1e-12


def test_sinusoidal_infers_dim_and_batched_positions():
    enc = posenc.build("sinusoidal")  # no dim: D comes from x
    x = _x(dim=7)
    pos = torch.stack([torch.arange(T), torch.arange(5, 5 + T)])  # [B, T], e.g. left padding
    out = enc.embed(x, pos)
    assert torch.allclose(out[1], x[1] + sinusoidal_table(pos[1], 7))
    with pytest.raises(ValueError, match="dim=16"):
        posenc.build("sinusoidal", dim=16).embed(_x(dim=8), torch.arange(T))


def test_sinusoidal_base_and_learned_scale():
    enc = posenc.build("sinusoidal", dim=D, base=100.0, learned_scale=True)
    assert enc.trainable and [n for n, _ in enc.named_parameters()] == ["scale"]
    assert not posenc.build("sinusoidal", dim=D).trainable
    with torch.no_grad():
        enc.scale.fill_(0.5)
    x, pos = _x(), torch.arange(T)
    assert torch.allclose(enc.embed(x, pos), x + 0.5 * sinusoidal_table(pos, D, base=100.0))
    enc.embed(x, pos).sum().backward()
    assert enc.scale.grad is not None


def test_sinusoidal_noise_only_in_training_and_bounded():
    enc = posenc.build("sinusoidal", dim=D, noise=0.2)
    x, pos = _x(t=64), torch.arange(64)
    clean = x + sinusoidal_table(pos, D)
    assert torch.equal(enc.eval().embed(x, pos), clean)
    eps = enc.train().embed(x, pos) - clean
    assert eps.abs().max().item() <= 0.1 + 1e-6  # U[-a/2, a/2] with a = 0.2
    assert eps.abs().max().item() > 0.05 and eps.std().item() > 0.04  # really noisy
    assert not torch.equal(enc.embed(x, pos), enc.embed(x, pos))
    assert torch.equal(posenc.build("sinusoidal", dim=D).train().embed(x, pos), clean)
    with pytest.raises(ValueError, match="noise"):
        posenc.build("sinusoidal", noise=-1.0)


def test_scaled_sinusoidal_matches_x_transformers():
    xt = pytest.importorskip("x_transformers.x_transformers")
    for dim in (8, 32):
        ref = xt.ScaledSinusoidalEmbedding(dim)
        x, pos = _x(dim=dim), torch.randint(0, 200, (T,))
        for enc in (posenc.build("scaled_sinusoidal", dim=dim), posenc.build("scaled_sinusoidal")):
            assert (enc.embed(x, pos) - (x + ref(x, pos=pos))).abs().max().item() <= 1e-5
        enc = posenc.build("scaled_sinusoidal", dim=dim)
        with torch.no_grad():  # same parameter: a trained value carries over
            ref.scale.fill_(0.37)
            enc.scale.fill_(0.37)
        assert (enc.embed(x, pos) - (x + ref(x, pos=pos))).abs().max().item() <= 1e-5
    with pytest.raises(ValueError, match="dim must be even"):
        posenc.build("scaled_sinusoidal", dim=7)


@pytest.mark.parametrize("name,P", [("sinusoidal_2d", 2), ("sinusoidal_3d", 3)])
@pytest.mark.parametrize("dim", [12, 14])
def test_sinusoidal_2d_3d_modules_match_positional_encodings(name, P, dim):
    pe = pytest.importorskip("positional_encodings.torch_encodings")
    sizes = (3, 4) if P == 2 else (2, 3, 2)
    grid = torch.stack(torch.meshgrid(*(torch.arange(s) for s in sizes), indexing="ij"), -1)
    pos = grid.reshape(-1, P)  # [T, P], a flattened image / video
    ref_cls = pe.PositionalEncoding2D if P == 2 else pe.PositionalEncoding3D
    ref = ref_cls(dim)(torch.zeros(1, *sizes, dim)).reshape(len(pos), dim)
    x = _x(dim=dim, t=len(pos))
    enc = posenc.build(name, dim=dim)
    assert (enc.embed(x, pos) - (x + ref)).abs().max().item() <= 1e-5
    batched = enc.embed(x, pos.expand(B, -1, -1))  # [B, T, P]
    assert torch.allclose(batched, enc.embed(x, pos))
    with pytest.raises(ValueError, match=f"trailing axis of size {P}"):
        enc.embed(x, torch.arange(len(pos)))


# ------------------------------------------------------------------------------ learned


def test_learned_table_and_limits():
    enc = posenc.build("learned", dim=D, max_len=12)
    assert enc.weight.shape == (12, D) and enc.max_len == 12
    assert 0.01 < enc.weight.std().item() < 0.03  # init normal, std 0.02
    x = _x()
    pos = torch.arange(2, 2 + T)
    assert torch.equal(enc.embed(x, pos), x + enc.weight[2 : 2 + T])
    assert torch.equal(enc.embed(x, pos.float()), enc.embed(x, pos))  # integral floats are fine
    with pytest.raises(ValueError, match="max_len=12"):
        enc.embed(x, torch.arange(5, 5 + T))
    with pytest.raises(ValueError, match="must be integers"):
        enc.embed(x, torch.arange(T) + 0.5)
    with pytest.raises(ValueError, match="max_len is required"):
        posenc.build("learned", dim=D)
    with pytest.raises(ValueError, match="dim is required"):
        posenc.build("learned", max_len=8)


@pytest.mark.parametrize("name", sorted(n for n, c in ENCODINGS.items() if c.family != "none"))
def test_negative_positions_raise(name):
    enc = posenc.build(name, dim=D, max_len=32)
    pos = torch.arange(T) - 1
    if enc.position_dims > 1:
        pos = torch.stack([pos] * enc.position_dims, dim=-1)
    with pytest.raises(ValueError, match="positions must be >= 0"):
        enc.embed(_x(), pos)


def test_positions_must_match_x():
    enc = posenc.build("sinusoidal", dim=D)
    with pytest.raises(ValueError, match="T=10"):
        enc.embed(_x(), torch.arange(T + 1))
    with pytest.raises(ValueError, match="B=2"):
        enc.embed(_x(), torch.arange(T).expand(3, T))
    with pytest.raises(ValueError, match=r"x must be \[B, T, D\]"):
        enc.embed(torch.zeros(T, D), torch.arange(T))


# ------------------------------------------------------------------------------ naive baselines


def test_onehot_concatenates_max_len_features():
    enc = posenc.build("onehot", dim=D, max_len=16)
    assert enc.embed_dim(D) == D + 16
    x, pos = _x(), torch.tensor([[0, 3, 3, 15, 1, 2, 4, 5, 6, 7]] * B)
    out = enc.embed(x, pos)
    assert out.shape == (B, T, D + 16)
    assert torch.equal(out[..., :D], x)
    assert torch.equal(out[..., D:].argmax(-1), pos)
    assert torch.equal(out[..., D:].sum(-1), torch.ones(B, T))
    with pytest.raises(ValueError, match="max_len=16"):
        enc.embed(x, torch.arange(10, 20))
    with pytest.raises(ValueError, match="max_len is required"):
        posenc.build("onehot", dim=D)


def test_index_concatenates_the_raw_position():
    enc = posenc.build("index")
    assert enc.embed_dim(D) == D + 1
    x, pos = _x(dtype=torch.bfloat16), torch.arange(100, 100 + T)
    out = enc.embed(x, pos)
    assert out.shape == (B, T, D + 1) and out.dtype == torch.bfloat16
    assert torch.equal(out[..., :D], x) and torch.equal(out[0, :, D], pos.to(torch.bfloat16))


def test_phase_is_position_over_last_position_per_row():
    enc = posenc.build("phase", dim=D)
    assert enc.embed_dim(D) == D + 1 and not enc.cache_exact
    x = _x()
    out = enc.embed(x, torch.arange(T))
    assert torch.allclose(out[0, :, D], torch.linspace(0, 1, T))
    # per row: T = max position + 1 of that row; the same token gets another phase in a
    # longer sequence (seed 000's flaw), so cached decoding is not exact
    pos = torch.stack([torch.arange(T), torch.arange(T) * 2])
    out = enc.embed(x, pos)
    assert torch.allclose(out[1, :, D], torch.arange(T) * 2 / (2 * (T - 1)))
    assert out[0, 4, D] != enc.embed(x[:, :5], torch.arange(5))[0, 4, D]
    assert enc.embed(x[:, :1], torch.zeros(1, dtype=torch.long))[0, 0, D] == 0  # T = 1


def test_nope_is_identity():
    enc = posenc.build("nope", dim=D, heads=4, head_dim=4, max_len=8)
    x = _x()
    assert enc.family == "none" and enc.embed(x, torch.arange(T)) is x
    assert enc.embed_dim(D) == D and not enc.has_bias
    q = torch.randn(1, 2, 3, 4)
    assert enc.rotate(q, q, torch.arange(3), torch.arange(3)) == (q, q)
    assert enc.bias(q, q, torch.arange(3), torch.arange(3)) is None


# ------------------------------------------------------------------- nope_temperature


@pytest.mark.parametrize(("floor_scale", "attn_scale"), [(4, 0.5), (7, 0.1), (8192, 0.1)])
def test_nope_temperature_matches_llama4_attention(floor_scale, attn_scale):
    """A NoPE layer of transformers' Llama 4 (attn_temperature_tuning) against posenc.attention
    with the same projections: the same outputs at every position (the factor grows with
    floor((p + 1) / floor_scale), so small floor_scales reach several steps in 40 tokens)."""
    pytest.importorskip("transformers")
    from transformers import Llama4TextConfig
    from transformers.models.llama4 import modeling_llama4

    torch.manual_seed(0)
    H, Hkv, Dh, T = 4, 2, 8, 40
    cfg = Llama4TextConfig(
        hidden_size=H * Dh, num_attention_heads=H, num_key_value_heads=Hkv, head_dim=Dh,
        num_hidden_layers=4, no_rope_layers=[1, 1, 1, 0], attn_temperature_tuning=True,
        floor_scale=floor_scale, attn_scale=attn_scale, intermediate_size=64,
        intermediate_size_mlp=64, vocab_size=50,
    )  # fmt: skip
    cfg._attn_implementation = "eager"
    hf = modeling_llama4.Llama4TextAttention(cfg, layer_idx=3)  # a NoPE layer
    assert not hf.use_rope
    x = torch.randn(2, T, H * Dh)
    causal = torch.full((T, T), float("-inf")).triu(1)[None, None]
    ref, _ = hf(x, None, causal)

    def heads(proj, n):  # [B, T, n * Dh] -> [B, n, T, Dh]
        return proj(x).view(2, T, n, Dh).transpose(1, 2)

    enc = posenc.build("nope_temperature", floor_scale=floor_scale, attn_scale=attn_scale)
    y = posenc.attention(heads(hf.q_proj, H), heads(hf.k_proj, Hkv), heads(hf.v_proj, Hkv), enc)
    out = hf.o_proj(y.transpose(1, 2).reshape(2, T, H * Dh))
    torch.testing.assert_close(out, ref, atol=1e-5, rtol=1e-5)


def test_nope_temperature_factor_and_bad_input():
    enc = posenc.build("nope_temperature", floor_scale=8, attn_scale=0.5)
    t = enc.temperature(torch.tensor([0, 6, 7, 15, 23]))
    expected = [1.0, 1.0, 1 + 0.5 * math.log(2), 1 + 0.5 * math.log(3), 1 + 0.5 * math.log(4)]
    torch.testing.assert_close(t, torch.tensor(expected, dtype=torch.float64))
    q, k = torch.randn(2, 3, 24, 4), torch.randn(2, 3, 24, 4)
    q2, k2 = enc.rotate(q, k, torch.arange(24), torch.arange(24))
    assert torch.equal(k2, k) and torch.equal(q2[..., :7, :], q[..., :7, :])
    batched, _ = enc.rotate(q, k, torch.arange(24).expand(2, 24), None)
    torch.testing.assert_close(batched, q2)
    with pytest.raises(ValueError, match="q_pos must be >= 0"):
        enc.rotate(q, k, torch.arange(24) - 10, torch.arange(24))
    with pytest.raises(ValueError, match="floor_scale"):
        posenc.build("nope_temperature", floor_scale=0)
    with pytest.raises(TypeError, match="attn_scale"):
        posenc.build("nope_temperature", attn_scale="0.1")


def test_sinusoidal_concat_fusion():
    """fusion="concat": [x, PE] of width 2D at unit token scale; "add": x + PE at sqrt(D)."""
    x, pos = torch.randn(2, 5, 8), torch.arange(3, 8)
    cat = posenc.build("sinusoidal", fusion="concat")
    out = cat.embed(x, pos)
    assert out.shape == (2, 5, 16) and cat.embed_dim(8) == 16 and cat.token_scale(8) == 1.0
    torch.testing.assert_close(out[..., :8], x)
    torch.testing.assert_close(out[..., 8:], posenc.build("sinusoidal").embed(x, pos) - x)
    assert posenc.build("sinusoidal").token_scale(16) == 4.0
    with pytest.raises(ValueError, match="fusion must be one of add, concat"):
        posenc.build("sinusoidal", fusion="sum")


def test_golden_values_from_the_formula():
    enc = build("learned_window", dim=2, max_len=4, window=3)
    with torch.no_grad():
        enc.weight.copy_(torch.tensor([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0], [7.0, 8.0]]))
        enc.beta.copy_(torch.tensor([0.5, -1.0]))  # beta_1, beta_2
        enc.w.copy_(torch.tensor([[1.0, 10.0], [2.0, 0.0]]))  # w_1, w_2
    # t = 1: W1 + 0.5 W0*w1; t = 2: W2 + 0.5 W1*w1 - W0*w2; t = 3: W3 + 0.5 W2*w1 - W1*w2
    want = torch.tensor([[1.0, 2.0], [3.5, 14.0], [4.5, 26.0], [3.5, 38.0]])
    torch.testing.assert_close(enc.table(torch.arange(4)), want)
    # [B, T] positions (packed: restarting at 0) read the same rows
    pos = torch.tensor([[0, 1, 0, 3]])
    torch.testing.assert_close(enc.table(pos)[0], want[[0, 1, 0, 3]])


@pytest.mark.parametrize("window", [1, 5])
def test_starts_as_the_plain_learned_table(window):
    torch.manual_seed(0)
    enc = build("learned_window", dim=8, max_len=16, window=window)
    x, pos = torch.randn(2, 10, 8), torch.arange(10)
    want = x + enc.weight[:10]
    torch.testing.assert_close(enc.embed(x, pos), want)  # beta = 0 (and w = 1) at init


def test_the_window_trains_and_limits_hold():
    torch.manual_seed(0)
    enc = build("learned_window", dim=4, max_len=8, window=5)
    enc.embed(torch.randn(1, 8, 4), torch.arange(8)).square().sum().backward()
    assert enc.beta.grad.abs().min() > 0 and enc.weight.grad.abs().sum() > 0
    with pytest.raises(ValueError, match="max_len"):
        enc.embed(torch.randn(1, 9, 4), torch.arange(9))
    with pytest.raises(ValueError, match="window"):
        build("learned_window", dim=4, max_len=8, window=0)
