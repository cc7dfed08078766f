"""posenc.functional.apply_rope through posenc.kernels' engines equals its reference RoPE:
values, gradients, in-place rules, fallback. Tolerances: float32 <= 1e-5 absolute
(unit-variance inputs); bfloat16 <= 1 bf16 ulp of the output (both round the same float32
result once, so they differ only where the float32 results differ in the last bits: max abs
error <= 2^-7 * |x|max)."""

from __future__ import annotations

import warnings

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from posenc import functional, kernels
from posenc.functional import rope_align, rope_cos_sin, rope_inv_freq
from posenc.functional.rotary import _rope_qk_fast

FAST = ("cpp", "eager")  # "compiled" is tested once, on one small shape (compiling is slow)


def reference(x, pos, inv, layout="half", attention_factor=1.0):
    """posenc.functional's pure-PyTorch reference (apply_rope otherwise dispatches to the fast
    path, so the comparison asks for the reference)."""
    return functional.apply_rope(x, pos, inv, layout, attention_factor=attention_factor,
                                 engine="reference")  # fmt: skip


def tol(dtype):
    return 1e-5 if dtype == torch.float32 else 2**-7 * 8  # bf16: values up to ~8, 1 ulp


@st.composite
def cases(draw):
    B = draw(st.integers(1, 3))
    H = draw(st.integers(1, 4))
    T = draw(st.integers(1, 17))
    R = 2 * draw(st.integers(1, 8))
    Dh = R + 2 * draw(st.integers(0, 3))  # partial rotary when Dh > R
    layout = draw(st.sampled_from(["half", "interleaved"]))
    batch_pos = draw(st.booleans())  # [B, T] positions (left padding, packed) or [T]
    bthd = draw(st.booleans())  # [B, T, H, Dh] memory layout (a transposed view)
    dtype = draw(st.sampled_from([torch.float32, torch.bfloat16]))
    seed = draw(st.integers(0, 2**16))
    return B, H, T, R, Dh, layout, batch_pos, bthd, dtype, seed


def make(case):
    B, H, T, R, Dh, layout, batch_pos, bthd, dtype, seed = case
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(B, T, H, Dh, generator=g).to(dtype).transpose(1, 2)  # strided [B, H, T, Dh]
    if not bthd:
        x = x.contiguous()
    pos = torch.randint(0, 5000, (B, T) if batch_pos else (T,), generator=g)
    inv, _ = rope_inv_freq(R)
    return x, pos, inv, layout


@pytest.mark.parametrize("engine", FAST)
@settings(max_examples=25, deadline=None)
@given(case=cases())
def test_values_equal_reference(engine, case):
    x, pos, inv, layout = make(case)
    want = reference(x, pos, inv, layout)
    before = x.clone()
    got = functional.apply_rope(x, pos, inv, layout, engine=engine, check=False)
    assert got.dtype == x.dtype and got.shape == x.shape
    torch.testing.assert_close(got.float(), want.float(), atol=tol(x.dtype), rtol=0)
    assert torch.equal(x, before), "out-of-place call changed its input"

    out = torch.full_like(x, float("nan"))
    functional.apply_rope(x, pos, inv, layout, out=out, engine=engine, check=False)
    torch.testing.assert_close(out.float(), want.float(), atol=tol(x.dtype), rtol=0)
    assert torch.equal(x, before), "out= call changed its input"

    y = x.clone()
    ret = functional.apply_rope(y, pos, inv, layout, inplace=True, engine=engine, check=False)
    assert ret is y
    torch.testing.assert_close(y.float(), want.float(), atol=tol(x.dtype), rtol=0)


@pytest.mark.parametrize("engine", FAST)
@settings(max_examples=15, deadline=None)
@given(case=cases())
def test_gradients_equal_reference(engine, case):
    x, pos, inv, layout = make(case)
    x = x.float().requires_grad_()
    g = torch.randn(x.shape, generator=torch.Generator().manual_seed(1))
    (want,) = torch.autograd.grad(reference(x, pos, inv, layout), x, g)
    (got,) = torch.autograd.grad(
        functional.apply_rope(x, pos, inv, layout, engine=engine, check=False), x, g
    )
    torch.testing.assert_close(got, want, atol=1e-5, rtol=0)


def test_rope_qk_equals_reference_and_attention_factor():
    torch.manual_seed(0)
    q, k = torch.randn(2, 4, 6, 16), torch.randn(2, 2, 9, 16)
    qp, kp = torch.arange(3, 9), torch.arange(9)
    inv, _ = rope_inv_freq(16)
    oq, ok = _rope_qk_fast(q, k, qp, kp, inv, attention_factor=1.3, engine="cpp")
    torch.testing.assert_close(oq, reference(q, qp, inv, attention_factor=1.3), atol=1e-5, rtol=0)
    torch.testing.assert_close(ok, reference(k, kp, inv, attention_factor=1.3), atol=1e-5, rtol=0)
    for x, pos, want in ((q, qp, oq), (k, kp, ok)):  # the public function, one tensor a call
        got = functional.apply_rope(x, pos, inv, attention_factor=1.3, engine="cpp")
        torch.testing.assert_close(got, want, atol=1e-5, rtol=0)


def test_compiled_engine_small_shape():
    """torch.compile path, once, small shape: values (both layouts share one compile per
    variant), in place, and gradients."""
    torch.manual_seed(0)
    x = torch.randn(2, 3, 8, 12)
    pos = torch.randint(0, 100, (2, 8))
    inv, _ = rope_inv_freq(8)
    want = reference(x, pos, inv, "half")
    got = functional.apply_rope(x, pos, inv, "half", engine="compiled")
    assert "compiled" not in kernels._BROKEN, kernels._BROKEN.get("compiled")
    torch.testing.assert_close(got, want, atol=1e-5, rtol=0)
    y = x.clone()
    functional.apply_rope(y, pos, inv, "half", inplace=True, engine="compiled")
    torch.testing.assert_close(y, want, atol=1e-5, rtol=0)


def test_fallback_when_fast_engines_fail(monkeypatch):
    """A failing engine is remembered, warned about once, and the next one gives the same
    numbers; the env var forces the pure-PyTorch path."""
    monkeypatch.setattr(kernels, "_BROKEN", {})

    def broken(*args):
        raise RuntimeError("no compiler here")

    monkeypatch.setitem(kernels._ROTATE, "cpp", broken)
    monkeypatch.setitem(kernels._ROTATE, "compiled", broken)
    x, pos = torch.randn(1, 2, 5, 8), torch.arange(5)
    inv, _ = rope_inv_freq(8)
    with pytest.warns(RuntimeWarning, match="engine 'cpp' failed"):
        got = functional.apply_rope(x, pos, inv)
    torch.testing.assert_close(got, reference(x, pos, inv, "half"), atol=1e-6, rtol=0)
    assert set(kernels._BROKEN) == {"cpp"}  # auto never compiles; it went to eager
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # decided once: no second warning
        functional.apply_rope(x, pos, inv)
    assert kernels.pick_engine(x, x) == "eager"


def test_env_var_forces_eager(monkeypatch):
    monkeypatch.setenv(kernels.ENV_VAR, "eager")
    x = torch.randn(1, 1, 3, 4)
    cos, _ = rope_cos_sin(torch.arange(3), rope_inv_freq(4)[0])
    assert kernels.pick_engine(x, rope_align(cos, x, "p")) == "eager"
    monkeypatch.setenv(kernels.ENV_VAR, "turbo")
    with pytest.raises(ValueError, match="auto"):
        kernels.pick_engine(x, cos)


def test_cpp_unsupported_input_goes_to_next_engine():
    x = torch.randn(1, 1, 3, 4, dtype=torch.float64)  # float64: reference-grade, no C kernel
    cos, _ = rope_cos_sin(torch.arange(3), rope_inv_freq(4)[0], dtype=torch.float64)
    assert kernels.pick_engine(x, cos, "cpp") == "eager"


def test_inplace_and_out_reject_autograd_and_bad_out():
    x = torch.randn(1, 1, 3, 4, requires_grad=True)
    inv, _ = rope_inv_freq(4)
    with pytest.raises(ValueError, match="autograd"):
        functional.apply_rope(x, torch.arange(3), inv, inplace=True, engine="auto")
    with pytest.raises(ValueError, match="out must have"):
        functional.apply_rope(x.detach(), torch.arange(3), inv, out=torch.empty(1, 1, 3, 5))
    with pytest.raises(ValueError, match="layout"):
        kernels._rotate(x.detach(), x.detach(), x.detach(), "sideways")
    with pytest.raises(ValueError, match="layout"):
        functional.apply_rope(x.detach(), torch.arange(3), inv, layout="sideways")


def test_apply_rope_dispatches_to_fast_path_and_env_var_turns_it_off(monkeypatch):
    calls = []
    real = functional.rotary._rope_reference
    monkeypatch.setattr(
        functional.rotary, "_rope_reference", lambda *a: calls.append(1) or real(*a)
    )
    x, pos = torch.randn(2, 3, 7, 8), torch.arange(7)
    inv, _ = rope_inv_freq(8)
    want = real(x, *(rope_align(t, x, "p") for t in rope_cos_sin(pos, inv)), "half", False)
    got = functional.apply_rope(x, pos, inv)
    assert calls == [] and kernels.pick_engine(x, x) == "cpp"
    torch.testing.assert_close(got, want, atol=1e-6, rtol=0)
    monkeypatch.setenv(kernels.ENV_VAR, "eager")
    torch.testing.assert_close(functional.apply_rope(x, pos, inv), want, atol=0, rtol=0)
    assert calls == [1]


def test_double_backward_raises_instead_of_wrong_numbers():
    x = torch.randn(1, 1, 3, 4, requires_grad=True)
    inv, _ = rope_inv_freq(4)
    y = functional.apply_rope(x, torch.arange(3), inv, engine="cpp")
    (g,) = torch.autograd.grad(y.square().sum(), x, create_graph=True)
    with pytest.raises(RuntimeError):
        torch.autograd.grad(g.sum(), x)


def test_out_that_overlaps_the_input_is_refused():
    """out= sharing memory with x (but not x itself) would read rotated values part-way:
    refused as torch's out= ops refuse it; out is x is in place; disjoint views of one
    buffer are fine."""
    torch.manual_seed(0)
    inv = rope_inv_freq(8)[0]
    pos = torch.arange(6)
    buf = torch.randn(1, 2, 7, 8)
    x = buf[:, :, :6]
    want = reference(x.clone(), pos, inv)
    for engine in FAST:
        for out in (buf[:, :, 1:], buf[:, :, :6].transpose(-1, -2).contiguous().view_as(x)):
            if out.untyped_storage().data_ptr() != buf.untyped_storage().data_ptr():
                continue  # a copy: no overlap
            with pytest.raises(ValueError, match="out overlaps x"):
                functional.apply_rope(x, pos, inv, out=out, engine=engine)
        same = x.clone()
        got = functional.apply_rope(same, pos, inv, out=same, engine=engine)
        assert got.data_ptr() == same.data_ptr()
        torch.testing.assert_close(same, want, atol=1e-5, rtol=1e-5)
        two = torch.empty(1, 2, 12, 8)
        src, dst = two[:, :, :6], two[:, :, 6:]
        src.copy_(x)
        functional.apply_rope(src, pos, inv, out=dst, engine=engine)
        torch.testing.assert_close(dst, want, atol=1e-5, rtol=1e-5)
        q, k = x.clone(), x.clone()
        with pytest.raises(ValueError, match="overlaps"):
            _rope_qk_fast(q, k, pos, pos, inv, out=(k, q), engine=engine)
