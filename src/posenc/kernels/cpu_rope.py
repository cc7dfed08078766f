"""The C RoPE kernel (OpenMP over rows, auto-vectorized, float32 and bfloat16): one pass over
x, in place or into a preallocated output; built once into cache_dir(), loaded with ctypes.
A leaf module: posenc.kernels dispatches to it."""

from __future__ import annotations

import ctypes
import hashlib
import os
import platform
import shutil
import subprocess
import tempfile
from pathlib import Path

import torch

LIB = None  # the loaded C kernel (ctypes.CDLL) once built
_HUGE = 2 << 20  # transparent huge page size on x86-64 / arm64 Linux
_MADVISE = None  # libc.madvise, or False where unavailable


def fresh_output(x: torch.Tensor) -> torch.Tensor:
    """An empty contiguous tensor like x; a large CPU one advised to use transparent huge pages
    (its 2 MiB-aligned interior, as THP_MEM_ALLOC_ENABLE does): writing fresh outputs is
    otherwise dominated by 4 KiB page faults (~16k per 64 MiB)."""
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

C_DTYPES = {torch.float32: "rope_f32", torch.bfloat16: "rope_bf16"}


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


def build_library(source: str, stem: str, flags: tuple[str, ...] = ()) -> Path:
    """Compile C `source` once per (source, flags, CPU) into cache_dir(); the .so's path."""
    cc = shutil.which(os.environ.get("CC", "cc")) or shutil.which("gcc")
    if cc is None:
        raise RuntimeError("no C compiler found (set CC)")
    key = hashlib.sha256((source + " ".join(flags) + _cpu_tag()).encode()).hexdigest()[:16]
    path = cache_dir() / f"{stem}_{key}.so"
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        src = path.with_suffix(".c")
        src.write_text(source)
        base = [cc, "-O3", *flags, "-shared", "-fPIC", "-fopenmp", "-std=gnu11", str(src)]
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
    return path


def _kernel() -> ctypes.CDLL:
    """The C kernel, built once per (source, CPU) into cache_dir() and loaded."""
    global LIB
    if LIB is None:
        lib = ctypes.CDLL(str(build_library(_C_SOURCE, "rope_kernel")))
        ptr, c_int = ctypes.c_void_p, ctypes.c_int
        for name in C_DTYPES.values():
            getattr(lib, name).restype = None
            getattr(lib, name).argtypes = [*[ptr] * 8, c_int, ctypes.c_float, c_int]
        LIB = lib
    return LIB


def views4d(x, cos, sin, out) -> tuple[torch.Tensor, ...]:
    """4-D views (leading axes added) of x, out, and cos, sin [..., R/2] expanded to x's rows."""
    c, s = (t.expand(*x.shape[:-1], t.shape[-1]) for t in (cos, sin))
    return tuple(t[(None,) * (4 - t.dim())] for t in (x, out, c, s))


def _i64(values) -> ctypes.Array:
    return (ctypes.c_int64 * len(values))(*values)


def rotate(x, cos, sin, out, interleaved: bool, sign: float, copy_rest: bool) -> None:
    """out[..., :R] = rotate(x[..., :R]); out[..., R:] = x[..., R:] (out may be x)."""
    x4, o4, c4, s4 = views4d(x, cos, sin, out)
    ptrs = [t.data_ptr() for t in (x4, o4, c4, s4)]
    shape = _i64([*x4.shape[:3], cos.shape[-1], x4.shape[3]])  # {d0, d1, d2, R/2, Dh}
    strides = [_i64(t.stride()[:3]) for t in (x4, o4, c4)]  # s4 shares c4's (both expanded)
    fn = getattr(_kernel(), C_DTYPES[x.dtype])
    fn(*ptrs, shape, *strides, int(interleaved), float(sign), torch.get_num_threads())
