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


def fire_inputs(H, R, N, U, seed):
    """Random FIRE tables: psi over |distances|, per-row den, MLP weights (some w1 = 0)."""
    g = torch.Generator().manual_seed(seed)
    qp, kp = torch.randint(0, 30, (R,), generator=g), torch.randint(0, 30, (N,), generator=g)
    span = int((qp[:, None] - kp[None]).abs().max())
    psi = torch.rand(span + 1, generator=g) * 3
    den = torch.rand(R, generator=g) + 0.5
    w1, b1 = torch.randn(U, generator=g), torch.randn(U, generator=g)
    w1[::5] = 0  # units that never turn: constant
    w2, b2 = torch.randn(H, U, generator=g), torch.randn(H, generator=g)
    return qp, kp, psi, den, (w1, b1, w2, b2)


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("H, R, N, U", [(3, 4, 37, 8), (2, 1, 5, 32), (1, 6, 16, 1)])
def test_fire_bias_and_its_gradient_equal_torch(H, R, N, U, causal):
    """fire_bias = the MLP of psi[|qp - kp|] / den; fire_grad = autograd of the same."""
    if cpu_bias.kernel() is None:
        pytest.skip(f"no C compiler: {cpu_bias.BROKEN}")
    from posenc.functional import relu_mlp_pieces

    qp, kp, psi, den, (w1, b1, w2, b2) = fire_inputs(H, R, N, U, H * R * N + U)
    z, A, Bp = relu_mlp_pieces(w1, b1, w2, b2)
    leaves = [t.clone().requires_grad_() for t in (psi, den, A, Bp)]
    x = leaves[0][(qp[:, None] - kp[None]).abs()] / leaves[1][:, None]  # [R, N]
    hidden = torch.relu(x[..., None] * w1 + b1)  # [R, N, U]
    mlp = (hidden @ w2.t() + b2).permute(2, 0, 1)  # [H, R, N]
    masked = (kp[None] > qp[:, None]).expand(H, R, N) if causal else torch.zeros(H, R, N).bool()
    out = torch.empty(H, R, N)
    cpu_bias.fire_bias(out, psi, den, qp, kp, (z, A, Bp), causal, -1e30)
    torch.testing.assert_close(out[~masked], mlp[~masked], atol=1e-5, rtol=1e-5)
    assert (out[masked] == -1e30).all()
    # the gradient through the pieces: A[h, k] * x + B[h, k] with k = #{z < x}
    k = torch.searchsorted(z, x.detach(), side="left")  # [R, N]
    pieces = leaves[2][:, k] * x + leaves[3][:, k]  # [H, R, N]
    g = torch.randn(H, R, N).masked_fill(masked, 0)
    want = torch.autograd.grad(pieces, leaves, g)
    grads = [torch.zeros(t.shape, dtype=torch.float64) for t in leaves]
    cpu_bias.fire_grad(g, psi, den, qp, kp, (z, A, Bp), causal, grads)
    for got, w in zip(grads, want, strict=True):
        torch.testing.assert_close(got.float(), w, atol=1e-4, rtol=1e-4)
