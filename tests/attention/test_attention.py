"""posenc.attention: every backend equals `eager` for every encoding; memory; bad input."""

from __future__ import annotations

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode

import posenc
from posenc.attention import AUTO_MATERIALIZE, choose_backend

NAMES = sorted(posenc.ENCODINGS)
B, H, HKV, DH = 2, 4, 2, 16


def make(name: str, heads: int = H, head_dim: int = DH, seed: int = 0, **kwargs):
    """The encoding with standard keywords, parameters nudged off their init (t5 starts tiny)."""
    torch.manual_seed(seed)
    std = dict(dim=heads * head_dim, heads=heads, head_dim=head_dim, train_len=64)
    if name == "onehot":  # the one encoding that needs max_len (a hard limit) to be built
        std["max_len"] = 64
    enc = posenc.build(name, **std, **kwargs)
    with torch.no_grad():
        for p in enc.parameters():
            p.add_(0.1 * torch.randn_like(p))
    return enc


def positions(T: int, P: int, offset: int = 0, batch: int | None = None) -> torch.Tensor:
    """Sorted random integer positions (gaps, offset) [T] or [B, T] (+ [P])."""
    rows = [torch.randperm(48)[:T].sort().values + offset for _ in range(batch or 1)]
    pos = torch.stack(rows) if batch else rows[0]
    return pos[..., None].expand(*pos.shape, P) if P > 1 else pos


def qkv(Tq: int, Tk: int, dtype=torch.float32, heads: int = H, kv_heads: int = HKV):
    q = torch.randn(B, heads, Tq, DH, dtype=dtype)
    k = torch.randn(B, kv_heads, Tk, DH, dtype=dtype)
    v = torch.randn(B, kv_heads, Tk, DH, dtype=dtype)
    return q, k, v


CASES = [  # (causal, Tq, Tk, explicit positions)
    (True, 6, 6, False),
    (False, 6, 6, False),
    (True, 3, 9, False),  # decoding: queries are the last Tq keys
    (False, 4, 7, False),
    (True, 5, 5, True),  # [B, T] positions with gaps: causal by position value
    (False, 3, 8, True),
]


# encodings again with options that take other code paths
VARIANTS = [
    (name, kwargs)
    for name, kwargs in [
        ("shaw", dict(values=True)),  # the values() hook: sdpa refuses, chunked slices probs
        ("alibi", dict(bidirectional=True)),
        ("t5", dict(bidirectional=True)),
        ("kerple", dict(variant="power")),
        ("randomized", dict(encoding="t5")),
    ]
    if name in posenc.ENCODINGS
]


@pytest.mark.parametrize(
    "name, kwargs", [(n, {}) for n in NAMES] + VARIANTS, ids=lambda x: str(x) if x else ""
)
def test_backends_equal_eager(name, kwargs):
    enc = make(name, **kwargs)
    P = enc.position_dims
    for causal, Tq, Tk, explicit in CASES:
        torch.manual_seed(Tq * Tk)
        q, k, v = qkv(Tq, Tk)
        pos = {}
        if explicit:
            kp = positions(Tk, P, batch=B)
            pos = dict(q_pos=kp[:, Tk - Tq :], k_pos=kp)
        if not causal and not enc.bidirectional:  # a decoder form: refused, never silently used
            for backend in ("eager", "chunked", "auto", "sdpa", "flex"):
                with pytest.raises(ValueError, match="causal=False: .* one-directional"):
                    posenc.attention(q, k, v, enc, causal=causal, backend=backend, **pos)
            continue
        ref = posenc.attention(q, k, v, enc, causal=causal, backend="eager", **pos)
        assert ref.shape == (B, H, Tq, DH) and torch.isfinite(ref).all()
        for backend in ("chunked", "auto", "sdpa"):
            if backend == "sdpa" and enc.score_hooks:  # needs the logits / probabilities
                with pytest.raises(ValueError, match="sdpa.*'chunked'"):
                    posenc.attention(q, k, v, enc, causal=causal, backend=backend, **pos)
                continue
            out = posenc.attention(
                q, k, v, enc, causal=causal, backend=backend, block_size=2, **pos
            )
            torch.testing.assert_close(out, ref, atol=2e-5, rtol=1e-4, msg=f"{backend} {causal}")


@pytest.mark.parametrize("name", NAMES)
def test_mask_and_packed_documents(name):
    """A document mask with positions restarting per document = each document on its own."""
    enc = make(name)
    P = enc.position_dims
    lens = [3, 5, 2]
    T = sum(lens)
    doc = torch.cat([torch.full((n,), i) for i, n in enumerate(lens)])
    restart = torch.cat([torch.arange(n) for n in lens])
    pos = restart[:, None].expand(T, P) if P > 1 else restart
    mask = doc[:, None] == doc[None, :]  # [T, T]
    q, k, v = qkv(T, T)
    for backend in ("eager", "chunked", "auto"):
        out = posenc.attention(
            q, k, v, enc, q_pos=pos, k_pos=pos, mask=mask, backend=backend, block_size=3
        )
        start = 0
        for n in lens:
            s = slice(start, start + n)
            alone = posenc.attention(q[:, :, s], k[:, :, s], v[:, :, s], enc, backend="eager")
            torch.testing.assert_close(out[:, :, s], alone, atol=2e-5, rtol=1e-4)
            start += n


@pytest.mark.parametrize("name", NAMES)
def test_chunked_gradients_equal_eager(name):
    enc = make(name)
    q, k, v = qkv(5, 7)
    grads = {}
    for backend in ("eager", "chunked"):
        enc.zero_grad()
        leaves = [t.clone().requires_grad_() for t in (q, k, v)]
        out = posenc.attention(*leaves, enc, causal=True, backend=backend, block_size=2)
        (out * torch.linspace(-1, 1, out.numel()).view_as(out)).sum().backward()
        params = [p.grad.clone() for p in enc.parameters() if p.grad is not None]
        grads[backend] = [t.grad for t in leaves] + params
    assert len(grads["eager"]) == len(grads["chunked"])
    for a, b in zip(grads["eager"], grads["chunked"]):
        torch.testing.assert_close(b, a, atol=5e-5, rtol=1e-4)


def test_decode_row_equals_full_last_rows():
    """Default positions: Tq < Tk queries are the last Tq keys (a KV-cache decode step)."""
    for name in NAMES:
        enc = make(name)
        q, k, v = qkv(7, 7)
        full = posenc.attention(q, k, v, enc, backend="eager")
        last = posenc.attention(q[:, :, -2:], k, v, enc, backend="auto")
        torch.testing.assert_close(last, full[:, :, -2:], atol=2e-5, rtol=1e-4, msg=name)


def test_fully_masked_row_gives_zeros_and_finite_grads():
    enc = make("alibi", bidirectional=True)
    q, k, v = (t.requires_grad_() for t in qkv(4, 4))
    mask = torch.ones(4, 4, dtype=torch.bool)
    mask[1] = False
    for backend in ("eager", "chunked", "sdpa"):
        out = posenc.attention(q, k, v, enc, causal=False, mask=mask, backend=backend)
        assert torch.equal(out[:, :, 1], torch.zeros_like(out[:, :, 1])), backend
        if backend != "sdpa":
            (g,) = torch.autograd.grad(out.sum(), q)
            assert torch.isfinite(g).all()


# ---------------------------------------------------------------------------- flex

FLEX_NAMES = ["alibi"]  # ~15 s of compile each


@pytest.mark.slow
@pytest.mark.parametrize("name", FLEX_NAMES)
def test_flex_equals_eager(name):
    """Compiles FlexAttention (seconds per encoding): a few representative encodings."""
    pytest.importorskip("torch.nn.attention.flex_attention")
    enc = make(name)
    q, k, v = qkv(5, 9)
    mask = torch.rand(B, 1, 5, 9) > 0.3
    mask[..., -1] = True  # every query keeps its own key
    kp = positions(9, 1, batch=B)
    batched = dict(causal=True, q_pos=kp[:, 4:], k_pos=kp)
    with torch.no_grad():
        for kwargs in (dict(causal=True), dict(causal=False, mask=mask), batched):
            if not kwargs["causal"] and not enc.bidirectional:
                continue  # refused (test_backends_equal_eager)
            ref = posenc.attention(q, k, v, enc, backend="eager", **kwargs)
            out = posenc.attention(q, k, v, enc, backend="flex", **kwargs)
            torch.testing.assert_close(out, ref, atol=2e-5, rtol=1e-4, msg=str(kwargs.keys()))


def test_flex_refuses_what_it_cannot_run():
    q, k, v = qkv(4, 4)
    if "alibi" in posenc.ENCODINGS:
        with pytest.raises(NotImplementedError, match="chunked"):
            posenc.attention(q.requires_grad_(), k, v, make("alibi"), backend="flex")
    for name in NAMES:
        enc = make(name)
        if enc.content_dependent:
            with torch.no_grad(), pytest.raises(ValueError, match="flex"):
                posenc.attention(q, k, v, enc, backend="flex")
            break


# ---------------------------------------------------------------------------- auto rule


def meta_qk(T: int, heads: int = 8):
    return torch.empty(1, heads, T, 64, device="meta"), torch.empty(1, heads, T, 64, device="meta")


@pytest.mark.parametrize("name", NAMES)
def test_auto_rule(name):
    enc = make(name, heads=8, head_dim=64)
    small, big = meta_qk(64), meta_qk(4096)
    assert 8 * 4096 * 4096 > AUTO_MATERIALIZE >= 8 * 64 * 64
    if not (enc.has_bias or enc.score_hooks):
        assert choose_backend(enc, *small) == choose_backend(enc, *big) == "sdpa"
    elif enc.score_hooks:
        assert choose_backend(enc, *small) == choose_backend(enc, *big) == "chunked"
    else:
        assert choose_backend(enc, *small) == "sdpa"
        assert choose_backend(enc, *big) == "chunked"  # CPU: never flex (no backward)
    assert choose_backend(None, *big) == "sdpa"


# ---------------------------------------------------------------------------- memory


class LargestAllocation(TorchDispatchMode):
    """Records the largest number of elements of any tensor an op returns."""

    def __init__(self):
        super().__init__()
        self.largest, self.op = 0, None

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        for t in out if isinstance(out, (tuple, list)) else (out,):
            if isinstance(t, torch.Tensor) and t.numel() > self.largest:
                self.largest, self.op = t.numel(), func
        return out


SCORE_NAMES = [n for n in NAMES if posenc.ENCODINGS[n].family in ("bias", "relative", "content")]


@pytest.mark.parametrize("name", SCORE_NAMES)
def test_chunked_never_allocates_a_full_score_matrix(name):
    # T well above the encodings' own table sizes (DeBERTa's 2·256 buckets)
    heads, T, block = 4, 1024, 32
    enc = make(name, heads=heads)
    q = torch.randn(1, heads, T, DH)
    k, v = torch.randn(2, 1, 2, T, DH).unbind(0)
    full = heads * T * T
    with torch.no_grad():
        with LargestAllocation() as eager:
            posenc.attention(q, k, v, enc, backend="eager")
        assert eager.largest >= full  # the detector sees the eager score matrix
        with LargestAllocation() as chunked:
            posenc.attention(q, k, v, enc, backend="chunked", block_size=block)
    assert chunked.largest < full, f"{chunked.op} returned {chunked.largest} >= H·Tq·Tk elements"


def test_chunked_backward_is_memory_bounded():
    """Checkpointed blocks: the backward pass does not hold every block's probabilities."""
    name = "t5"
    heads, T, block = 4, 256, 32
    enc = make(name, heads=heads)
    q = torch.randn(1, heads, T, DH, requires_grad=True)
    k, v = torch.randn(2, 1, heads, T, DH).unbind(0)
    with LargestAllocation() as mode:
        out = posenc.attention(q, k, v, enc, backend="chunked", block_size=block)
        out.sum().backward()
    assert mode.largest < heads * T * T
    assert q.grad is not None and torch.isfinite(q.grad).all()


# ---------------------------------------------------------------------------- bad input


def test_bad_input():
    q, k, v = qkv(4, 6)
    with pytest.raises(ValueError, match="q must be 4-D"):
        posenc.attention(q[0], k, v)
    with pytest.raises(ValueError, match="k and v"):
        posenc.attention(q, k, v[:, :, :5])
    with pytest.raises(ValueError, match="k must be"):
        posenc.attention(q, k[..., :8], v[..., :8])
    with pytest.raises(ValueError, match="k must be"):
        posenc.attention(q, k[:1], v[:1])
    q3 = torch.randn(B, 3, 4, DH)
    with pytest.raises(ValueError, match="multiple of k/v heads"):
        posenc.attention(q3, k, v)
    with pytest.raises(ValueError, match="q_pos"):
        posenc.attention(q, k, v, q_pos=torch.arange(5))
    with pytest.raises(ValueError, match="k_pos"):
        posenc.attention(q, k, v, k_pos=torch.arange(4))
    with pytest.raises(ValueError, match="k_pos"):
        posenc.attention(q, k, v, k_pos=torch.zeros(3, 6, dtype=torch.long))
    with pytest.raises(ValueError, match="q_pos must be >= 0"):
        posenc.attention(q, k, v, q_pos=torch.arange(4) - 1)
    with pytest.raises(ValueError, match="q_pos must be given"):
        posenc.attention(q, k[:, :, :2], v[:, :, :2])  # Tq > Tk
    with pytest.raises(ValueError, match="mask must be broadcastable"):
        posenc.attention(q, k, v, mask=torch.ones(4, 5, dtype=torch.bool))
    with pytest.raises(TypeError, match="mask must be a bool"):
        posenc.attention(q, k, v, mask=torch.ones(4, 6))
    with pytest.raises(ValueError, match="backend must be one of"):
        posenc.attention(q, k, v, backend="fast")
    with pytest.raises(ValueError, match="block_size"):
        posenc.attention(q, k, v, backend="chunked", block_size=0)
    with pytest.raises(TypeError, match="encoding must be"):
        posenc.attention(q, k, v, "rope")


@pytest.mark.parametrize("name", [n for n in NAMES if n in ("alibi", "t5", "deberta", "shaw")])
def test_encoding_built_for_other_head_count(name):
    q, k, v = qkv(4, 4)
    enc = make(name, heads=8)
    with pytest.raises(ValueError, match="heads=8"):
        posenc.attention(q, k, v, enc)


# ---------------------------------------------------------------------------- encoders


def softmax_reference(q, k, v, bias):
    """softmax(q.k / sqrt(Dh) + bias) @ v, every key visible: [B, H, T, Dh]."""
    logits = q @ k.transpose(-1, -2) * q.shape[-1] ** -0.5 + bias
    return torch.softmax(logits, -1) @ v


def test_encoders_get_the_bidirectional_form():
    """causal=False with ALiBi / T5 built bidirectional equals the hand-built symmetric bias
    (ALiBi: -m_h |i - j|; T5: transformers' bidirectional buckets); decoder forms are refused."""
    t5_ref = pytest.importorskip("transformers.models.t5.modeling_t5").T5Attention
    T = 9
    q, k, v = qkv(T, T, kv_heads=H)
    i = torch.arange(T)
    rel = i[None, :] - i[:, None]  # [T, T] key - query
    alibi = make("alibi", bidirectional=True)
    t5 = make("t5", bidirectional=True, num_buckets=8, max_distance=6)
    buckets = t5_ref._relative_position_bucket(rel, True, 8, 6)  # [T, T]
    expected = {
        "alibi": softmax_reference(q, k, v, -alibi.slopes[:, None, None] * rel.abs()),
        "t5": softmax_reference(
            q, k, v, t5.relative_attention_bias.weight[buckets].permute(2, 0, 1)
        ),
    }
    for enc, name in ((alibi, "alibi"), (t5, "t5")):
        for backend in ("eager", "chunked", "sdpa", "auto"):
            out = posenc.attention(q, k, v, enc, causal=False, backend=backend, block_size=4)
            torch.testing.assert_close(out, expected[name], atol=2e-5, rtol=1e-4, msg=name)
        decoder = make(name)
        with pytest.raises(ValueError, match="bidirectional=True"):
            posenc.attention(q, k, v, decoder, causal=False)


@pytest.mark.parametrize("name", NAMES)
def test_an_encoder_model_builds_the_bidirectional_form_or_refuses(name):
    try:
        model = posenc.TransformerLM(17, 16, 1, 2, encoding=name, causal=False, max_len=32)
    except ValueError as err:
        assert "causal=False" in str(err) and not posenc.resolve(name).bidirectional
        return
    assert model.encoding.bidirectional
    if name in ("alibi", "t5"):
        assert model.encoding.bidirectional is True and "bidirectional=True" in repr(model.encoding)
    assert torch.isfinite(model(torch.randint(0, 17, (2, 6)))).all()


@pytest.mark.parametrize("where", ["q", "k", "v"])
@pytest.mark.parametrize("name", [None, "rope", "alibi"])
def test_backends_agree_on_non_finite_inputs(where, name):
    """NaN in q, k or v: every query that sees it gives NaN in every backend, as eager does
    (SDPA's fused kernels alone would return 0 for a NaN query row). Query 3 sees key 3."""
    enc = make(name) if name else None
    for bad in (float("nan"), float("inf")) if where == "q" else (float("nan"),):
        q, k, v = qkv(6, 6)
        {"q": q, "k": k, "v": v}[where][1, 0, 3, 2] = bad  # kv head 0 = query heads 0, 1
        sees = torch.zeros(6, dtype=torch.bool)
        sees[3:] = where != "q"
        sees[3] = True
        for backend in ("eager", "sdpa", "chunked", "auto"):
            out = posenc.attention(q, k, v, enc, backend=backend, block_size=2)
            heads = [0] if where == "q" else [0, 1]
            assert torch.isnan(out[1, heads][:, sees]).any(-1).all(), (backend, bad)
            assert torch.isfinite(out[0]).all(), backend  # the other batch row is untouched


@pytest.mark.parametrize("name", [None, *NAMES])
def test_empty_sequences_give_empty_results(name):
    """T = 0 queries or keys: an empty result (zeros where there are queries but no keys), as
    F.scaled_dot_product_attention gives, for every encoding and backend."""
    enc = make(name) if name else None
    P = enc.position_dims if enc is not None else 1
    for Tq, Tk in ((0, 0), (0, 3), (2, 0)):
        q, k, v = qkv(Tq, Tk)
        pos = {}
        if Tq > Tk:  # explicit positions: queries after the (no) keys
            pos = dict(q_pos=torch.arange(Tq)[:, None].expand(Tq, P) if P > 1 else torch.arange(Tq))
        for backend in ("eager", "sdpa", "chunked", "auto"):
            if backend == "sdpa" and enc is not None and enc.score_hooks:
                continue
            out = posenc.attention(q, k, v, enc, backend=backend, **pos)
            assert out.shape == (B, H, Tq, DH) and not out.any(), (backend, Tq, Tk)


@pytest.mark.parametrize("name", NAMES)
def test_any_finite_position_in_range_gives_finite_outputs(name):
    """Sorted positions anywhere in [0, 2^20) (gaps, offsets; floats where the encoding takes
    them) give finite attention outputs for every encoding (learned tables within max_len), or,
    for xPos past its reach, a ValueError that gives the reach — never NaN or inf."""
    from hypothesis import given, settings
    from hypothesis import strategies as st

    enc = make(name)
    P = enc.position_dims
    high = enc.max_len if enc.max_len is not None else 2**20
    ints = st.lists(st.integers(0, high - 1), min_size=1, max_size=6, unique=True)

    @settings(max_examples=25, deadline=None, derandomize=True)
    @given(ints, st.booleans())
    def check(values, as_float):
        pos = torch.tensor(sorted(values))
        if as_float and not enc.integer_positions:
            pos = pos.double() + 0.5
        T = len(values)
        q, k, v = qkv(T, T)
        p = pos[:, None].expand(T, P) if P > 1 else pos
        try:
            out = posenc.attention(q, k, v, enc, q_pos=p, k_pos=p)
        except ValueError as err:
            assert name == "xpos" and "reach" in str(err), err
            return
        assert torch.isfinite(out).all(), (name, values)

    check()


@pytest.mark.parametrize("name", ["rope", "alibi", "t5", "learned"])
def test_compiled_calls_keep_the_checks(name):
    """Under torch.compile the same bad positions give the same ValueError as in eager mode
    (the value checks run outside the graph), and good positions the same output."""
    torch._dynamo.reset()
    enc = make(name)  # max_len=64
    q, k, v = qkv(4, 4)
    x = torch.randn(1, 4, H * DH)

    def fn(q, k, v, pos):
        if enc.family == "absolute":
            return enc.embed(x, pos)
        return posenc.attention(q, k, v, enc, q_pos=pos, k_pos=pos)

    compiled = torch.compile(fn, backend="eager")
    good = torch.tensor([0, 2, 5, 7])
    torch.testing.assert_close(compiled(q, k, v, good), fn(q, k, v, good))
    for bad, match in ((torch.tensor([0, -1, 2, 3]), ">= 0"),
                       (torch.tensor([0.0, float("nan"), 2, 3]), "finite"),
                       (torch.tensor([0, 1, 2, 99]), "max_len")):  # fmt: skip
        if match == "max_len" and enc.max_len is None:
            continue
        for f in (fn, compiled):
            with pytest.raises(ValueError, match=match):
                f(q, k, v, bad)
