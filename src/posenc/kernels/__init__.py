"""Fast RoPE kernels and the one place that picks between them; each computes
posenc.functional.apply_rope(..., engine="reference")'s rotation (the public entry point):

    "cpp"       posenc.kernels.cpu_rope: a small C kernel built once with the system compiler,
                float32 and bfloat16; the only engine rotating in place in a single pass.
    "compiled"  torch.compile of the same math (any float dtype; in place in 2 passes).
    "eager"     plain PyTorch, the fallback.
    "triton"    on CUDA: posenc.kernels.triton_rope, q and k in one launch (_rotate_qk).

"auto" takes "cpp" where it runs, else "eager" ("compiled" only when asked: ~15 s to compile
per variant). An engine that fails once is unavailable for the rest of the process (a warning
says so). Force one with `engine=` or POSENC_ROPE_ENGINE (auto|cpp|compiled|eager; eager
turns every fast path off). Gradients: _RopeFn, whose backward is the same kernel with -sin.

Shapes: x [B, H, T, Dh] (any rank <= 4, Dh last with stride 1); cos, sin float32,
broadcastable to x[..., :R/2]. A leaf: nothing here imports the rest of posenc.
"""

from __future__ import annotations

import os
import types
import warnings

import torch
from torch.autograd.function import once_differentiable

from posenc.kernels import cpu_rope

ENGINES = ("auto", "cpp", "compiled", "eager", "triton")
ENV_VAR = "POSENC_ROPE_ENGINE"

# engine -> why it failed in this process (for `engine_status()`)
_BROKEN: dict[str, str] = {}


def _eager_rotate(x, cos, sin, out, interleaved: bool, sign: float, copy_rest: bool) -> None:
    """The math in plain PyTorch (float32, one rounding); copy_rest: copy x[..., R:] to out."""
    r = 2 * cos.shape[-1]
    xr = x[..., :r].float()
    if interleaved:
        a, b = xr[..., 0::2], xr[..., 1::2]
    else:
        a, b = xr.chunk(2, dim=-1)
    s = sin if sign > 0 else -sin
    ra, rb = a * cos - b * s, b * cos + a * s
    rot = torch.stack((ra, rb), -1).flatten(-2) if interleaved else torch.cat((ra, rb), -1)
    out[..., :r].copy_(rot)
    if copy_rest and r < x.shape[-1]:
        out[..., r:].copy_(x[..., r:])


_COMPILED: dict[tuple, object] = {}


def _compiled_rotate(x, cos, sin, out, interleaved: bool, sign: float, copy_rest: bool) -> None:
    """torch.compile of _eager_rotate, one compiled function per variant (never evicting
    each other; a second shape recompiles dynamic once)."""
    key = (x.dtype, interleaved, sign, copy_rest, out is x)
    fn = _COMPILED.get(key)
    if fn is None:
        code = _eager_rotate.__code__.replace()  # a fresh code object: dynamo caches per code
        fresh = types.FunctionType(code, _eager_rotate.__globals__, "_eager_rotate")
        fn = _COMPILED[key] = torch.compile(fresh, dynamic=None, fullgraph=True)
    fn(x, cos, sin, out, interleaved, sign, copy_rest)


_ROTATE = {"cpp": cpu_rope.rotate, "compiled": _compiled_rotate, "eager": _eager_rotate}


# ------------------------------------------------------------------------------- dispatch


def _has_triton() -> bool:
    try:
        import triton  # noqa: F401
    except ImportError:
        return False
    return not torch.compiler.is_compiling()


def _requested(engine: str | None) -> str:
    name = (engine or os.environ.get(ENV_VAR) or "auto").strip().lower()
    if name not in ENGINES:
        raise ValueError(f"engine ({ENV_VAR}) must be one of {ENGINES}, got {name!r}")
    return name


def supports(x: torch.Tensor, cos: torch.Tensor, engine: str) -> bool:
    """Whether `engine` can rotate x with these cos/sin (dtype, device, layout in memory)."""
    if engine == "eager":
        return True
    if x.device.type != "cpu" or cos.dtype != torch.float32 or x.dim() > 4 or x.dim() < 1:
        return False
    if engine == "cpp":
        return x.dtype in cpu_rope.C_DTYPES and x.stride(-1) == 1 and cos.stride(-1) == 1
    return x.dtype in (torch.float32, torch.bfloat16, torch.float16)


def pick_engine(x: torch.Tensor, cos: torch.Tensor, engine: str | None = None) -> str:
    """The engine that will run: the requested one if it works for x, else the next in line."""
    want = _requested(engine)
    # auto never compiles: a first torch.compile costs ~15 s per variant and shape class, too
    # much to spring on a caller (or a test suite); ask for engine="compiled" to get it.
    order = ("cpp", "eager") if want in ("auto", "triton") else (want, "eager")
    if torch.compiler.is_compiling():  # inside someone's torch.compile: plain ops trace best
        return "eager"
    for name in order:
        if name not in _BROKEN and supports(x, cos, name):
            return name
    return "eager"


def use_fast(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, inplace: bool) -> bool:
    """Whether posenc.functional.apply_rope should hand x to the C kernel (else: reference)."""
    if cos.requires_grad or sin.requires_grad:
        return False
    if inplace and torch.is_grad_enabled() and x.requires_grad:
        return False
    try:
        return pick_engine(x, cos) == "cpp"
    except ValueError:  # a bad POSENC_ROPE_ENGINE value: the reference path, no crash here
        return False


def engine_status() -> dict[str, str]:
    """engine -> 'ok' / 'unavailable: why' / 'not tried' (the bench prints it)."""
    status = {}
    for name in ("cpp", "compiled", "eager"):
        if name in _BROKEN:
            status[name] = f"unavailable: {_BROKEN[name]}"
        elif name == "cpp" and cpu_rope.LIB is None:
            status[name] = "not built yet"
        elif name == "compiled" and not _COMPILED:
            status[name] = "not compiled yet"
        else:
            status[name] = "ok"
    return status


def _run(x, cos, sin, out, interleaved: bool, sign: float, engine: str | None) -> str:
    """Rotate with the first engine that works; remember failures. Returns the engine used."""
    while True:
        name = pick_engine(x, cos, engine)
        try:
            _ROTATE[name](x, cos, sin, out, interleaved, sign, out.data_ptr() != x.data_ptr())
            return name
        except Exception as err:  # noqa: BLE001 - any failure of a fast engine -> fall back
            if name == "eager":
                raise
            _BROKEN[name] = f"{type(err).__name__}: {str(err)[:300]}"
            warnings.warn(
                f"posenc fast RoPE: engine {name!r} failed ({_BROKEN[name]}); falling back",
                RuntimeWarning,
                stacklevel=3,
            )


class _RopeFn(torch.autograd.Function):
    """Out-of-place rotation whose backward is the inverse rotation (rotate by -angle)."""

    @staticmethod
    def forward(ctx, x, cos, sin, interleaved, engine):
        out = cpu_rope.fresh_output(x)
        _run(x, cos, sin, out, interleaved, 1.0, engine)
        ctx.save_for_backward(cos, sin)
        ctx.interleaved, ctx.engine = interleaved, engine
        return out

    @staticmethod
    @once_differentiable  # double backward: raise rather than return wrong numbers
    def backward(ctx, grad):
        cos, sin = ctx.saved_tensors
        grad_x = cpu_rope.fresh_output(grad)
        _run(grad.contiguous(), cos, sin, grad_x, ctx.interleaved, -1.0, ctx.engine)
        return grad_x, None, None, None, None


def _span(t: torch.Tensor) -> tuple[int, int]:
    """[first, last) byte addresses t's elements occupy (its strides may leave gaps)."""
    start = t.data_ptr()
    extent = sum((n - 1) * abs(s) for n, s in zip(t.shape, t.stride(), strict=True))
    return start, start + (extent + 1) * t.element_size()


def same_memory(a: torch.Tensor, b: torch.Tensor) -> bool:
    """a and b are the same elements (the same view of one storage)."""
    return (a.data_ptr(), a.shape, a.stride()) == (b.data_ptr(), b.shape, b.stride())


def _share_elements(a: torch.Tensor, b: torch.Tensor, lo: int, hi: int) -> bool:
    """Whether views a and b hold a common element in bytes [lo, hi): exact for interleaved
    strided views, by marking a's elements."""
    if a.is_contiguous() and b.is_contiguous() or a.element_size() != b.element_size():
        return True  # contiguous spans that meet do share elements
    size = a.element_size()
    marks = torch.zeros((hi - lo) // size, dtype=torch.bool, device=a.device)
    marks.as_strided(a.shape, a.stride(), (a.data_ptr() - lo) // size).fill_(True)
    return bool(marks.as_strided(b.shape, b.stride(), (b.data_ptr() - lo) // size).any())


def refuse_overlap(
    out: torch.Tensor, out_name: str, x: torch.Tensor, x_name: str, allow_same: bool = True
) -> None:
    """ValueError where `out` overlaps `x` without being it (as torch's out= ops)."""
    if out.numel() == 0 or x.numel() == 0 or out.device != x.device:
        return
    (a0, a1), (b0, b1) = _span(out), _span(x)
    if a0 < b1 and b0 < a1 and _share_elements(out, x, min(a0, b0), max(a1, b1)):
        own = f" (and is not {x_name} itself)" if allow_same else ""
        raise ValueError(f"{out_name} overlaps {x_name} in memory{own}: pass a separate "
                         "tensor, or inplace=True to rotate in place")  # fmt: skip


def _rotate(
    x: torch.Tensor,
    cos: torch.Tensor,
    sin: torch.Tensor,
    layout: str = "half",
    *,
    inplace: bool = False,
    out: torch.Tensor | None = None,
    engine: str | None = None,
) -> torch.Tensor:
    """Rotate x [..., Dh] by cos, sin (float32, broadcastable to x[..., :R/2]): in place, into
    out= (neither with autograd on x), or a new tensor differentiable through x."""
    if layout not in ("half", "interleaved"):
        raise ValueError(f"layout must be 'half' or 'interleaved', got {layout!r}")
    interleaved = layout == "interleaved"
    needs_grad = torch.is_grad_enabled() and x.requires_grad
    if cos.requires_grad or sin.requires_grad:
        raise ValueError("fast RoPE does not differentiate through cos/sin; use the reference")
    if needs_grad and not inplace and out is None:
        return _RopeFn.apply(x, cos, sin, interleaved, engine)
    if needs_grad:
        raise ValueError("inplace=True / out= do not support autograd on x; call without them")
    target = x if inplace else cpu_rope.fresh_output(x) if out is None else out
    if out is not None and not inplace:
        if out.shape != x.shape or out.dtype != x.dtype or out.device != x.device:
            raise ValueError(
                f"out must have x's shape {tuple(x.shape)}, dtype {x.dtype} and device "
                f"{x.device}; got {tuple(out.shape)}, {out.dtype}, {out.device}"
            )
        if same_memory(out, x):
            target = x  # out is x: in place
        else:
            refuse_overlap(out, "out", x, "x")
    _run(x, cos, sin, target, interleaved, 1.0, engine)
    return target


def _rotate_qk(
    q: torch.Tensor,
    k: torch.Tensor,
    q_cs: tuple[torch.Tensor, torch.Tensor],
    k_cs: tuple[torch.Tensor, torch.Tensor],
    layout: str = "half",
    *,
    inplace: bool = False,
    out: tuple[torch.Tensor, torch.Tensor] | None = None,
    engine: str | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Rotate q [B, H, Tq, Dh], k [B, Hkv, Tk, Dh] by their (cos, sin); on CUDA with Triton in
    one launch; out=(q_out, k_out)."""
    oq, ok = out if out is not None else (None, None)
    # out= as torch's ops check it: an out may be its own input (in place), never the other's
    pairs = ((oq, "out[0]", q, "q", True), (ok, "out[1]", k, "k", True),
             (oq, "out[0]", k, "k", False), (ok, "out[1]", q, "q", False),
             (ok, "out[1]", oq, "out[0]", False))  # fmt: skip
    for o, name, t, tname, own in pairs if out is not None else ():
        if o is not None and t is not None and not (own and same_memory(o, t)):
            refuse_overlap(o, name, t, tname, allow_same=own)
    if q.is_cuda and k.is_cuda and _requested(engine) in ("auto", "triton") and _has_triton():
        from posenc.kernels import triton_rope  # imports triton: only on CUDA

        return triton_rope.rope_qk(q, k, q_cs, k_cs, layout, inplace=inplace, out=out)
    return (
        _rotate(q, *q_cs, layout, inplace=inplace, out=oq, engine=engine),
        _rotate(k, *k_cs, layout, inplace=inplace, out=ok, engine=engine),
    )
