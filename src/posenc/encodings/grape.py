"""GRAPE, group representational position encoding (Zhang et al. 2026, ICLR, arXiv 2512.07805):
grape_m (multiplicative, rotary) and grape_a (additive, a bias), matched to the authors' code
(model-architectures/GRAPE). Not here: the contextual GRAPE-M and the path-integral GRAPE-AP,
whose rates read the layer input at the query's own position, which the hooks do not get.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from posenc.base import PositionalEncoding
from posenc.checks import check_bool, check_choice, check_float
from posenc.encodings.bias import DistanceBias, difference
from posenc.encodings.relative import check_qk, resolve_dims
from posenc.encodings.rotary import RotaryEncoding, set_per_head
from posenc.functional import alibi_slopes
from posenc.functional.absolute import sinusoidal_inv_freq
from posenc.functional.grape import grape_a_gates, grape_m_angles

ORIENTATIONS = ("grape", "rope")
GATES = ("query_key", "key", "query", "none")


class GrapeM(RotaryEncoding):
    """Multiplicative GRAPE with commuting generators (section 3.1, the authors'
    MSGRAPECommuting): pair (x_i, x_{i + R/2}) turns by exp(n w_i L_i),
    L_i = e_i e_{i+R/2}^T - e_{i+R/2} e_i^T. Frequencies w = exp(log_freq / log_freq_scale)
    start at RoPE's, stored times `log_freq_scale` (the authors' 16); `learnable` trains them,
    `per_head` gives each head its own. `orientation` "grape" is the authors' sign, "rope"
    RoPE's (posenc's rope at init).
    """

    paper = "Zhang et al. 2026 (GRAPE, ICLR, arXiv 2512.07805)"
    summary = "GRAPE-M: rotations exp(n w L) of commuting rank-2 generators, learned frequencies"
    provides = frozenset({"rotate", "angles"})

    def __init__(
        self,
        *,
        dim: int | None = None,
        heads: int | None = None,
        head_dim: int | None = None,
        max_len: int | None = None,
        base: float = 10000.0,
        layout: str = "half",
        rotary_dim: int | None = None,
        learnable: bool = True,
        per_head: bool = False,
        log_freq_scale: float = 16.0,
        orientation: str = "grape",
    ) -> None:
        super().__init__(dim, heads, head_dim, base, layout, rotary_dim, max_len)
        if self.head_dim is None and rotary_dim is None:
            raise ValueError("grape_m needs the head dim: pass head_dim= (or dim= and heads=)")
        self.learnable = self.trainable = check_bool("learnable", learnable)
        set_per_head(self, "grape_m", per_head, heads, "frequencies")
        self.log_freq_scale = check_float("log_freq_scale", log_freq_scale, gt=0)
        self.orientation = check_choice("orientation", orientation, ORIENTATIONS)
        self.sign = -1.0 if orientation == "grape" else 1.0
        r = self.rotary_dim()
        log_freq = sinusoidal_inv_freq(r, self.base).log() * self.log_freq_scale  # [R/2]
        if self.per_head:
            log_freq = log_freq.repeat(heads, 1)  # [H, R/2]
        self.log_freq = nn.Parameter(log_freq, requires_grad=self.learnable)

    def _apply(self, fn, recurse=True):
        """model.to(dtype) keeps log_freq float32, as the authors' (bfloat16 rounds it by 1/16)."""
        kept = self.log_freq.data
        super()._apply(fn, recurse)
        if self.log_freq.dtype != kept.dtype:  # a cast: the float32 values, moved
            self.log_freq.data = kept.to(self.log_freq.device)
        return self

    def freq(self) -> torch.Tensor:
        """The frequencies w [R/2] (or [H, R/2] per head), float32, > 0."""
        return torch.exp(self.log_freq.float() / self.log_freq_scale)

    def _angles(self, positions, r, dtype):
        """[(B,) T, R/2] (or [B or 1, H, T, R/2] per head), differentiable in the frequencies."""
        return grape_m_angles(positions, self.freq(), self.sign, dtype)

    def angles(self, positions):
        """Signed angles (the first head's with per_head): negative for "grape"."""
        positions = self.check_positions(positions)
        freq = self.freq().detach()
        return grape_m_angles(positions, freq[0] if self.per_head else freq, self.sign,
                              torch.float64)  # fmt: skip

    def extra_repr(self) -> str:
        return (
            super().extra_repr() + f", learnable={self.learnable}, per_head={self.per_head}, "
            f"orientation={self.orientation!r}"
        )


class GrapeA(DistanceBias):
    """Additive GRAPE (section 4, eq. 4.6; the authors' *GatedAdditiveBias): bias(i, j) =
    (j - i) w_h m_h (softplus(v_h . q_i / sqrt(Dh)) + softplus(u_h . k_j / sqrt(Dh))), m_h
    ALiBi's slopes, w_h = softplus(raw) learned (init `omega_init`), u_h, v_h learned
    probes ~ N(0, 1/Dh), L2-normalized. `gate`: "query_key", "key", "query" (one rate), or
    "none" (rate 1: ALiBi with a learned w_h, a bias of positions alone). Causal only.
    """

    family = "bias"
    paper = "Zhang et al. 2026 (GRAPE, ICLR, arXiv 2512.07805)"
    summary = "GRAPE-A: unipotent lift, bias linear in offset, slope gated by query and key"
    trainable = True
    bidirectional = False  # a signed offset: the decoder form only

    def __init__(
        self,
        *,
        dim: int | None = None,
        heads: int | None = None,
        head_dim: int | None = None,
        max_len: int | None = None,
        gate: str = "query_key",
        omega_init: float = 1.0,
    ) -> None:
        super().__init__(heads, max_len)
        self.gate = check_choice("gate", gate, GATES)
        check_float("omega_init", omega_init, gt=0)
        self.omega_init = float(omega_init)
        raw = math.log(math.expm1(self.omega_init))  # softplus(raw) = omega_init
        self.omega = nn.Parameter(torch.full((self.heads,), raw))  # [H]
        self.head_dim = None
        if gate != "none":
            _, _, self.head_dim = resolve_dims("grape_a", dim, heads, head_dim, need_heads=True)
            std = self.head_dim**-0.5
            if gate in ("key", "query_key"):
                self.u = nn.Parameter(torch.randn(self.heads, self.head_dim) * std)  # [H, Dh]
            if gate in ("query", "query_key"):
                self.v = nn.Parameter(torch.randn(self.heads, self.head_dim) * std)  # [H, Dh]
            self.provides = frozenset({"bias"})  # the rate reads q / k: no score_mod
        self.reset_buffers()

    def reset_buffers(self) -> None:
        self.set_buffer("slopes", alibi_slopes(self.heads))  # [H]

    def _params(self) -> tuple:
        return (F.softplus(self.omega.float()) * self.slopes.float(),)  # w_h m_h [H]

    def _value(self, qp, kp, h, params):
        return 0.0 - difference(qp, kp) * params[0][h]  # (j - i) w_h m_h; +0.0 on the diagonal

    def rates(self, q: torch.Tensor, k: torch.Tensor) -> torch.Tensor | None:
        """The gate sum [B, H, Tq or 1, Tk or 1] float32; None for gate="none"."""
        if self.gate == "none":
            return None
        rate = 0.0
        if self.gate in ("query", "query_key"):
            rate = rate + grape_a_gates(q, F.normalize(self.v.float(), dim=-1, eps=1e-6))[..., None]
        if self.gate in ("key", "query_key"):
            rate = (
                rate + grape_a_gates(k, F.normalize(self.u.float(), dim=-1, eps=1e-6))[:, :, None]
            )
        return rate

    def bias(self, q, k, q_pos, k_pos) -> torch.Tensor:
        if self.gate != "none":
            check_qk(self, q, k)
        qp, kp, h = self._grids(q, k, q_pos, k_pos)
        value = self._value(qp, kp, h, self._params())  # [b, H, Tq, Tk] float32
        rate = self.rates(q, k)
        return (value if rate is None else value * rate).to(q.dtype)

    def score_mod(self, q_pos, k_pos):  # gate="none" only: the rates read q and k
        return super().score_mod(q_pos, k_pos) if self.gate == "none" else None

    def distance_bias(self, distances, q_pos):
        return super().distance_bias(distances, q_pos) if self.gate == "none" else None

    def extra_repr(self) -> str:
        return f"heads={self.heads}, head_dim={self.head_dim}, gate={self.gate!r}"


ENCODINGS: dict[str, type[PositionalEncoding]] = {"grape_m": GrapeM, "grape_a": GrapeA}
