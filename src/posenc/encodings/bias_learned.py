"""Bias encodings with a learned kernel of the distance: KERPLE and FIRE.

Both are PositionBias subclasses (posenc.encodings.bias_base); the family's registry entries
are in posenc.encodings.bias. Keys after the query (j > i) get the mirrored distance |i - j|;
the causal mask removes them in a decoder.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from posenc.checks import check_int, check_max_len, limit_and_hint
from posenc.encodings.bias_base import DistanceBias, PositionBias, difference


def _inverse_softplus(x: torch.Tensor) -> torch.Tensor:
    return x + torch.log(-torch.expm1(-x))


class KERPLE(DistanceBias):
    """Kernelized relative positional embedding: a learned conditionally positive definite kernel.

    variant="log":   -r1_h * log(1 + r2_h * |i - j|)
    variant="power": -r1_h * |i - j| ** r2_h, 0 < r2_h <= 2

    Symmetric in i - j (keys after the query get the mirrored value). Positivity: r1 =
    softplus(raw) and, for log, r2 = softplus(raw); the power exponent is r2 = 2*sigmoid(raw).
    The paper's code instead clamps the raw values in place (min 0.01, exponent max 2) at every
    forward; the smooth maps keep gradients alive and never mutate parameters. Init as that code:
    log r1 ~ U(0, 2), r2 ~ U(0, 1); power r1 ~ U(0, 1), r2 ~ U(0, 2); all at least `eps`.
    """

    paper = "Chi et al. 2022"
    summary = "learned log or power distance kernel per head (conditionally positive definite)"
    trainable = True
    VARIANTS = ("log", "power")

    def __init__(
        self,
        *,
        heads=None,
        max_len=None,
        variant="log",
        eps=1e-2,
    ):
        super().__init__(heads)
        self.max_len = check_max_len(max_len)  # the hard limit
        if variant not in self.VARIANTS:
            raise ValueError(f"variant must be one of {self.VARIANTS}, got {variant!r}")
        if not 0 < eps < 1:
            raise ValueError(f"eps must be in (0, 1), got {eps}")
        self.variant = variant
        H = self.heads
        if variant == "log":
            r1 = (torch.rand(H) * 2).clamp(min=eps)
            r2 = torch.rand(H).clamp(min=eps)
            self.r2_raw = nn.Parameter(_inverse_softplus(r2))
        else:
            r1 = torch.rand(H).clamp(min=eps)
            r2 = (torch.rand(H) * 2).clamp(min=eps, max=2 - eps)
            self.r2_raw = nn.Parameter(torch.logit(r2 / 2))
        self.r1_raw = nn.Parameter(_inverse_softplus(r1))  # [H]

    @property
    def r1(self) -> torch.Tensor:
        """Positive scale per head [H]."""
        return F.softplus(self.r1_raw)

    @property
    def r2(self) -> torch.Tensor:
        """Positive rate (log) or exponent in (0, 2) (power) per head [H]."""
        if self.variant == "log":
            return F.softplus(self.r2_raw)
        return 2 * torch.sigmoid(self.r2_raw)

    def _params(self):
        return self.r1, self.r2

    def _value(self, qp, kp, h, params):
        r1, r2 = params
        dist = difference(qp, kp).abs()
        if self.variant == "log":
            return 0.0 - r1[h] * torch.log1p(r2[h] * dist)
        return 0.0 - r1[h] * dist.pow(r2[h])

    def extra_repr(self) -> str:
        return f"heads={self.heads}, variant={self.variant!r}"


class FIRE(PositionBias):
    """Functional interpolation: b(i, j) = MLP(psi(i - j) / psi(max(i, L))), psi(x) = log(c*x + 1).

    MLP: Linear(1, 32) - ReLU - Linear(32, heads), as in the paper. c (init 0.1) is learned;
    L = |s * L0| with a learned multiplier s (init 1), as in the paper's code; L0 = `train_len`
    when given, else the reference's 512, which would leave every
    position of a short training run below the threshold. psi uses |c*x| and the denominator
    gets `eps`, as in that code. Keys after the query (j > i) get psi(|i - j|), the mirrored
    distance over the same normalizer. Depends on i itself (not only i - j): not shift-invariant.
    Computed hidden unit by hidden unit, the same way in bias() and score_mod().
    """

    provides = PositionBias.provides | {"distance"}  # below the threshold L
    paper = "Li et al. 2023"
    summary = "learned MLP of log-scaled relative distance, normalized by the query position"
    trainable = True

    def __init__(
        self,
        *,
        heads=None,
        max_len=None,
        train_len=None,
        mlp_width=32,
        init_c=0.1,
        eps=1e-6,
    ):
        super().__init__(heads)
        self.max_len, train_len = limit_and_hint(max_len, train_len)  # hard limit, hint
        check_int("mlp_width", mlp_width, low=1)
        self.train_len = train_len
        self.init_L = float(train_len if train_len is not None else 512)
        self.eps = eps
        self.mlp = nn.Sequential(nn.Linear(1, mlp_width), nn.ReLU(), nn.Linear(mlp_width, heads))
        self.c = nn.Parameter(torch.tensor(float(init_c)))
        self.L_multiplier = nn.Parameter(torch.tensor(1.0))

    @property
    def threshold(self) -> torch.Tensor:
        """L, the position below which the normalizer stays psi(L)."""
        return (self.L_multiplier * self.init_L).abs()

    def _params(self):
        first, last = self.mlp[0], self.mlp[2]
        return self.c, self.threshold, first.weight[:, 0], first.bias, last.weight, last.bias

    def _value(self, qp, kp, h, params):
        c, L, w1, b1, w2, b2 = params
        num = torch.log((c * difference(qp, kp)).abs() + 1)
        den = torch.log((c * torch.maximum(qp.float(), L)).abs() + 1) + self.eps
        x = num / den
        out = b2[h]
        for unit in range(w1.shape[0]):  # MLP unrolled: no reductions, so FlexAttention compiles it
            out = out + w2[h, unit] * torch.relu(w1[unit] * x + b1[unit])
        return out

    def distance_bias(self, distances, q_pos):
        """Below the threshold (every query position < L) the normalizer is psi(L): a function of
        the distance alone, the MLP evaluated once per distinct distance (its sum over hidden
        units as a matmul: equal to bias() up to float rounding); None otherwise."""
        c, L, w1, b1, w2, b2 = self._params()
        if not bool(q_pos.max().float() < L):
            return None
        num = torch.log((c * distances.float()).abs() + 1)  # [N], float32 as in _value
        den = torch.log((c * L.float()).abs() + 1) + self.eps
        hidden = torch.relu((num / den).unsqueeze(-1) * w1.float() + b1.float())  # [N, units]
        return (hidden @ w2.float().t() + b2.float()).t()  # [H, N]

    def extra_repr(self) -> str:
        return f"heads={self.heads}, init_L={self.init_L:g}"
