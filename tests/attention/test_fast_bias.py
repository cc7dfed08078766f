"""posenc.attention's `distance` backend (posenc.attention.fast_bias) equals the eager reference,
values and gradients, for every score encoding; the fallback is taken, and right, where it
cannot run."""

from __future__ import annotations

from unittest import mock

import pytest
import torch
from hypothesis import example, given, settings
from hypothesis import strategies as st
from torch.utils._python_dispatch import TorchDispatchMode

import posenc
from posenc.attention import fast_bias
from posenc.kernels import cpu_bias

B, H, HKV, DH = 2, 4, 2, 16
SCORE = [  # every score encoding, and the options that change its bias
    ("alibi", {}),
    ("alibi", dict(bidirectional=True)),
    ("t5", {}),
    ("t5", dict(bidirectional=True)),
    ("kerple", {}),
    ("kerple", dict(variant="power")),
    ("sandwich", {}),
    ("fire", {}),
]
TOL = {torch.float32: dict(atol=2e-5, rtol=1e-4), torch.bfloat16: dict(atol=3e-2, rtol=3e-2)}


def make(name: str, **kwargs):
    """The encoding, its parameters nudged off their init (t5 starts near 0)."""
    torch.manual_seed(0)
    enc = posenc.build(name, dim=H * DH, heads=H, head_dim=DH, train_len=64, **kwargs)
    with torch.no_grad():
        for p in enc.parameters():
            p.add_(0.3 * torch.randn_like(p))
    return enc


def positions(kind: str, Tq: int, Tk: int) -> dict:
    """Consecutive integer positions of several shapes; {} for attention's defaults."""
    if kind == "default":
        return {}
    if kind == "offset":  # [T], keys from 5, queries the last Tq of them
        return dict(q_pos=torch.arange(5 + Tk - Tq, 5 + Tk), k_pos=torch.arange(5, 5 + Tk))
    if kind == "early":  # queries start before the first key: their first rows see no key
        return dict(q_pos=torch.arange(Tq), k_pos=torch.arange(3, 3 + Tk))
    start = torch.tensor([[2], [9]])  # [B, T], each row its own offset
    return dict(q_pos=start + torch.arange(Tk - Tq, Tk), k_pos=start - 1 + torch.arange(Tk))


CASES = [  # (causal, Tq, Tk, positions)
    (True, 9, 9, "default"),
    (False, 9, 9, "default"),
    (True, 4, 11, "default"),
    (False, 7, 5, "offset"),
    (True, 6, 10, "offset"),
    (True, 8, 8, "early"),
    (True, 7, 9, "batched"),
    (False, 5, 8, "batched"),
]


def outputs_and_grads(enc, q, k, v, backend, **kwargs):
    leaves = [t.detach().requires_grad_() for t in (q, k, v)]
    params = [p for p in enc.parameters() if p.requires_grad]
    out = posenc.attention(*leaves, enc, backend=backend, **kwargs)
    dout = torch.randn(out.shape, generator=SEED()).to(out.dtype)
    grads = torch.autograd.grad(out, leaves + params, dout)
    return [out, *grads]


def SEED():
    return torch.Generator().manual_seed(1)


def assert_same(got, want, dtype, what="", **tol):
    tol = tol or TOL[dtype]
    for i, (a, b) in enumerate(zip(got, want, strict=True)):
        torch.testing.assert_close(a.float(), b.float(), **tol, msg=f"{what} tensor {i}")


@pytest.fixture
def small_blocks(monkeypatch):
    """Blocks and gradient tiles of a few rows, so small inputs cross many of them."""
    monkeypatch.setattr(fast_bias, "QUERY_BLOCK", 3)
    monkeypatch.setattr(fast_bias, "GRAD_TILE", (2, 3))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
@pytest.mark.parametrize("name, kwargs", SCORE, ids=str)
def test_distance_backend_equals_eager(name, kwargs, dtype, small_blocks):
    enc = make(name, **kwargs)
    for causal, Tq, Tk, kind in CASES:
        if not causal and not enc.bidirectional:
            continue
        torch.manual_seed(Tq * Tk)
        q = torch.randn(B, Tq, H, DH, dtype=dtype).transpose(1, 2)  # strided, as in a model
        k, v = (torch.randn(B, Tk, HKV, DH, dtype=dtype).transpose(1, 2) for _ in range(2))
        kw = dict(causal=causal, **positions(kind, Tq, Tk))
        want = outputs_and_grads(enc, q, k, v, "eager", **kw)
        for backend in ("distance", "auto"):
            got = outputs_and_grads(enc, q, k, v, backend, **kw)
            assert got[0].dtype == dtype
            assert_same(got, want, dtype, f"{name} {backend} {causal} {Tq} {Tk} {kind}")


def in_blocks(enc, q, k, v, block, **kw):
    """The distance backend's outputs and grads with query blocks of `block` rows and backward
    tiles of (block, block + 1), the distance path's and FIRE's."""
    tile = (block, block + 1)
    with mock.patch.multiple(fast_bias, QUERY_BLOCK=block, GRAD_TILE=tile):
        return outputs_and_grads(enc, q, k, v, "distance", **kw)


@settings(max_examples=25, deadline=None)
@given(
    Tq=st.integers(1, 12), Tk=st.integers(1, 12), q0=st.integers(0, 20), k0=st.integers(0, 20),
    causal=st.booleans(), block=st.integers(1, 13), name=st.sampled_from(["alibi", "kerple"]),
)  # fmt: skip
def test_any_offsets_and_blocks(Tq, Tk, q0, k0, causal, block, name):
    """Any consecutive positions (queries before, among or after the keys) and block size."""
    enc = make(name, **({} if causal or name != "alibi" else dict(bidirectional=True)))
    torch.manual_seed(Tq + 13 * Tk)
    q, k, v = torch.randn(1, H, Tq, DH), torch.randn(1, H, Tk, DH), torch.randn(1, H, Tk, DH)
    kw = dict(causal=causal, q_pos=torch.arange(q0, q0 + Tq), k_pos=torch.arange(k0, k0 + Tk))
    want = outputs_and_grads(enc, q, k, v, "eager", **kw)
    assert_same(in_blocks(enc, q, k, v, block, **kw), want, torch.float32)


# ---------------------------------------------------------------------------- fallback


@pytest.fixture
def calls(monkeypatch):
    """How many times the distance path ran."""
    count = []
    apply = fast_bias._DistanceBias.apply
    monkeypatch.setattr(fast_bias._DistanceBias, "apply", lambda *a: count.append(1) or apply(*a))
    return count


def fallback_case(why: str):
    """(encoding, attention kwargs) that the distance path must refuse, and why."""
    enc = make("t5")
    if why == "positions with gaps":
        pos = torch.tensor([0, 1, 3, 4, 5, 7, 8, 9])
        return enc, dict(q_pos=pos, k_pos=pos)
    if why == "a mask":
        return enc, dict(mask=torch.rand(B, 1, 8, 8) > 0.3)
    return enc, {}


@pytest.mark.parametrize("why", ["disabled", "positions with gaps", "a mask", "no compiler"])
def test_fallback_taken_and_right(why, calls, monkeypatch):
    enc, kw = fallback_case(why)
    if why == "disabled":
        monkeypatch.setenv(fast_bias.ENV_VAR, "0")
    if why == "no compiler":
        monkeypatch.setattr(cpu_bias, "kernel", lambda: None)
    torch.manual_seed(0)
    q, k, v = torch.randn(B, H, 8, DH), torch.randn(B, HKV, 8, DH), torch.randn(B, HKV, 8, DH)
    kw["mask"] = kw.get("mask", None)
    want = outputs_and_grads(enc, q, k, v, "eager", **kw)
    got = outputs_and_grads(enc, q, k, v, "auto", **kw)
    assert not calls, why
    assert_same(got, want, torch.float32, why)
    with pytest.raises(ValueError, match="backend='distance' cannot run"):
        posenc.attention(q, k, v, enc, backend="distance", **kw)
    if why == "no compiler":  # without gradients it still runs; a fixed bias falls back too
        with torch.no_grad():
            torch.testing.assert_close(posenc.attention(q, k, v, enc), want[0], **TOL[q.dtype])
        alibi = make("alibi")
        got = outputs_and_grads(alibi, q, k, v, "auto")
        assert_same(got, outputs_and_grads(alibi, q, k, v, "eager"), torch.float32)
        assert len(calls) == 1


def test_auto_takes_it_for_every_distance_bias(calls):
    q, k, v = torch.randn(1, H, 6, DH), torch.randn(1, H, 6, DH), torch.randn(1, H, 6, DH)
    for name, kwargs in SCORE:
        posenc.attention(q, k, v, make(name, **kwargs))
    assert len(calls) == len(SCORE)
    for name in ("rope", "shaw", "nope"):  # no bias, or a values hook: never
        posenc.attention(q, k, v, posenc.build(name, dim=H * DH, heads=H, max_len=64))
    assert len(calls) == len(SCORE)


def test_the_bias_is_a_view_of_the_distance_vector():
    """O(Tq + Tk) memory: each block's [1, H, rows, keys] bias shares the vector's storage."""
    enc = make("kerple")
    q, k = torch.randn(1, H, 40, DH), torch.randn(1, H, 50, DH)
    kp = torch.arange(50)
    (groups, why) = fast_bias.plan(enc, q, k, kp[10:], kp, True, None, False)
    ((_, delta, vec),) = groups
    assert why == "" and delta == 10 and vec.shape == (H, 40 + 50 - 1)
    bias = enc.bias(q, k, kp[10:], kp)  # [1, H, 40, 50], keys in order
    for i0, i1, s in fast_bias._blocks(40, 50, delta, True):
        view = fast_bias._view(vec, i0, i1, s, 50)
        assert view.untyped_storage().data_ptr() == vec.untyped_storage().data_ptr()
        want = bias[:, :, i0:i1].flip(-1)[..., s:]  # reversed keys s:
        allowed = (kp.flip(0)[s:] <= kp[10 + i0 : 10 + i1, None]).expand_as(want)
        torch.testing.assert_close(view[allowed], want[allowed], atol=0, rtol=0)
        assert (view[~allowed] == fast_bias.MASKED).all()


class LargestAllocation(TorchDispatchMode):
    """Records the most elements any op returns in one tensor's storage (a view of a small
    vector counts as that vector)."""

    largest = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        for t in out if isinstance(out, (tuple, list)) else (out,):
            if isinstance(t, torch.Tensor):
                size = t.untyped_storage().nbytes() // t.element_size()
                self.largest = max(self.largest, size)
        return out


@pytest.mark.parametrize("name", ["alibi", "t5"])  # a fixed bias, a learned one
def test_no_tensor_of_a_full_score_matrix(name, calls):
    """Forward and backward hold O(T) and tile-sized tensors, never [H, Tq, Tk]."""
    T = 2048
    enc = make(name)
    q, k, v = (torch.randn(1, H, T, DH, requires_grad=True) for _ in range(3))
    with LargestAllocation() as mode:
        posenc.attention(q, k, v, enc).sum().backward()
    assert calls and mode.largest < H * T * T // 8
    assert torch.isfinite(q.grad).all() and all(p.grad is not None for p in enc.parameters())


def test_a_wide_bias_has_no_subnormal_probability_and_equals_eager(monkeypatch):
    """ALiBi at T = 512 spans 255 nats on its steepest head, so some probabilities are below
    float32's smallest normal: the backward equals eager, and no P or dS it hands the matmuls
    is subnormal (torch's CPU flash backward computes with them, 4x slower)."""
    enc, T = make("alibi"), 512
    q, k, v = (torch.randn(1, H, T, DH) for _ in range(3))
    seen, grad = [], cpu_bias.bias_grad

    def spy(S, dP, *args, **kw):
        grad(S, dP, *args, **kw)
        seen.extend(((t != 0) & (t.abs() < torch.finfo(t.dtype).tiny)).sum() for t in (S, dP))

    monkeypatch.setattr(cpu_bias, "bias_grad", spy)
    got = outputs_and_grads(enc, q, k, v, "distance")
    assert seen and sum(seen) == 0
    assert_same(got, outputs_and_grads(enc, q, k, v, "eager"), torch.float32)


@pytest.mark.parametrize("name", sorted(posenc.ENCODINGS))
def test_an_explicit_backend_that_cannot_run_refuses_with_its_reason(name):
    """backend="distance" for an encoding without a distance-only bias (rope, nope, dape,
    stickbreaking, ...) raises a ValueError naming why, instead of running another path; the
    same holds for every backend of the registry (can_run's reason is the error)."""
    from posenc.attention import REGISTRY, prepare

    enc = posenc.build(name, dim=H * DH, heads=H, head_dim=DH, max_len=64)
    q, k, v = torch.randn(1, H, 6, DH), torch.randn(1, H, 6, DH), torch.randn(1, H, 6, DH)
    if name in ("rope", "nope", "dape", "stickbreaking"):  # the examples: none has one
        assert "distance" not in enc.provides
    if "distance" not in enc.provides:  # no distance-only form at all: refused, by what it is
        with pytest.raises(ValueError, match="backend='distance' cannot run") as err:
            posenc.attention(q, k, v, enc, backend="distance")
        assert f"{type(enc).__name__} has no bias of the distance alone" in str(err.value)
    for backend, runner in REGISTRY.items():
        why = runner.can_run(prepare(q, k, v, enc, None, None, True, None, None))
        if why is not None:
            with pytest.raises(ValueError) as err:
                posenc.attention(q, k, v, enc, backend=backend)
            assert str(err.value) == why


# ---------------------------------------------------------------------------- FIRE


def fire_cases(Tq: int = 8):
    """(causal, Tq, Tk, attention kwargs): FIRE's regimes and position layouts."""
    docs = torch.tensor([0, 1, 2, 0, 1, 2, 3, 0, 1, 2, 3, 4])[:Tq]  # packed: restarts
    doc_id = torch.tensor([0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 2])[:Tq]
    same_doc = (doc_id[:, None] == doc_id[None, :])[None, None]  # [1, 1, T, T]
    start = torch.tensor([[2], [9]])
    return [
        (True, Tq, Tq, {}),
        (False, Tq, Tq, {}),
        (True, 1, 20, {}),  # decoding with a KV cache: one query, the last position
        (True, 3, 20, dict(q_pos=torch.arange(40, 43), k_pos=torch.arange(23, 43))),
        (True, Tq, Tq, dict(q_pos=docs, k_pos=docs)),  # packed, causal by position values
        (True, Tq, Tq, dict(q_pos=docs, k_pos=docs, mask=same_doc)),  # packed documents
        (False, Tq, Tq, dict(q_pos=docs, k_pos=docs, mask=same_doc)),
        (True, 7, 9, dict(q_pos=start + torch.arange(2, 9), k_pos=start - 1 + torch.arange(9))),
        (True, Tq, Tq, dict(q_pos=torch.arange(Tq), k_pos=torch.arange(3, 3 + Tq))),  # early
        (True, Tq, Tq, dict(mask=torch.rand(B, H, Tq, Tq, generator=SEED()) > 0.4)),
    ]


@pytest.fixture
def fire_calls(monkeypatch):
    """How many times FIRE's fast path ran."""
    count = []
    apply = fast_bias._FireBias.apply
    monkeypatch.setattr(fast_bias._FireBias, "apply", lambda *a: count.append(1) or apply(*a))
    return count


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
@pytest.mark.parametrize("regime", ["below", "past"])  # FIRE's threshold L = 64 or 4
def test_fire_fast_path_equals_eager(regime, dtype, small_blocks, fire_calls):
    """Values and gradients (q, k, v, c, L, the MLP) in both regimes, causal or not, packed
    documents, KV-cache decoding, per-row offsets, masks: the eager reference's."""
    if cpu_bias.kernel() is None:
        pytest.skip(f"no C compiler: {cpu_bias.BROKEN}")
    enc = make("fire")
    if regime == "past":
        enc.init_L = 4.0  # every query past 4 normalizes by its own position
    for causal, Tq, Tk, kw in fire_cases():
        torch.manual_seed(Tq * Tk)
        q = torch.randn(B, Tq, H, DH, dtype=dtype).transpose(1, 2)  # strided, as in a model
        k, v = (torch.randn(B, Tk, HKV, DH, dtype=dtype).transpose(1, 2) for _ in range(2))
        kw = dict(causal=causal, **kw)
        want = outputs_and_grads(enc, q, k, v, "eager", **kw)
        before = len(fire_calls)
        got = outputs_and_grads(enc, q, k, v, "auto", **kw)
        gaps = "q_pos" in kw and fast_bias._arange_start(kw["q_pos"]) is None
        if regime == "past" or gaps or "mask" in kw:  # below it, the rest is the distance path's
            assert len(fire_calls) > before, (causal, Tq, Tk, list(kw))
        assert got[0].dtype == dtype
        assert_same(got, want, dtype, f"fire {regime} {causal} {Tq} {Tk} {list(kw)}")


@settings(max_examples=20, deadline=None)
@given(
    Tq=st.integers(1, 12), Tk=st.integers(1, 12), q0=st.integers(0, 30), k0=st.integers(0, 30),
    causal=st.booleans(), block=st.integers(1, 13), L=st.sampled_from([2.0, 10.0, 64.0]),
)  # fmt: skip
@example(Tq=1, Tk=1, q0=0, k0=15, causal=False, block=1, L=2.0)  # one key: exact gradients 0
@example(Tq=12, Tk=12, q0=0, k0=30, causal=False, block=3, L=2.0)  # the steepest slope
def test_fire_any_positions_and_blocks(Tq, Tk, q0, k0, causal, block, L):
    """Queries before, among or after the keys, any threshold, any block: eager's numbers."""
    enc = make("fire")
    enc.init_L = L
    torch.manual_seed(Tq + 13 * Tk)
    q, k, v = torch.randn(1, H, Tq, DH), torch.randn(1, H, Tk, DH), torch.randn(1, H, Tk, DH)
    kw = dict(causal=causal, q_pos=torch.arange(q0, q0 + Tq), k_pos=torch.arange(k0, k0 + Tk))
    want = outputs_and_grads(enc, q, k, v, "eager", **kw)
    got = in_blocks(enc, q, k, v, block, **kw)
    assert_same(got[:4], want[:4], torch.float32)
    # FIRE's MLP weights: each gradient sums dS * d(bias)/d(weight) over every (i, j) pair, and
    # at L = 2, 30 positions apart the slope is steep, so float32 rounding reaches ~1e-4 in it
    # (a measured 9.7e-5 at Tq = Tk = 12, 2.1e-5 where one key makes the exact value 0); a
    # wrong tile or term is off by the gradient's own size (0.1 - 10)
    assert_same(got[4:], want[4:], None, "FIRE's MLP", atol=1e-4, rtol=1e-4)


def test_fire_past_its_threshold_holds_no_full_score_matrix(fire_calls, monkeypatch):
    """Forward and backward past the threshold hold block- and tile-sized tensors only."""
    monkeypatch.setattr(fast_bias, "FIRE_BLOCK_ELEMENTS", 2**20)  # the sizes are knobs
    monkeypatch.setattr(fast_bias, "GRAD_TILE", (128, 1024))
    T = 2048
    enc = make("fire")
    enc.init_L = 16.0
    q, k, v = (torch.randn(1, H, T, DH, requires_grad=True) for _ in range(3))
    with LargestAllocation() as mode:
        posenc.attention(q, k, v, enc).sum().backward()
    assert fire_calls and mode.largest < H * T * T // 8
    assert torch.isfinite(q.grad).all() and all(p.grad is not None for p in enc.parameters())


def test_fire_falls_back_where_the_fast_path_cannot_run(fire_calls, monkeypatch):
    """Float positions, or no C compiler: the chunked path, with the same numbers."""
    enc = make("fire")
    enc.init_L = 4.0
    q, k, v = torch.randn(B, H, 8, DH), torch.randn(B, HKV, 8, DH), torch.randn(B, HKV, 8, DH)
    pos = torch.arange(8.0) + 0.5
    want = outputs_and_grads(enc, q, k, v, "eager", q_pos=pos, k_pos=pos)
    assert_same(outputs_and_grads(enc, q, k, v, "auto", q_pos=pos, k_pos=pos), want, q.dtype)
    monkeypatch.setattr(cpu_bias, "kernel", lambda: None)
    want = outputs_and_grads(enc, q, k, v, "eager")
    assert_same(outputs_and_grads(enc, q, k, v, "auto"), want, q.dtype)
    assert not fire_calls
    with pytest.raises(ValueError, match="no C kernel for FIRE's bias"):
        posenc.attention(q, k, v, enc, backend="distance")
