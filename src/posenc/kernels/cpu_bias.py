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
#include <stdlib.h>
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
   the bias of (h, r, t) at vec[h * bh + off + r * br + t], acc (double) likewise: br = 1 for
   the Hankel view of a distance vector [H, L] (bh = L), br = N for a dense tile (bh = R * N). Heads in parallel: a head's rows of every batch element
   add into its own acc row, so no two threads write the same address. With `write`, S is
   overwritten with P and dP with dS (for the matmuls of dq, dk, dv). */
void bias_grad_f32(float* S, float* dP, const float* vec, const float* lse,
                   const float* D, double* acc, int64_t B, int64_t H, int64_t R, int64_t N,
                   int64_t bh, int64_t br, int64_t off, int64_t lb, int64_t lh, int64_t db,
                   int64_t dh, float scale, int write, int nthreads) {
    #pragma omp parallel for num_threads(nthreads) schedule(static) if(H * R * N > 65536)
    for (int64_t h = 0; h < H; h++) {
        for (int64_t b = 0; b < B; b++) {
            for (int64_t r = 0; r < R; r++) {
                int64_t row = (b * H + h) * R + r;
                float* s = S + row * N;
                float* dp = dP + row * N;
                const float* bias = vec + h * bh + off + r * br;
                double* a = acc + h * bh + off + r * br;
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
/* FIRE's bias (posenc.encodings.bias.FIRE) for query rows at qp [R] and keys at kp [N]:
   out[h, r, t] = b2[h] + sum over u of w2[h, u] * relu(w1[u] * x + b1[u]),
   x = psi[|qp[r] - kp[t]|] / den[r]; `masked` where causal and kp[t] > qp[r]. The operations
   in FIRE._value's order, each rounded to float32 (built with -ffp-contract=off: no fused
   multiply-add), so the values are bias()'s. out [H, R, N] contiguous; rows in parallel. */
#define CH 16
static inline int64_t absd(int64_t d) { return d < 0 ? -d : d; }

void fire_bias_f32(float* out, const float* psi, const float* den, const int64_t* qp,
                   const int64_t* kp, const float* w1, const float* b1, const float* w2,
                   const float* b2, int64_t H, int64_t R, int64_t N, int64_t U, int causal,
                   float masked, int nthreads) {
    #pragma omp parallel for num_threads(nthreads) schedule(static) if(R * N * U > 65536)
    for (int64_t r = 0; r < R; r++) {
        float x[CH], hid[CH], acc[H][CH];
        int ok[CH];
        for (int64_t t0 = 0; t0 < N; t0 += CH) {
            int64_t n = N - t0 < CH ? N - t0 : CH;
            for (int64_t t = 0; t < CH; t++) {
                int64_t d = t < n ? qp[r] - kp[t0 + t] : 0;
                ok[t] = !(causal && d < 0);
                x[t] = psi[absd(d)] / den[r];
            }
            for (int64_t h = 0; h < H; h++)
                for (int64_t t = 0; t < CH; t++) acc[h][t] = b2[h];
            for (int64_t u = 0; u < U; u++) {
                float w = w1[u], b = b1[u];
                for (int64_t t = 0; t < CH; t++) {
                    float p = w * x[t] + b;
                    hid[t] = p > 0.0f ? p : 0.0f;
                }
                for (int64_t h = 0; h < H; h++) {
                    float c = w2[h * U + u];
                    for (int64_t t = 0; t < CH; t++) acc[h][t] = acc[h][t] + c * hid[t];
                }
            }
            for (int64_t h = 0; h < H; h++) {
                float* o = out + (h * R + r) * N + t0;
                for (int64_t t = 0; t < n; t++) o[t] = ok[t] ? acc[h][t] : masked;
            }
        }
    }
}

/* The gradient of fire_bias_f32 from g [H, R, N] (double: the loss's gradient at each bias
   value, 0 where masked): adds into dw1, db1 [U], dw2 [H, U], db2 [H], dpsi [span + 1] (at
   |qp - kp|) and dden [R], all double. Rows in parallel; each thread sums into its own copy
   of the shared sums (float lanes within a row, double across rows), added at the end. */
void fire_grad_f32(const double* g, const float* psi, const float* den, const int64_t* qp,
                   const int64_t* kp, const float* w1, const float* b1, const float* w2,
                   int64_t H, int64_t R, int64_t N, int64_t U, int64_t span, int causal,
                   double* dw1, double* db1, double* dw2, double* db2, double* dpsi,
                   double* dden, int nthreads) {
    int64_t P = 2 * U + H * U + H + span + 1;
    #pragma omp parallel num_threads(nthreads) if(R * N * U > 65536)
    {
        double* mine = calloc(P, sizeof(double));
        double *m_w1 = mine, *m_b1 = mine + U, *m_w2 = mine + 2 * U;
        double *m_b2 = m_w2 + H * U, *m_psi = m_b2 + H;
        float (*aw2)[CH] = malloc(sizeof(float) * CH * (H * U + 2 * U + H));
        float (*aw1)[CH] = aw2 + H * U, (*ab1)[CH] = aw1 + U, (*ab2)[CH] = ab1 + U;
        #pragma omp for schedule(static)
        for (int64_t r = 0; r < R; r++) {
            float x[CH], hid[CH], gu[CH], dx[CH], gh[H][CH];
            int ok[CH], act[CH];
            int64_t a[CH];
            double dd = 0.0;
            memset(aw2, 0, sizeof(float) * CH * (H * U + 2 * U + H));
            for (int64_t t0 = 0; t0 < N; t0 += CH) {
                int64_t n = N - t0 < CH ? N - t0 : CH;
                for (int64_t t = 0; t < CH; t++) {
                    int64_t d = t < n ? qp[r] - kp[t0 + t] : 0;
                    ok[t] = t < n && !(causal && d < 0);
                    a[t] = absd(d);
                    x[t] = psi[a[t]] / den[r];
                    dx[t] = 0.0f;
                }
                for (int64_t h = 0; h < H; h++) {
                    const double* gr = g + (h * R + r) * N + t0;
                    for (int64_t t = 0; t < CH; t++) gh[h][t] = ok[t] ? (float)gr[t] : 0.0f;
                }
                for (int64_t u = 0; u < U; u++) {
                    float w = w1[u], b = b1[u];
                    for (int64_t t = 0; t < CH; t++) {
                        float p = w * x[t] + b;
                        act[t] = p > 0.0f;
                        hid[t] = act[t] ? p : 0.0f;
                        gu[t] = 0.0f;
                    }
                    for (int64_t h = 0; h < H; h++) {
                        float c = w2[h * U + u];
                        float* acc = aw2[h * U + u];
                        for (int64_t t = 0; t < CH; t++) {
                            acc[t] += gh[h][t] * hid[t];
                            gu[t] += gh[h][t] * c;
                        }
                    }
                    for (int64_t t = 0; t < CH; t++) {
                        float v = act[t] ? gu[t] : 0.0f;
                        aw1[u][t] += v * x[t];
                        ab1[u][t] += v;
                        dx[t] += v * w;
                    }
                }
                for (int64_t h = 0; h < H; h++)
                    for (int64_t t = 0; t < CH; t++) ab2[h][t] += gh[h][t];
                for (int64_t t = 0; t < n; t++) {
                    if (!ok[t]) continue;
                    m_psi[a[t]] += (double)dx[t] / den[r];
                    dd -= (double)dx[t] * x[t] / den[r];
                }
            }
            dden[r] += dd;
            for (int64_t i = 0; i < H * U; i++)
                for (int64_t t = 0; t < CH; t++) m_w2[i] += aw2[i][t];
            for (int64_t u = 0; u < U; u++)
                for (int64_t t = 0; t < CH; t++) {
                    m_w1[u] += aw1[u][t];
                    m_b1[u] += ab1[u][t];
                }
            for (int64_t h = 0; h < H; h++)
                for (int64_t t = 0; t < CH; t++) m_b2[h] += ab2[h][t];
        }
        #pragma omp critical
        {
            for (int64_t u = 0; u < U; u++) { dw1[u] += m_w1[u]; db1[u] += m_b1[u]; }
            for (int64_t i = 0; i < H * U; i++) dw2[i] += m_w2[i];
            for (int64_t h = 0; h < H; h++) db2[h] += m_b2[h];
            for (int64_t i = 0; i <= span; i++) dpsi[i] += m_psi[i];
        }
        free(aw2);
        free(mine);
    }
}
"""


def kernel() -> ctypes.CDLL | None:
    """The loaded kernel, built on first use; None where it cannot be built (no compiler)."""
    global LIB, BROKEN
    if LIB is None and not BROKEN:
        try:
            flags = ("-fno-trapping-math", "-ffp-contract=off")
            path = build_library(_C_SOURCE, "bias_kernel", flags)
            lib = ctypes.CDLL(str(path))
        except (RuntimeError, OSError, subprocess.SubprocessError) as err:
            BROKEN = str(err) or type(err).__name__
            return None
        fn = lib.bias_grad_f32
        fn.restype = None
        i64, ptr, c_int = ctypes.c_int64, ctypes.c_void_p, ctypes.c_int
        fn.argtypes = [*[ptr] * 6, *[i64] * 11, ctypes.c_float, c_int, c_int]
        lib.fire_bias_f32.restype = lib.fire_grad_f32.restype = None
        lib.fire_bias_f32.argtypes = [*[ptr] * 9, *[i64] * 4, c_int, ctypes.c_float, c_int]
        lib.fire_grad_f32.argtypes = [*[ptr] * 8, *[i64] * 5, c_int, *[ptr] * 6, c_int]
        LIB = lib
    return LIB


def bias_grad(S, dP, vec, lse, D, acc, off: int, scale: float, write: bool = False) -> None:
    """acc[h, off + r + t] += sum over b of dS, dS = P * (dP - D),
    P = exp(S * scale + vec[h, off + r + t] - lse); with `write`, S <- P and dP <- dS.
    A dense tile vec [H, R, N] (off = 0) reads and adds at [h, r, t] instead.

    S, dP [B, H, R, N] float32 contiguous; vec [H, L] or [H, R, N] float32 contiguous; lse, D
    [B, H, R] float32 with a unit stride along R; acc float64 contiguous, vec's shape;
    0 <= off, off + R + N - 1 <= L."""
    B, H, R, N = S.shape
    assert S.is_contiguous() and dP.is_contiguous() and dP.shape == S.shape
    assert vec.is_contiguous() and acc.is_contiguous() and acc.shape == vec.shape
    assert R == 1 or (lse.stride(-1) == 1 and D.stride(-1) == 1)
    if vec.dim() == 3:  # a dense tile
        assert vec.shape == (H, R, N) and off == 0
        bh, br = R * N, N
    else:
        bh, br = vec.shape[1], 1
        assert off >= 0 and off + R + N - 1 <= bh
    assert lse.shape == D.shape == (B, H, R)
    kernel().bias_grad_f32(
        S.data_ptr(), dP.data_ptr(), vec.data_ptr(), lse.data_ptr(), D.data_ptr(),
        acc.data_ptr(), B, H, R, N, bh, br, off, *lse.stride()[:2], *D.stride()[:2],
        float(scale), int(write), torch.get_num_threads(),
    )  # fmt: skip


def _ptrs(*tensors) -> list[int]:
    assert all(t.is_contiguous() for t in tensors)
    return [t.data_ptr() for t in tensors]


def fire_bias(out, psi, den, qp, kp, mlp, causal: bool, masked: float) -> None:
    """out [H, R, N] <- FIRE's bias MLP_h(psi[|qp[r] - kp[t]|] / den[r]) (`masked` where causal
    and kp[t] > qp[r]). psi [span + 1], den [R], float32; qp [R], kp [N] int64;
    mlp = (w1 [U], b1 [U], w2 [H, U], b2 [H]) float32; all contiguous."""
    H, R, N = out.shape
    w1, b1, w2, b2 = mlp
    assert out.dtype == psi.dtype == den.dtype == torch.float32 and den.shape == (R,)
    assert qp.dtype == kp.dtype == torch.int64 and qp.shape == (R,) and kp.shape == (N,)
    kernel().fire_bias_f32(
        *_ptrs(out, psi, den, qp, kp, w1, b1, w2, b2), H, R, N, w1.shape[0], int(causal),
        float(masked), torch.get_num_threads(),
    )  # fmt: skip


def fire_grad(g, psi, den, qp, kp, mlp, causal: bool, grads) -> None:
    """Adds the gradient of fire_bias from g [H, R, N] (float64, 0 where masked) into
    grads = (dpsi, dden [R], dw1, db1, dw2, db2), float64 of the inputs' shapes."""
    H, R, N = g.shape
    w1, b1, w2, _ = mlp
    dpsi, dden, dw1, db1, dw2, db2 = grads
    assert g.dtype == torch.float64 and all(t.dtype == torch.float64 for t in grads)
    assert dpsi.shape == psi.shape and dden.shape == den.shape == (R,)
    kernel().fire_grad_f32(
        *_ptrs(g, psi, den, qp, kp, w1, b1, w2), H, R, N, w1.shape[0], psi.shape[0] - 1,
        int(causal), *_ptrs(dw1, db1, dw2, db2, dpsi, dden), torch.get_num_threads(),
    )  # fmt: skip
