"""Fast RoPE on CPU: rotate q and k in one pass, in place or into preallocated buffers.

Three engines compute the same rotation as `posenc.functional`'s reference
(`_apply_rope_reference`, which the tests compare against):

    "cpp"       a small C kernel (OpenMP over rows, auto-vectorized), built once with the
                system C compiler into a cache dir and loaded with ctypes. float32 and
                bfloat16. The only engine that rotates in place in a single pass.
    "compiled"  torch.compile of the same math (any float dtype; in place it takes 2 passes).
    "eager"     plain PyTorch, the fallback.
    "triton"    on CUDA: posenc.triton_rope, q and k in one kernel launch (rope_qk).

"auto" takes "cpp" where it is available for the input, else "eager" ("compiled" only when
asked for: it compiles for ~15 s per variant on first use); an engine that fails once (no compiler,
torch.compile raising) is remembered as unavailable for the rest of the process and a warning
says so. Force one with `engine=` or the env var POSENC_ROPE_ENGINE (auto|cpp|compiled|eager);
POSENC_ROPE_ENGINE=eager turns every fast path off.

Gradients: `_RopeFn`, an autograd.Function whose backward is the inverse rotation (the same
kernel with -sin), so forward and backward are each one read and one write of the tensors.

Shapes: x [B, H, T, Dh] (or [B, T, H, Dh], any rank <= 4 with Dh last and stride 1);
cos, sin broadcastable to x[..., :R/2] (posenc.functional.rope_cos_sin + _rope_align).
"""

from __future__ import annotations

import ctypes
import hashlib
import os
import platform
import shutil
import subprocess
import tempfile
import types
import warnings
from pathlib import Path

import torch
from torch.autograd.function import once_differentiable

ENGINES = ("auto", "cpp", "compiled", "eager", "triton")
ENV_VAR = "POSENC_ROPE_ENGINE"

# engine -> False once it failed in this process (and why, for `engine_status()`)
_BROKEN: dict[str, str] = {}
_LIB = None  # the loaded C kernel (ctypes.CDLL) once built
_HUGE = 2 << 20  # transparent huge page size on x86-64 / arm64 Linux
_MADVISE = None  # libc.madvise, or False where unavailable


def fresh_output(x: torch.Tensor) -> torch.Tensor:
    """An empty contiguous tensor like x. A large CPU one is advised to use transparent huge
    pages before its first write (as torch's THP_MEM_ALLOC_ENABLE does): the kernel then
    faults 2 MiB pages in, not 4 KiB ones — writing fresh outputs is otherwise dominated by
    page faults (~16k per 64 MiB). Only the 2 MiB-aligned interior is advised; a no-op where
    madvise or THP is unavailable."""
    global _MADVISE
    out = torch.empty_like(x, memory_format=torch.contiguous_format)
    nbytes = out.numel() * out.element_size()
    if out.device.type != "cpu" or nbytes < 8 * _HUGE or _MADVISE is False:
        return out
    if _MADVISE is None:
        try:
            libc = ctypes.CDLL(None, use_errno=True)
            _MADVISE = libc.madvise
            _MADVISE.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
        except (OSError, AttributeError):
            _MADVISE = False
            return out
    start = -(-out.data_ptr() // _HUGE) * _HUGE  # first 2 MiB boundary inside the buffer
    length = (out.data_ptr() + nbytes - start) // _HUGE * _HUGE
    _MADVISE(start, length, 14)  # MADV_HUGEPAGE; failure (no THP) just leaves 4 KiB pages
    return out


# ------------------------------------------------------------------------------- C kernel

_C_SOURCE = r"""
#include <stdint.h>
#include <string.h>

static inline float bf16_to_f32(uint16_t v) {
    uint32_t u = ((uint32_t)v) << 16; float f; memcpy(&f, &u, 4); return f;
}
static inline uint16_t f32_to_bf16(float f) {  /* round to nearest even, like c10 */
    uint32_t u; memcpy(&u, &f, 4);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40);  /* NaN */
    return (uint16_t)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

/* shape = {d0, d1, d2, R/2, Dh}; xs/os/cs = strides (elements) of dims 0..2 of x, out, cos/sin
   (last dim stride 1 everywhere). out may equal x (in place): iteration i touches only the
   pair {i, i + R/2} (half) or {2i, 2i + 1} (interleaved), so it is safe in one pass. */
#define ROPE_BODY(T, LOAD, STORE)                                                        \
    int64_t d0 = shape[0], d1 = shape[1], d2 = shape[2], h = shape[3], dh = shape[4];    \
    int64_t rows = d0 * d1 * d2;                                                          \
    _Pragma("omp parallel for num_threads(nthreads) schedule(static) if(rows * dh > 65536)") \
    for (int64_t r = 0; r < rows; r++) {                                                  \
        int64_t i2 = r % d2, i01 = r / d2, i1 = i01 % d1, i0 = i01 / d1;                  \
        const T* xr = x + i0 * xs[0] + i1 * xs[1] + i2 * xs[2];                           \
        T* orow = out + i0 * os[0] + i1 * os[1] + i2 * os[2];                             \
        const float* c = cs + i0 * ss[0] + i1 * ss[1] + i2 * ss[2];                       \
        const float* s = sn + i0 * ss[0] + i1 * ss[1] + i2 * ss[2];                       \
        if (!interleaved) {                                                               \
            _Pragma("omp simd")                                                           \
            for (int64_t i = 0; i < h; i++) {                                             \
                float a = LOAD(xr[i]), b = LOAD(xr[i + h]), ci = c[i], si = sign * s[i];  \
                orow[i] = STORE(a * ci - b * si);                                         \
                orow[i + h] = STORE(b * ci + a * si);                                     \
            }                                                                             \
        } else {                                                                          \
            _Pragma("omp simd")                                                           \
            for (int64_t i = 0; i < h; i++) {                                             \
                float a = LOAD(xr[2 * i]), b = LOAD(xr[2 * i + 1]);                       \
                float ci = c[i], si = sign * s[i];                                        \
                orow[2 * i] = STORE(a * ci - b * si);                                     \
                orow[2 * i + 1] = STORE(b * ci + a * si);                                 \
            }                                                                             \
        }                                                                                 \
        if (orow != xr)                                                                   \
            for (int64_t i = 2 * h; i < dh; i++) orow[i] = xr[i];                         \
    }

#define ID(v) (v)
void rope_f32(const float* x, float* out, const float* cs, const float* sn,
              const int64_t* shape, const int64_t* xs, const int64_t* os, const int64_t* ss,
              int interleaved, float sign, int nthreads) {
    ROPE_BODY(float, ID, ID)
}
void rope_bf16(const uint16_t* x, uint16_t* out, const float* cs, const float* sn,
               const int64_t* shape, const int64_t* xs, const int64_t* os, const int64_t* ss,
               int interleaved, float sign, int nthreads) {
    ROPE_BODY(uint16_t, bf16_to_f32, f32_to_bf16)
}
"""

_C_DTYPES = {torch.float32: "rope_f32", torch.bfloat16: "rope_bf16"}


def cache_dir() -> Path:
    """Where the built C kernel lives: $POSENC_CACHE_DIR, else $XDG_CACHE_HOME/posenc."""
    if os.environ.get("POSENC_CACHE_DIR"):
        return Path(os.environ["POSENC_CACHE_DIR"])
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "posenc"


def _cpu_tag() -> str:
    """The CPU's flags (the kernel is built with -march=native, so it is per machine type)."""
    try:
        text = Path("/proc/cpuinfo").read_text()
        flags = next((ln for ln in text.splitlines() if ln.startswith("flags")), "")
    except OSError:
        flags = ""
    return platform.machine() + flags


def _build_kernel() -> ctypes.CDLL:
    """Compile _C_SOURCE once per (source, CPU) into cache_dir() and load it."""
    cc = shutil.which(os.environ.get("CC", "cc")) or shutil.which("gcc")
    if cc is None:
        raise RuntimeError("no C compiler found (set CC)")
    key = hashlib.sha256((_C_SOURCE + _cpu_tag()).encode()).hexdigest()[:16]
    path = cache_dir() / f"rope_kernel_{key}.so"
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        src = path.with_suffix(".c")
        src.write_text(_C_SOURCE)
        base = [cc, "-O3", "-shared", "-fPIC", "-fopenmp", "-std=gnu11", str(src)]
        with tempfile.NamedTemporaryFile(dir=path.parent, suffix=".so", delete=False) as tmp:
            tmp_path = tmp.name
        err = ""
        for extra in (["-march=native"], []):
            proc = subprocess.run(
                [*base, *extra, "-o", tmp_path], capture_output=True, text=True, timeout=300
            )
            if proc.returncode == 0:
                os.replace(tmp_path, path)  # atomic: concurrent builders never see half a file
                break
            err = proc.stderr[-2000:]
        else:
            Path(tmp_path).unlink(missing_ok=True)
            raise RuntimeError(f"building the C kernel failed: {err}")
    lib = ctypes.CDLL(str(path))
    for name in _C_DTYPES.values():
        fn = getattr(lib, name)
        fn.restype = None
        fn.argtypes = (
            [ctypes.c_void_p] * 4
            + [ctypes.c_void_p] * 4
            + [
                ctypes.c_int,
                ctypes.c_float,
                ctypes.c_int,
            ]
        )
    return lib


def _kernel() -> ctypes.CDLL:
    global _LIB
    if _LIB is None:
        _LIB = _build_kernel()
    return _LIB


def _as4d(t: torch.Tensor) -> torch.Tensor:
    """View t (rank <= 4) as 4-D by adding leading axes."""
    while t.dim() < 4:
        t = t.unsqueeze(0)
    return t


def _i64(values) -> ctypes.Array:
    return (ctypes.c_int64 * len(values))(*values)


def _cpp_rotate(x, cos, sin, out, interleaved: bool, sign: float, copy_rest: bool) -> None:
    """out[..., :R] = rotate(x[..., :R]); out[..., R:] = x[..., R:] (out may be x)."""
    x4, o4 = _as4d(x), _as4d(out)
    c4 = _as4d(cos.expand(*x.shape[:-1], cos.shape[-1]))
    s4 = _as4d(sin.expand(*x.shape[:-1], sin.shape[-1]))
    fn = getattr(_kernel(), _C_DTYPES[x.dtype])
    fn(
        x4.data_ptr(),
        o4.data_ptr(),
        c4.data_ptr(),
        s4.data_ptr(),
        _i64([*x4.shape[:3], cos.shape[-1], x4.shape[3]]),
        _i64(x4.stride()[:3]),
        _i64(o4.stride()[:3]),
        _i64(c4.stride()[:3]),
        int(interleaved),
        float(sign),
        torch.get_num_threads(),
    )


# ------------------------------------------------------------------------ compiled / eager


def _eager_rotate(x, cos, sin, out, interleaved: bool, sign: float, copy_rest: bool) -> None:
    """The same math in plain PyTorch (float32 compute, one rounding to x's dtype).

    copy_rest: copy the pass-through channels x[..., R:] to out (out is not x)."""
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
    """torch.compile of _eager_rotate, one compiled function per variant (dtype, layout,
    direction, in place or not) so variants never evict each other; within a variant the first
    shape is specialized and a second one recompiles with dynamic sizes once."""
    key = (x.dtype, interleaved, sign, copy_rest, out is x)
    fn = _COMPILED.get(key)
    if fn is None:
        code = _eager_rotate.__code__.replace()  # a fresh code object: dynamo caches per code
        fresh = types.FunctionType(code, _eager_rotate.__globals__, "_eager_rotate")
        fn = _COMPILED[key] = torch.compile(fresh, dynamic=None, fullgraph=True)
    fn(x, cos, sin, out, interleaved, sign, copy_rest)


_ROTATE = {"cpp": _cpp_rotate, "compiled": _compiled_rotate, "eager": _eager_rotate}


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
        return x.dtype in _C_DTYPES and x.stride(-1) == 1 and cos.stride(-1) == 1
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
        elif name == "cpp" and _LIB is None:
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
        out = fresh_output(x)
        _run(x, cos, sin, out, interleaved, 1.0, engine)
        ctx.save_for_backward(cos, sin)
        ctx.interleaved, ctx.engine = interleaved, engine
        return out

    @staticmethod
    @once_differentiable  # double backward: raise rather than return wrong numbers
    def backward(ctx, grad):
        cos, sin = ctx.saved_tensors
        grad_x = fresh_output(grad)
        _run(grad.contiguous(), cos, sin, grad_x, ctx.interleaved, -1.0, ctx.engine)
        return grad_x, None, None, None, None


def rotate(
    x: torch.Tensor,
    cos: torch.Tensor,
    sin: torch.Tensor,
    layout: str = "half",
    *,
    inplace: bool = False,
    out: torch.Tensor | None = None,
    engine: str | None = None,
) -> torch.Tensor:
    """Rotate x [..., Dh] by cos, sin (broadcastable to x[..., :R/2], float32); R <= Dh.

    inplace=True writes into x (not with autograd on x); out= writes into a preallocated tensor
    of x's shape and dtype (no autograd); otherwise a new tensor, differentiable through x.
    Values equal posenc.functional's reference to float rounding.
    """
    if layout not in ("half", "interleaved"):
        raise ValueError(f"layout must be 'half' or 'interleaved', got {layout!r}")
    interleaved = layout == "interleaved"
    needs_grad = torch.is_grad_enabled() and x.requires_grad
    if cos.requires_grad or sin.requires_grad:
        raise ValueError("fast RoPE does not differentiate through cos/sin; use the reference")
    if inplace or out is not None:
        if needs_grad:
            raise ValueError("inplace=True / out= do not support autograd on x; call without them")
        target = x if inplace else out
        if out is not None and not inplace:
            if out.shape != x.shape or out.dtype != x.dtype or out.device != x.device:
                raise ValueError(
                    f"out must have x's shape {tuple(x.shape)}, dtype {x.dtype} and device "
                    f"{x.device}; got {tuple(out.shape)}, {out.dtype}, {out.device}"
                )
            if out.data_ptr() == x.data_ptr():
                target = x
        _run(x, cos, sin, target, interleaved, 1.0, engine)
        return target
    if needs_grad:
        return _RopeFn.apply(x, cos, sin, interleaved, engine)
    target = fresh_output(x)
    _run(x, cos, sin, target, interleaved, 1.0, engine)
    return target


def rope(
    x: torch.Tensor,
    positions: torch.Tensor,
    inv_freq: torch.Tensor,
    layout: str = "half",
    attention_factor: float = 1.0,
    *,
    inplace: bool = False,
    out: torch.Tensor | None = None,
    engine: str | None = None,
) -> torch.Tensor:
    """apply_rope's fast twin: x [..., Dh], positions [T] / [B, T] / broadcastable, inv_freq."""
    from posenc.functional import _rope_align, rope_cos_sin

    cos, sin = rope_cos_sin(positions, inv_freq, attention_factor, x.dtype)
    cos, sin = _rope_align(cos, x, "positions"), _rope_align(sin, x, "positions")
    return rotate(x, cos, sin, layout, inplace=inplace, out=out, engine=engine)


def rope_qk(
    q: torch.Tensor,
    k: torch.Tensor,
    q_pos: torch.Tensor,
    k_pos: torch.Tensor | None,
    inv_freq: torch.Tensor,
    layout: str = "half",
    attention_factor: float = 1.0,
    *,
    inplace: bool = False,
    out: tuple[torch.Tensor, torch.Tensor] | None = None,
    engine: str | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Rotate q [B, H, Tq, Dh] and k [B, Hkv, Tk, Dh]; cos/sin built once when k_pos is None
    or is q_pos. out=(q_out, k_out) writes into preallocated buffers."""
    from posenc.functional import _rope_align, rope_cos_sin

    q_cs = rope_cos_sin(q_pos, inv_freq, attention_factor, q.dtype)
    same = k_pos is None or k_pos is q_pos
    k_cs = q_cs if same else rope_cos_sin(k_pos, inv_freq, attention_factor, k.dtype)
    qc, qs = (_rope_align(t, q, "q_pos") for t in q_cs)
    kc, ks = (_rope_align(t, k, "k_pos") for t in k_cs)
    if q.is_cuda and k.is_cuda and _requested(engine) in ("auto", "triton") and _has_triton():
        from posenc import triton_rope

        return triton_rope.rope_qk(q, k, (qc, qs), (kc, ks), layout, inplace=inplace, out=out)
    oq, ok = out if out is not None else (None, None)
    return (
        rotate(q, qc, qs, layout, inplace=inplace, out=oq, engine=engine),
        rotate(k, kc, ks, layout, inplace=inplace, out=ok, engine=engine),
    )
