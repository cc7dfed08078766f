"""The contract every registered encoding keeps: shapes, dtypes, default positions, compile."""

from __future__ import annotations

import pytest
import torch

import posenc
from posenc import PositionalEncoding, TransformerLM
from posenc.base import CAPABILITIES, SCORE_HOOKS

NAMES = sorted(posenc.ENCODINGS)
B, H, HKV, DH, D, V = 2, 4, 2, 8, 32, 11
DTYPES = [torch.float32, torch.bfloat16, torch.float16]
TOL = {torch.float32: 2e-5, torch.bfloat16: 6e-2, torch.float16: 1e-2}


def make(name: str):
    torch.manual_seed(0)
    enc = posenc.build(name, dim=D, heads=H, head_dim=DH, max_len=64)
    with torch.no_grad():
        for p in enc.parameters():
            p.add_(0.1 * torch.randn_like(p))
    return enc


def arange_positions(T: int, P: int, offset: int = 0) -> torch.Tensor:
    pos = torch.arange(offset, offset + T)
    return pos[:, None].expand(T, P) if P > 1 else pos


def qkv(Tq: int, Tk: int, dtype=torch.float32):
    torch.manual_seed(1)
    shapes = [(B, H, Tq, DH), (B, HKV, Tk, DH), (B, HKV, Tk, DH)]
    return [torch.randn(s).to(dtype) for s in shapes]


@pytest.mark.parametrize("name", NAMES)
def test_class_attributes(name):
    cls = posenc.ENCODINGS[name]
    assert issubclass(cls, posenc.PositionalEncoding)
    assert cls.family in posenc.base.FAMILIES
    assert cls.position_dims in (1, 2, 3) and cls.paper and cls.summary
    with pytest.raises(TypeError):
        posenc.build(name, dim=D, heads=H, head_dim=DH, max_len=64, not_a_keyword=1)


@pytest.mark.parametrize("name", NAMES)
def test_the_declaration_is_the_hooks_it_implements(name):
    """`provides` (base.CAPABILITIES) names exactly the hooks the class overrides; an instance
    may declare less (Shaw without value tables), never more; a wrapper declares its inner's
    capabilities plus its own."""
    cls = posenc.ENCODINGS[name]
    enc = make(name)
    assert isinstance(cls.provides, frozenset) and cls.provides <= set(CAPABILITIES)
    inner = getattr(enc, "inner", None)
    if isinstance(inner, PositionalEncoding):  # the wrapper forwards every hook
        assert enc.provides == inner.provides | cls.provides
        return
    overridden = {
        cap for cap, hook in CAPABILITIES.items()
        if getattr(cls, hook) is not getattr(PositionalEncoding, hook)
    }  # fmt: skip
    assert cls.provides == overridden, (sorted(cls.provides), sorted(overridden))
    assert enc.provides <= cls.provides


@pytest.mark.parametrize("name", NAMES)
def test_what_is_not_declared_is_the_identity_and_what_is_acts(name):
    """A hook it does not declare gives the base's identity / None; one it declares gives a
    value, and the `distance` form equals bias() at every pair that far apart. The facts the
    backends read (has_bias, score_hooks, content_dependent) follow from the declaration."""
    enc = make(name).eval()
    caps, P, T = enc.provides, enc.position_dims, 5
    pos = arange_positions(T, P)
    x = torch.randn(B, T, D)
    q, k, _ = qkv(T, T)
    k = k.repeat_interleave(H // HKV, dim=1)
    logits = torch.randn(B, H, T, T)
    probs = logits.softmax(-1)
    d = torch.arange(-(T - 1), T)
    plain = {
        "embed": lambda: enc.embed(x, pos) is x,
        "embed_dim": lambda: enc.embed_dim(D) == D,
        "token_scale": lambda: enc.token_scale(D) == 1.0,
        "rotate": lambda: all(a is b for a, b in zip(enc.rotate(q, k, pos, pos), (q, k))),
        "bias": lambda: enc.bias(q, k, pos, pos) is None,
        "score_mod": lambda: enc.score_mod(pos, pos) is None,
        "distance": lambda: enc.distance_bias(d, pos) is None,
        "values": lambda: enc.values(probs, pos, pos) is None,
        "softmax_scale": lambda: enc.softmax_scale(DH) == DH**-0.5,
        "sample_positions": lambda: enc.train().sample_positions(pos) is pos,
        "angles": lambda: enc.angles(pos) is None,
        "transform_logits": lambda: enc.transform_logits(logits, q, k, pos, pos) is logits,
        "normalize": lambda: enc.normalize(logits, None, pos, pos) is None,
    }
    assert set(plain) == set(CAPABILITIES)
    for cap, is_plain in plain.items():
        if cap not in caps:
            assert is_plain(), f"{name} does not declare {cap!r} but its {cap} hook acts"
    enc.eval()
    acts = {  # the declared hooks that always give something on these inputs
        "embed": lambda: enc.embed(x, pos).shape[:2] == (B, T),
        "bias": lambda: enc.bias(q, k, pos, pos) is not None,
        "score_mod": lambda: callable(enc.score_mod(pos, pos)),
        "angles": lambda: enc.angles(pos).shape[-2] == T,
        "normalize": lambda: enc.normalize(logits, None, pos, pos).shape == logits.shape,
    }
    for cap in caps & set(acts):
        assert acts[cap](), f"{name} declares {cap!r} but its {cap} hook gives nothing"
    if "distance" in caps:  # bias[b, h, i, j] = vec[h, (i - j) + T - 1]
        vec = enc.distance_bias(d, pos)
        want = vec[:, (pos[:, None] - pos[None, :]) + T - 1]  # [H, T, T]
        bias = enc.bias(q, k, pos, pos)
        torch.testing.assert_close(bias.float(), want[None].expand_as(bias).float())
    assert enc.has_bias == ("bias" in caps) and enc.has_values == ("values" in caps)
    assert set(enc.score_hooks) == caps & set(SCORE_HOOKS)
    position_only = "bias" not in caps or "score_mod" in caps
    assert enc.content_dependent == (bool(enc.score_hooks) or not position_only)


def test_a_declaration_names_known_capabilities():
    """A typo in `provides` fails when the class is defined."""
    with pytest.raises(TypeError, match="provides must be a frozenset of embed"):
        type("Bad", (PositionalEncoding,), {"provides": frozenset({"rotary"})})
    with pytest.raises(TypeError, match="provides must be a frozenset"):
        type("Bad", (PositionalEncoding,), {"provides": {"rotate"}})


@pytest.mark.parametrize("name", NAMES)
def test_hook_shapes(name):
    enc = make(name)
    P = enc.position_dims
    Tq, Tk = 3, 7
    qp, kp = arange_positions(Tq, P, Tk - Tq), arange_positions(Tk, P)
    x = torch.randn(B, Tk, D)
    assert enc.embed(x, kp).shape == (B, Tk, enc.embed_dim(D))
    q, k, v = qkv(Tq, Tk)
    rq, rk = enc.rotate(q, k, qp, kp)
    # the last dim may change, for q and k alike (PoPE's polar form is 2 Dh wide)
    assert rq.shape[:-1] == q.shape[:-1] and rk.shape[:-1] == k.shape[:-1]
    assert rq.shape[-1] == rk.shape[-1] >= DH
    krep = rk.repeat_interleave(H // HKV, dim=1)
    bias = enc.bias(rq, krep, qp, kp)
    assert bias is None or tuple(bias.shape) in ((B, H, Tq, Tk), (1, H, Tq, Tk))
    assert enc.has_bias or bias is None
    probs = torch.softmax(torch.randn(B, H, Tq, Tk), dim=-1)
    extra = enc.values(probs, qp, kp)
    assert extra is None or extra.shape == (B, H, Tq, DH)
    assert posenc.attention(q, k, v, enc).shape == (B, H, Tq, DH)
    model = TransformerLM(V, D, 1, H, encoding=name, max_len=64, kv_heads=HKV)
    assert model(torch.randint(0, V, (B, Tk))).shape == (B, Tk, V)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("name", NAMES)
def test_dtype_in_equals_dtype_out(name, dtype):
    enc = make(name)
    P = enc.position_dims
    Tq, Tk = 4, 6
    qp, kp = arange_positions(Tq, P, Tk - Tq), arange_positions(Tk, P)
    x = torch.randn(B, Tk, D, dtype=dtype)
    assert enc.embed(x, kp).dtype == dtype
    q, k, v = qkv(Tq, Tk, dtype)
    rq, rk = enc.rotate(q, k, qp, kp)
    assert rq.dtype == rk.dtype == dtype
    bias = enc.bias(rq, rk.repeat_interleave(H // HKV, dim=1), qp, kp)
    assert bias is None or bias.dtype == dtype
    ref = posenc.attention(*qkv(Tq, Tk, dtype), enc, backend="eager").float()  # float32 math
    exact = posenc.attention(*(t.float() for t in qkv(Tq, Tk, dtype)), enc, backend="eager")
    torch.testing.assert_close(ref, exact, atol=TOL[dtype], rtol=TOL[dtype])
    for backend in ("eager", "chunked", "auto"):
        out = posenc.attention(q, k, v, enc, backend=backend)
        assert out.dtype == dtype, backend
        torch.testing.assert_close(out.float(), exact, atol=TOL[dtype], rtol=TOL[dtype])
    model = TransformerLM(V, D, 1, H, encoding=name, max_len=64).to(dtype).eval()
    with torch.no_grad():
        assert model(torch.randint(0, V, (B, 5))).dtype == dtype


@pytest.mark.parametrize("name", NAMES)
def test_explicit_arange_positions_equal_the_default(name):
    enc = make(name)
    P = enc.position_dims
    for Tq, Tk in ((6, 6), (2, 6)):
        q, k, v = qkv(Tq, Tk)
        default = posenc.attention(q, k, v, enc)
        explicit = posenc.attention(
            q, k, v, enc, arange_positions(Tq, P, Tk - Tq), arange_positions(Tk, P)
        )
        torch.testing.assert_close(explicit, default, atol=1e-6, rtol=1e-5)
    torch.manual_seed(0)
    model = TransformerLM(V, D, 2, H, encoding=name, max_len=64).eval()
    tokens = torch.randint(0, V, (B, 6))
    with torch.no_grad():
        torch.testing.assert_close(
            model(tokens, positions=arange_positions(6, P)), model(tokens), atol=1e-6, rtol=1e-5
        )
        batched = arange_positions(6, P).expand(B, *arange_positions(6, P).shape)
        torch.testing.assert_close(model(tokens, positions=batched), model(tokens))


@pytest.mark.parametrize("name", NAMES)
def test_torch_compile_runs(name):
    """Dynamo traces attention with each encoding (backend="eager": no inductor codegen)."""
    torch._dynamo.reset()
    enc = make(name)
    q, k, v = qkv(5, 5)

    def fn(q, k, v):
        return posenc.attention(q, k, v, enc)

    compiled = torch.compile(fn, backend="eager")
    torch.testing.assert_close(compiled(q, k, v), fn(q, k, v))


@pytest.mark.parametrize("name", ["alibi", "rope"])
def test_torch_compile_inductor(name):
    """The default inductor backend (alibi: a bias materialized for sdpa; rope: the rotation
    takes its plain out-of-place path under compile, no `out=`, C kernel or .item())."""
    torch._dynamo.reset()
    enc = make(name)
    q, k, v = qkv(8, 8)

    def fn(q, k, v):
        return posenc.attention(q, k, v, enc)

    torch.testing.assert_close(torch.compile(fn)(q, k, v), fn(q, k, v), atol=1e-5, rtol=1e-4)


@pytest.mark.parametrize("name", NAMES)
def test_max_len_is_a_hard_limit(name):
    """max_len means one thing for every encoding, none ignores it: positions < max_len run, a
    position >= max_len raises a ValueError naming max_len and the position, whether it comes
    through attention, TransformerLM (given or default positions) or the encoding's embed.
    max_len is given alone: no encoding reads it as a training-length hint (train_len is)."""
    L = 16
    enc = posenc.build(name, dim=D, heads=H, head_dim=DH, max_len=L).eval()
    assert enc.max_len == L
    P = enc.position_dims
    q, k, v = qkv(L, L)
    good, bad = arange_positions(L, P), arange_positions(L, P, offset=1)  # 0..L-1, 1..L
    past = rf"go up to {L}\b.*max_len={L}\b"
    model = TransformerLM(V, D, 1, H, encoding=name, max_len=L).eval()
    tokens = torch.randint(0, V, (B, L + 1))
    with torch.no_grad():
        posenc.attention(q, k, v, enc, good, good)
        model(tokens[:, :L])
        for q_pos, k_pos in ((good, bad), (bad, bad)):
            with pytest.raises(ValueError, match=past):
                posenc.attention(q, k, v, enc, q_pos, k_pos)
        with pytest.raises(ValueError, match=past):
            model(tokens[:, :L], positions=bad)
        with pytest.raises(ValueError, match=past):
            model(tokens)  # default positions 0..L
        if enc.family == "absolute":
            x = torch.randn(B, L, D)
            enc.embed(x, good)
            with pytest.raises(ValueError, match=past):
                enc.embed(x, bad)
