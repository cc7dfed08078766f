"""The C kernels of the distance-bias backward and of FIRE's bias, loaded with ctypes (built
once by posenc.kernels.cpu_rope.build_library; float32 in, float64 accumulators; never
-ffast-math, which would change the whole process's float state). A leaf module.

bias_grad: the distance backend reads vec [H, L] as the Hankel view bias[h, r, t] =
vec[h, off + r + t] (keys reversed); from S = q·kᵀ and dP = dO·vᵀ of one tile it makes
P = exp(S * scale + bias - lse) and dS = P * (dP - D) and adds dvec[h, m] = sum over
r + t = m - off of dS[b, h, r, t].
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
#include <float.h>

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
   the Hankel view of a distance vector [H, L] (bh = L), br = N for a dense tile (bh = R * N);
   acc NULL: no sums. Heads in parallel: a head's rows of every batch element add into its own
   acc row, so no two threads write the same address. With `write`, S is
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
                double* a = acc ? acc + h * bh + off + r * br : 0;
                float l = lse[b * lb + h * lh + r], d = D[b * db + h * dh + r];
                if (write) {
                    #pragma omp simd
                    for (int64_t t = 0; t < N; t++) {
                        float p = exp_f(s[t] * scale + bias[t] - l), ds = p * (dp[t] - d);
                        s[t] = p;
                        dp[t] = fabsf(ds) < FLT_MIN ? 0.0f : ds;  /* no subnormal to the matmuls */
                    }
                    if (a)
                        for (int64_t t = 0; t < N; t++) a[t] += (double)dp[t];
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
/* FIRE's bias (posenc.encodings.bias.FIRE) for query rows at qp [R] and keys at kp [N]. Its
   MLP of one input, Linear(1, U) - ReLU - Linear(U, H), is linear between the U points where a
   hidden unit turns on or off: with those points sorted, z [K], and k(x) = #{z < x},
   MLP_h(x) = A[h, k(x)] * x + B[h, k(x)] (posenc.functional.relu_mlp_pieces). Here
   out[h, r, t] = A[h, k] * x + B[h, k], x = psi[|qp[r] - kp[t]|] / den[r]; `masked` where
   causal and kp[t] > qp[r]. A chunk of CH keys whose x fall in one piece (nearly all: x is
   monotone in the distance) is one vector multiply-add per head. A, B: [H, K + 1];
   out [H, R, N] contiguous; rows in parallel. */
#define CH 16
static inline int64_t absd(int64_t d) { return d < 0 ? -d : d; }

static inline int64_t piece(const float* z, int64_t K, float x) {  /* #{z < x}, z sorted */
    int64_t lo = 0, hi = K;
    while (lo < hi) {
        int64_t mid = (lo + hi) / 2;
        if (z[mid] < x) lo = mid + 1; else hi = mid;
    }
    return lo;
}

/* x of a chunk of keys t0 .. t0 + n - 1 of row r (lanes past n: distance 0); ok: allowed;
   returns the piece of every lane when one piece holds them all, else -1 (kk filled). */
static inline int64_t chunk_x(float* x, int* ok, int64_t* a, int64_t* kk, const float* psi,
                              float den, int64_t q, const int64_t* kp, int64_t n, int causal,
                              const float* z, int64_t K) {
    float lo = 3.4e38f, hi = -3.4e38f;
    for (int64_t t = 0; t < CH; t++) {
        int64_t d = t < n ? q - kp[t] : 0;
        ok[t] = t < n && !(causal && d < 0);
        a[t] = absd(d);
        x[t] = psi[a[t]] / den;
        lo = x[t] < lo ? x[t] : lo;
        hi = x[t] > hi ? x[t] : hi;
    }
    int64_t k = piece(z, K, lo);
    if (k == K || z[k] >= hi) return k;  /* no breakpoint in [lo, hi) */
    for (int64_t t = 0; t < CH; t++) kk[t] = piece(z, K, x[t]);
    return -1;
}

void fire_bias_f32(float* out, const float* psi, const float* den, const int64_t* qp,
                   const int64_t* kp, const float* z, const float* A, const float* B,
                   int64_t H, int64_t R, int64_t N, int64_t K, int causal, float masked,
                   int nthreads) {
    #pragma omp parallel for num_threads(nthreads) schedule(static) if(R * N * H > 65536)
    for (int64_t r = 0; r < R; r++) {
        float x[CH];
        int ok[CH];
        int64_t a[CH], kk[CH];
        for (int64_t t0 = 0; t0 < N; t0 += CH) {
            int64_t n = N - t0 < CH ? N - t0 : CH;
            int64_t k = chunk_x(x, ok, a, kk, psi, den[r], qp[r], kp + t0, n, causal, z, K);
            for (int64_t h = 0; h < H; h++) {
                float* o = out + (h * R + r) * N + t0;
                const float *Ah = A + h * (K + 1), *Bh = B + h * (K + 1);
                if (k >= 0 && n == CH) {
                    float s = Ah[k], c = Bh[k];
                    for (int64_t t = 0; t < CH; t++) o[t] = ok[t] ? s * x[t] + c : masked;
                } else {
                    for (int64_t t = 0; t < n; t++) {
                        int64_t j = k >= 0 ? k : kk[t];
                        o[t] = ok[t] ? Ah[j] * x[t] + Bh[j] : masked;
                    }
                }
            }
        }
    }
}

/* The gradient of fire_bias_f32 from g [H, R, N] (float32: the loss's gradient at each bias
   value): adds into dA, dB [H, K + 1], dpsi [span + 1] (at |qp - kp|) and dden [R], all
   double. Rows in parallel; each thread sums into its own copy of dA, dB, dpsi (float lanes
   within a row, double across rows), added at the end. */
void fire_grad_f32(const float* g, const float* psi, const float* den, const int64_t* qp,
                   const int64_t* kp, const float* z, const float* A, int64_t H, int64_t R,
                   int64_t N, int64_t K, int64_t span, int causal, double* dA, double* dB,
                   double* dpsi, double* dden, int nthreads) {
    int64_t K1 = K + 1, P = 2 * H * K1 + span + 1;
    #pragma omp parallel num_threads(nthreads) if(R * N * H > 65536)
    {
        double* mine = calloc(P, sizeof(double));
        double *m_A = mine, *m_B = mine + H * K1, *m_psi = m_B + H * K1;
        float (*lA)[CH] = malloc(sizeof(float) * CH * 2 * H * K1);
        float (*lB)[CH] = lA + H * K1;
        #pragma omp for schedule(static)
        for (int64_t r = 0; r < R; r++) {
            float x[CH], dx[CH];
            int ok[CH];
            int64_t a[CH], kk[CH];
            double dd = 0.0;
            memset(lA, 0, sizeof(float) * CH * 2 * H * K1);
            for (int64_t t0 = 0; t0 < N; t0 += CH) {
                int64_t n = N - t0 < CH ? N - t0 : CH;
                int64_t k = chunk_x(x, ok, a, kk, psi, den[r], qp[r], kp + t0, n, causal, z, K);
                for (int64_t t = 0; t < CH; t++) dx[t] = 0.0f;
                for (int64_t h = 0; h < H; h++) {
                    const float* gr = g + (h * R + r) * N + t0;
                    const float* Ah = A + h * K1;
                    if (k >= 0 && n == CH) {
                        float s = Ah[k], *pa = lA[h * K1 + k], *pb = lB[h * K1 + k];
                        for (int64_t t = 0; t < CH; t++) {
                            float v = ok[t] ? gr[t] : 0.0f;
                            pa[t] += v * x[t];
                            pb[t] += v;
                            dx[t] += v * s;
                        }
                    } else {
                        for (int64_t t = 0; t < n; t++) {
                            if (!ok[t]) continue;
                            int64_t j = k >= 0 ? k : kk[t];
                            lA[h * K1 + j][t] += gr[t] * x[t];
                            lB[h * K1 + j][t] += gr[t];
                            dx[t] += gr[t] * Ah[j];
                        }
                    }
                }
                for (int64_t t = 0; t < n; t++) {
                    if (!ok[t]) continue;
                    m_psi[a[t]] += (double)dx[t] / den[r];
                    dd -= (double)dx[t] * x[t] / den[r];
                }
            }
            dden[r] += dd;
            for (int64_t i = 0; i < H * K1; i++)
                for (int64_t t = 0; t < CH; t++) {
                    m_A[i] += lA[i][t];
                    m_B[i] += lB[i][t];
                }
        }
        #pragma omp critical
        {
            for (int64_t i = 0; i < H * K1; i++) { dA[i] += m_A[i]; dB[i] += m_B[i]; }
            for (int64_t i = 0; i <= span; i++) dpsi[i] += m_psi[i];
        }
        free(lA);
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
        i64, ptr, c_int = ctypes.c_int64, ctypes.c_void_p, ctypes.c_int
        lib.bias_grad_f32.restype = lib.fire_bias_f32.restype = lib.fire_grad_f32.restype = None
        lib.bias_grad_f32.argtypes = [*[ptr] * 6, *[i64] * 11, ctypes.c_float, c_int, c_int]
        lib.fire_bias_f32.argtypes = [*[ptr] * 8, *[i64] * 4, c_int, ctypes.c_float, c_int]
        lib.fire_grad_f32.argtypes = [*[ptr] * 7, *[i64] * 5, c_int, *[ptr] * 4, c_int]
        LIB = lib
    return LIB


def bias_grad(S, dP, vec, lse, D, acc, off: int, scale: float, write: bool = False) -> None:
    """acc[h, off + r + t] += sum over b of dS (module docstring); with `write`, S <- P, dP <-
    dS. S, dP [B, H, R, N], vec [H, L] (or a dense tile [H, R, N], off 0), float32 contiguous;
    lse, D [B, H, R], unit stride along R; acc float64 of vec's shape, or None: no sums."""
    B, H, R, N = S.shape
    assert S.is_contiguous() and dP.is_contiguous() and dP.shape == S.shape
    assert vec.is_contiguous() and (acc is None or acc.is_contiguous() and acc.shape == vec.shape)
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
        0 if acc is None else acc.data_ptr(), B, H, R, N, bh, br, off, *lse.stride()[:2],
        *D.stride()[:2], float(scale), int(write), torch.get_num_threads(),
    )  # fmt: skip


def _ptrs(*tensors) -> list[int]:
    assert all(t.is_contiguous() for t in tensors)
    return [t.data_ptr() for t in tensors]


def fire_bias(out, psi, den, qp, kp, pieces, causal: bool, masked: float) -> None:
    """out [H, R, N] <- FIRE's bias A[h, k] * x + B[h, k], x = psi[|qp[r] - kp[t]|] / den[r],
    k = #{z < x} (`masked` where causal and kp[t] > qp[r]). psi [span + 1], den [R] float32;
    qp [R], kp [N] int64; pieces = (z [K] sorted, A [H, K + 1], B [H, K + 1]) float32
    (posenc.functional.relu_mlp_pieces); all contiguous."""
    H, R, N = out.shape
    z, A, B = pieces
    assert out.dtype == psi.dtype == den.dtype == A.dtype == torch.float32 and den.shape == (R,)
    assert qp.dtype == kp.dtype == torch.int64 and qp.shape == (R,) and kp.shape == (N,)
    assert A.shape == B.shape == (H, z.shape[0] + 1)
    kernel().fire_bias_f32(
        *_ptrs(out, psi, den, qp, kp, z, A, B), H, R, N, z.shape[0], int(causal),
        float(masked), torch.get_num_threads(),
    )  # fmt: skip


def fire_grad(g, psi, den, qp, kp, pieces, causal: bool, grads) -> None:
    """Adds the gradient of fire_bias from g [H, R, N] (float32, the loss's gradient at each
    bias value) into grads = (dpsi, dden [R], dA, dB), float64 of the inputs' shapes."""
    H, R, N = g.shape
    z, A, _ = pieces
    dpsi, dden, dA, dB = grads
    assert g.dtype == torch.float32 and all(t.dtype == torch.float64 for t in grads)
    assert dpsi.shape == psi.shape and dden.shape == den.shape == (R,) and dA.shape == A.shape
    kernel().fire_grad_f32(
        *_ptrs(g, psi, den, qp, kp, z, A), H, R, N, z.shape[0], psi.shape[0] - 1, int(causal),
        *_ptrs(dA, dB, dpsi, dden), torch.get_num_threads(),
    )  # fmt: skip
