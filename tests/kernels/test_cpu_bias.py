"""The C kernel of the distance-bias gradient (posenc.kernels.cpu_bias) against the same sums
written in torch: dS = P * (dP - D), P = exp(S * scale + bias - lse), summed along r + t."""

from __future__ import annotations

import pytest
import torch

from posenc.kernels import cpu_bias


@pytest.mark.parametrize("write", [False, True])
@pytest.mark.parametrize("B, H, R, N, off", [(1, 3, 4, 7, 0), (2, 2, 5, 3, 6), (1, 1, 1, 1, 2)])
def test_bias_grad_equals_torch(B, H, R, N, off, write):
    if cpu_bias.kernel() is None:
        pytest.skip(f"no C compiler: {cpu_bias.BROKEN}")
    torch.manual_seed(R * N + off)
    L = off + R + N + 2
    S, dP = torch.randn(B, H, R, N), torch.randn(B, H, R, N)
    vec, lse, D = torch.randn(H, L), torch.randn(B, H, R) + 3, torch.randn(B, H, R)
    lse_t = torch.randn(H, B, R).transpose(0, 1)  # strided: heads outermost
    lse_t.copy_(lse)
    acc = torch.randn(H, L, dtype=torch.float64)
    scale = 0.3
    idx = off + torch.arange(R)[:, None] + torch.arange(N)  # [R, N]: r + t + off
    P = torch.exp(S * scale + vec[:, idx] - lse[..., None])  # [B, H, R, N]
    dS = P * (dP - D[..., None])
    want = acc.clone()
    want.index_add_(1, idx.flatten(), dS.sum(0).flatten(1).double())
    cpu_bias.bias_grad(S, dP, vec, lse_t, D, acc, off, scale, write=write)
    torch.testing.assert_close(acc, want, atol=1e-5, rtol=1e-5)
    if write:
        torch.testing.assert_close(S, P, atol=1e-6, rtol=1e-5)
        torch.testing.assert_close(dP, dS, atol=1e-6, rtol=1e-5)
