"""Bias encodings: a score added to the attention logits that depends on positions only
(alibi, t5, kerple, fire, sandwich). Causal forms define values for keys after the query too
(j > i), which the causal mask removes; each class says which.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from posenc.base import PositionalEncoding
from posenc.checks import check_bool, check_int, position_at
from posenc.functional import (
    alibi_slopes,
    check_t5_buckets,
    relu_mlp_pieces,
    sandwich_curve,
    t5_bucket,
)


def difference(qp: torch.Tensor, kp: torch.Tensor) -> torch.Tensor:
    """i - j as float32, subtracted exactly first (int64, or float64 for float positions)."""
    if qp.is_floating_point() or kp.is_floating_point():
        return (qp.double() - kp.double()).float()
    return (qp - kp).float()


class PositionBias(PositionalEncoding):
    """One elementwise `_value(qp, kp, h, params)` of query positions, key positions and head
    indices, which bias() and score_mod() both evaluate: the same numbers by construction."""

    family = "bias"
    provides = frozenset({"bias", "score_mod"})

    def __init__(self, heads: int | None, max_len: int | None = None):
        super().__init__(max_len)
        name = type(self).__name__
        if heads is None:
            raise ValueError(f"{name} needs heads= (the number of attention heads, >= 1)")
        self.heads = check_int("heads", heads, low=1)

    def _params(self) -> tuple:
        """Tensors computed once per call (e.g. positive parameters), passed to _value."""
        return ()

    def _value(self, qp: torch.Tensor, kp: torch.Tensor, h: torch.Tensor, params: tuple):
        """Elementwise bias for query positions qp, key positions kp, head indices h."""
        raise NotImplementedError

    def _positions(
        self, pos: torch.Tensor, name: str, length: int | None = None, batch: int | None = None
    ) -> torch.Tensor:
        pos = self.check_positions(pos, name=name, integer=self.integer_positions)
        if pos.dim() not in (1, 2):
            raise ValueError(f"{name} must be [T] or [B, T], got shape {tuple(pos.shape)}")
        if length is not None and pos.shape[-1] != length:
            raise ValueError(
                f"{name} has {pos.shape[-1]} positions but the sequence has {length} tokens"
            )
        if batch is not None and pos.dim() == 2 and pos.shape[0] not in (1, batch):
            raise ValueError(
                f"{name} has batch size {pos.shape[0]}, expected {batch}"
                + (" or 1 (broadcast)" if batch != 1 else "")
            )
        if self.integer_positions and pos.is_floating_point():
            pos = pos.long()
        return pos

    def _grids(self, q, k, q_pos, k_pos) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Validated qp [b, 1, Tq, 1], kp [b, 1, 1, Tk], h [1, H, 1, 1] on q's device."""
        if q.dim() != 4 or k.dim() != 4:
            raise ValueError(
                f"q and k must be [B, H, T, Dh], got {tuple(q.shape)} and {tuple(k.shape)}"
            )
        if q.shape[1] != self.heads:
            raise ValueError(
                f"this {type(self).__name__} encoding was built for heads={self.heads}, "
                f"but q has {q.shape[1]} heads"
            )
        q_pos = self._positions(q_pos, "q_pos", q.shape[2], q.shape[0]).to(q.device)
        k_pos = self._positions(k_pos, "k_pos", k.shape[2], k.shape[0]).to(q.device)
        qp = q_pos.reshape(-1, 1, q_pos.shape[-1], 1)
        kp = k_pos.reshape(-1, 1, 1, k_pos.shape[-1])
        h = torch.arange(self.heads, device=q.device).view(1, -1, 1, 1)
        return qp, kp, h

    def bias(self, q, k, q_pos, k_pos) -> torch.Tensor:
        """[1 or B, H, Tq, Tk]; q and k only supply shapes, dtype and device."""
        qp, kp, h = self._grids(q, k, q_pos, k_pos)
        return self._value(qp, kp, h, self._params()).to(q.dtype)

    def _score_mod_positions(self, q_pos, k_pos) -> tuple[torch.Tensor, torch.Tensor]:
        """Validated positions for score_mod; [B, T] batches must match or be 1 (broadcast)."""
        q_pos = self._positions(q_pos, "q_pos")
        k_pos = self._positions(k_pos, "k_pos")
        qb, kb = q_pos.shape[0], k_pos.shape[0]
        if q_pos.dim() == 2 and k_pos.dim() == 2 and qb != kb and 1 not in (qb, kb):
            raise ValueError(
                f"q_pos and k_pos batch sizes differ: {qb} and {kb} (allowed: equal, or 1)"
            )
        return q_pos, k_pos

    def score_mod(self, q_pos, k_pos):
        q_pos, k_pos = self._score_mod_positions(q_pos, k_pos)
        q_at, k_at = position_at(q_pos), position_at(k_pos)
        params = self._score_mod_params(q_pos, k_pos)

        def score_mod(score, b, h, q_idx, kv_idx):
            value = self._value(q_at(b, q_idx), k_at(b, kv_idx), h, params)
            return score + value.to(score.dtype)

        return score_mod

    def _score_mod_params(self, q_pos, k_pos) -> tuple:
        return self._params()  # Sandwich's depend on the positions' span

    def extra_repr(self) -> str:
        return f"heads={self.heads}"


class DistanceBias(PositionBias):
    """A bias of (head, q_pos - k_pos) alone: _value at key position 0 is the `distance` form."""

    provides = PositionBias.provides | {"distance"}

    def distance_bias(self, distances, q_pos):
        return self._at_distances(distances, self._params())

    def _at_distances(self, distances: torch.Tensor, params: tuple) -> torch.Tensor:
        d = distances.view(1, -1)  # [1, N] as query positions, keys at 0
        h = torch.arange(self.heads, device=d.device).view(-1, 1)  # [H, 1]
        return self._value(d, torch.zeros_like(d), h, params)  # [H, N]


def _inverse_softplus(x: torch.Tensor) -> torch.Tensor:
    return x + torch.log(-torch.expm1(-x))


class KERPLE(DistanceBias):
    """Kernelized relative positional embedding: a learned conditionally positive definite kernel,
    -r1_h * log(1 + r2_h * |i - j|) ("log") or -r1_h * |i - j| ** r2_h, 0 < r2_h <= 2 ("power").

    r1 = softplus(raw), r2 = softplus(raw) (log) or 2 sigmoid(raw) (power), where the paper's
    code clamps the raw values in place (the smooth maps keep gradients alive). Init as that
    code: log r1 ~ U(0, 2), r2 ~ U(0, 1); power r1 ~ U(0, 1), r2 ~ U(0, 2); all >= `eps`.
    """

    paper = "Chi et al. 2022"
    summary = "learned log or power distance kernel per head (conditionally positive definite)"
    trainable = True
    VARIANTS = ("log", "power")

    def __init__(self, *, heads=None, max_len=None, variant="log", eps=1e-2):
        super().__init__(heads, max_len)
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
        return F.softplus(self.r1_raw)  # [H] > 0

    @property
    def r2(self) -> torch.Tensor:
        """[H]: a rate > 0 (log) or an exponent in (0, 2) (power)."""
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

    MLP: Linear(1, 32) - ReLU - Linear(32, heads), as in the paper; c (init 0.1) learned;
    L = |s * L0| with a learned s (init 1), L0 = `train_len`, else the reference's 512. psi
    uses |c*x| and the denominator gets `eps`, as that code. Keys after the query get the
    mirrored distance. Not shift-invariant (depends on i itself).
    """

    provides = PositionBias.provides | {"distance"}  # below the threshold L
    paper = "Li et al. 2023"
    summary = "learned MLP of log-scaled relative distance, normalized by the query position"
    trainable = True

    def __init__(
        self, *, heads=None, max_len=None, train_len=None, mlp_width=32, init_c=0.1, eps=1e-6
    ):
        super().__init__(heads, max_len)
        if train_len is not None:
            check_int("train_len", train_len, low=1)
        check_int("mlp_width", mlp_width, low=1)
        self.train_len = train_len
        self.init_L = float(train_len if train_len is not None else 512)
        self.eps = eps
        self.mlp = nn.Sequential(nn.Linear(1, mlp_width), nn.ReLU(), nn.Linear(mlp_width, heads))
        self.c = nn.Parameter(torch.tensor(float(init_c)))
        self.L_multiplier = nn.Parameter(torch.tensor(1.0))

    @property
    def threshold(self) -> torch.Tensor:  # L: below it the normalizer stays psi(L)
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

    def mlp_form(self, q_pos: torch.Tensor, span: int):
        """The bias as MLP_h(psi[|i - j|] / den[i]) for the fast path (posenc.attention.fast_bias):
        psi [span + 1] at distances 0..span and den [Tq] at query positions q_pos [Tq] (float32,
        _value's operations), and the MLP as its linear pieces (z, A, B) (relu_mlp_pieces)."""
        c, L, w1, b1, w2, b2 = self._params()
        dist = torch.arange(span + 1, device=q_pos.device)
        psi = torch.log((c * dist.float()).abs() + 1)
        den = torch.log((c * torch.maximum(q_pos.float(), L)).abs() + 1) + self.eps
        return psi, den, relu_mlp_pieces(w1, b1, w2, b2)

    def extra_repr(self) -> str:
        return f"heads={self.heads}, init_L={self.init_L:g}"


class ALiBi(DistanceBias):
    """Attention with Linear Biases: bias = -m_h * (i - j), slopes m_h as in BLOOM.

    The causal form (default) continues linearly past the query: BLOOM's m_h * j up to a
    per-query constant, so the softmax matches BLOOM even without a mask.
    `bidirectional=True`: the symmetric -m_h * |i - j| (for encoders).
    """

    paper = "Press et al. 2022"
    summary = "linear distance penalty per head, fixed geometric slopes (BLOOM, MPT)"

    def __init__(self, *, heads=None, max_len=None, bidirectional=False):
        super().__init__(heads, max_len)
        self.bidirectional = check_bool("bidirectional", bidirectional)
        self.reset_buffers()

    def reset_buffers(self) -> None:
        self.set_buffer("slopes", alibi_slopes(self.heads))  # [H]

    def _value(self, qp, kp, h, params):
        rel = difference(qp, kp)
        if self.bidirectional:
            rel = rel.abs()
        return 0.0 - self.slopes[h] * rel  # 0.0 - x: +0.0 on the diagonal, not -0.0

    def extra_repr(self) -> str:
        return f"heads={self.heads}, bidirectional={self.bidirectional}"


class T5Bias(DistanceBias):
    """T5's relative attention bias: a learned scalar per (bucket, head), buckets of key - query.

    `bidirectional=False` (default, decoders) gives keys after the query bucket 0, as T5's
    decoder. num_buckets, max_distance: T5's 32 and 128, or, with `train_len`, scaled to it
    (so no bucket is left untrained). Init normal(0, dim**-0.5) as transformers' T5 when `dim`
    is given, else normal(0, 0.02).
    """

    paper = "Raffel et al. 2020"
    summary = "learned scalar bias per head over log-spaced relative-distance buckets"
    integer_positions = True
    trainable = True

    def __init__(
        self,
        *,
        dim=None,
        heads=None,
        max_len=None,
        train_len=None,
        bidirectional=False,
        num_buckets=None,
        max_distance=None,
    ):
        super().__init__(heads, max_len)
        if dim is not None:
            check_int("dim", dim, low=1)
        if train_len is not None:
            check_int("train_len", train_len, low=1)
        if num_buckets is None:  # scaled with train_len
            num_buckets = 32 if train_len is None else max(4, min(32, train_len // 2 * 2))
        check_t5_buckets(bidirectional, num_buckets, 1 << 62)  # types and num_buckets first
        if max_distance is None:
            if train_len is None:
                max_distance = 128
            else:
                per_direction = num_buckets // 2 if bidirectional else num_buckets
                max_distance = max(train_len, per_direction // 2 + 1)
        check_t5_buckets(bidirectional, num_buckets, max_distance)
        self.bidirectional = bidirectional
        self.num_buckets = num_buckets
        self.max_distance = max_distance
        self.train_len = train_len
        self.relative_attention_bias = nn.Embedding(num_buckets, self.heads)  # [buckets, H]
        std = dim**-0.5 if dim else 0.02
        nn.init.normal_(self.relative_attention_bias.weight, std=std)

    def _value(self, qp, kp, h, params):
        bucket = t5_bucket(kp - qp, self.bidirectional, self.num_buckets, self.max_distance)
        return self.relative_attention_bias.weight[bucket, h]

    def extra_repr(self) -> str:
        return (
            f"heads={self.heads}, bidirectional={self.bidirectional}, "
            f"num_buckets={self.num_buckets}, max_distance={self.max_distance}"
        )


class Sandwich(DistanceBias):
    """Sandwich: the inner product of sinusoidal embeddings as a parameter-free bias.

    bias_h(i, j) = (sum_{k=1..d'/2} cos((i - j) / 10000^(2k/d')) - d'/2) / (8h/H), h = 1..H,
    d' = `sandwich_dim` (128, the paper's), as NeMo and attention-gym. Computed in float64:
    integer positions read a table over |i - j|, float positions sum the cosines directly.
    """

    paper = "Chi et al. 2023"
    summary = "parameter-free sinusoidal inner product p_i.p_j, per-head compression 8h/H"
    _max_table = 1 << 20  # longest |i - j| table; farther apart positions sum the cosines

    def __init__(self, *, heads=None, max_len=None, sandwich_dim=128):
        super().__init__(heads, max_len)
        sandwich_curve(torch.zeros(1), sandwich_dim)  # validates sandwich_dim
        self.sandwich_dim = sandwich_dim
        self.reset_buffers()

    def reset_buffers(self) -> None:
        ratio = 8.0 * torch.arange(1, self.heads + 1, dtype=torch.float64) / self.heads
        self.set_buffer("inv_ratio", (1.0 / ratio).float())  # [H]

    def _table(self, span: int, device) -> torch.Tensor | None:
        """The curve at |i - j| = 0..span, float32 [span + 1]; None where that table is too long."""
        if span > self._max_table:
            return None
        return sandwich_curve(torch.arange(span + 1, device=device), self.sandwich_dim).float()

    def _value(self, qp, kp, h, params):
        (table,) = params
        if table is None:  # float positions, or integers too far apart for a table
            curve = sandwich_curve(qp.double() - kp.double(), self.sandwich_dim).float()
        else:
            curve = table[(qp - kp).abs()]
        return curve * self.inv_ratio[h]

    def bias(self, q, k, q_pos, k_pos) -> torch.Tensor:
        qp, kp, h = self._grids(q, k, q_pos, k_pos)
        table = None
        if not (qp.is_floating_point() or kp.is_floating_point() or qp.is_meta):
            table = self._table((qp - kp).abs().max().item(), q.device)
        return self._value(qp, kp, h, (table,)).to(q.dtype)

    def distance_bias(self, distances, q_pos):
        table = self._table(distances.abs().max().item(), distances.device)
        return None if table is None else self._at_distances(distances, (table,))

    def _score_mod_params(self, q_pos, k_pos) -> tuple:
        if q_pos.is_floating_point() or k_pos.is_floating_point():
            return (None,)
        lo = min(q_pos.min().item(), k_pos.min().item())
        hi = max(q_pos.max().item(), k_pos.max().item())
        return (self._table(hi - lo, q_pos.device),)

    def extra_repr(self) -> str:
        return f"heads={self.heads}, sandwich_dim={self.sandwich_dim}"


ENCODINGS: dict[str, type[PositionalEncoding]] = {
    "alibi": ALiBi,
    "t5": T5Bias,
    "kerple": KERPLE,
    "fire": FIRE,
    "sandwich": Sandwich,
}
