"""The C kernel of the distance-bias gradient: one pass over a tile of logits, summed along
anti-diagonals.

posenc.attention's `distance` backend keeps a bias of the distance alone as a vector vec [H, L]
and reads it, keys in reverse order, as the Hankel view bias[h, r, t] = vec[h, off + r + t]. Its
gradient is dvec[h, m] = sum over r + t = m - off of dS[b, h, r, t], with
dS = P * (dP - D), P = exp(S * scale + bias - lse): this kernel computes that sum for one tile
from S = q·kᵀ and dP = dO·vᵀ (two matmuls done by torch), without writing P or dS.

Built once with the system C compiler (posenc.kernels.cpu_rope.build_library), loaded with
ctypes; float32 in, float64 accumulators; never -ffast-math (it would change the float state
of the whole process). A leaf module: it knows tensors, not encodings.
"""

from __future__ import annotations

import ctypes
import subprocess

import torch

from posenc.kernels.cpu_rope import build_library

LIB = None  # the loaded kernel once built
BROKEN = ""  # why building it failed in this process ("" while not known to fail)

_C_SOURCE = r"""
#include <stdint.h>
#include <string.h>
#include <math.h>

/* exp for x <= 88 (Cephes' expf: 2^n * poly(r), about 1 ulp), 0 below -87 (masked logits):
   inline so the loops below vectorize without -ffast-math, which would set the flush-to-zero
   state of the whole process when the library loads. */
static inline float exp_f(float x) {
    float xc = x < -87.0f ? -87.0f : x;
    float n = (xc * 1.44269504088896341f + 12582912.0f) - 12582912.0f;  /* round: 1.5 * 2^23 */
    float r = xc - n * 0.693359375f + n * 2.12194440e-4f;
    float p = 1.9875691500e-4f;
    p = p * r + 1.3981999507e-3f;
    p = p * r + 8.3334519073e-3f;
    p = p * r + 4.1665795894e-2f;
    p = p * r + 1.6666665459e-1f;
    p = p * r + 5.0000001201e-1f;
    float e = p * r * r + r + 1.0f;
    int32_t bits = ((int32_t)n + 127) << 23;
    float scale;
    memcpy(&scale, &bits, 4);
    return x < -87.0f ? 0.0f : e * scale;
}

/* S, dP: [B, H, R, N] contiguous; lse, D: [B, H, R] (strides lb, lh / db, dh, unit along R);
   vec: [H, L]; acc: [H, L] double. Heads in parallel: a head's rows of every batch element
   add into its own acc row, so no two threads write the same address. With `write`, S is
   overwritten with P and dP with dS (for the matmuls of dq, dk, dv). */
void bias_grad_f32(float* S, float* dP, const float* vec, const float* lse,
                   const float* D, double* acc, int64_t B, int64_t H, int64_t R, int64_t N,
                   int64_t L, int64_t off, int64_t lb, int64_t lh, int64_t db, int64_t dh,
                   float scale, int write,
                   int nthreads) {
    #pragma omp parallel for num_threads(nthreads) schedule(static) if(H * R * N > 65536)
    for (int64_t h = 0; h < H; h++) {
        for (int64_t b = 0; b < B; b++) {
            for (int64_t r = 0; r < R; r++) {
                int64_t row = (b * H + h) * R + r;
                float* s = S + row * N;
                float* dp = dP + row * N;
                const float* bias = vec + h * L + off + r;
                double* a = acc + h * L + off + r;
                float l = lse[b * lb + h * lh + r], d = D[b * db + h * dh + r];
                if (write) {
                    #pragma omp simd
                    for (int64_t t = 0; t < N; t++) {
                        float p = exp_f(s[t] * scale + bias[t] - l), ds = p * (dp[t] - d);
                        a[t] += (double)ds;
                        s[t] = p;
                        dp[t] = ds;
                    }
                } else {
                    #pragma omp simd
                    for (int64_t t = 0; t < N; t++) {
                        float p = exp_f(s[t] * scale + bias[t] - l);
                        a[t] += (double)(p * (dp[t] - d));
                    }
                }
            }
        }
    }
}
"""


def kernel() -> ctypes.CDLL | None:
    """The loaded kernel, built on first use; None where it cannot be built (no compiler)."""
    global LIB, BROKEN
    if LIB is None and not BROKEN:
        try:
            path = build_library(_C_SOURCE, "bias_kernel", ("-fno-trapping-math",))
            lib = ctypes.CDLL(str(path))
        except (RuntimeError, OSError, subprocess.SubprocessError) as err:
            BROKEN = str(err) or type(err).__name__
            return None
        fn = lib.bias_grad_f32
        fn.restype = None
        ints, ptrs = [ctypes.c_int64] * 10, [ctypes.c_void_p] * 6
        fn.argtypes = [*ptrs, *ints, ctypes.c_float, ctypes.c_int, ctypes.c_int]
        LIB = lib
    return LIB


def bias_grad(S, dP, vec, lse, D, acc, off: int, scale: float, write: bool = False) -> None:
    """acc[h, off + r + t] += sum over b of dS, dS = P * (dP - D),
    P = exp(S * scale + vec[h, off + r + t] - lse); with `write`, S <- P and dP <- dS.

    S, dP [B, H, R, N] float32 contiguous; vec [H, L] float32 contiguous; lse, D [B, H, R]
    float32 with a unit stride along R; acc [H, L] float64 contiguous; 0 <= off, off + R + N - 1
    <= L."""
    B, H, R, N = S.shape
    L = vec.shape[1]
    assert S.is_contiguous() and dP.is_contiguous() and dP.shape == S.shape
    assert vec.is_contiguous() and acc.is_contiguous() and acc.shape == vec.shape
    assert R == 1 or (lse.stride(-1) == 1 and D.stride(-1) == 1)
    assert lse.shape == D.shape == (B, H, R) and off >= 0 and off + R + N - 1 <= L
    kernel().bias_grad_f32(
        S.data_ptr(), dP.data_ptr(), vec.data_ptr(), lse.data_ptr(), D.data_ptr(),
        acc.data_ptr(), B, H, R, N, L, off, *lse.stride()[:2], *D.stride()[:2], float(scale),
        int(write), torch.get_num_threads(),
    )  # fmt: skip
