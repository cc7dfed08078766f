"""Biases a small network computes from the distance (x-transformers' two): dynamic_bias, of
positions alone, and distance_basis, whose curves each query weighs (content-dependent).
"""

from __future__ import annotations

import torch
from torch import nn

from posenc.base import PositionalEncoding
from posenc.checks import check_bool, check_int, position_at
from posenc.encodings.bias import PositionBias
from posenc.encodings.content import KeyBias
from posenc.encodings.relative import qk_rows
from posenc.functional.bias import distance_basis_bias, signed_log_distance


class DynamicPositionBias(PositionBias):
    """Dynamic position bias (Wang et al.'s CrossFormer; x-transformers' DynamicPositionBias):
    bias_h(i, j) = MLP(i - j)_h, the MLP Linear(1, W) - SiLU - (Linear(W, W) - SiLU) x
    (depth - 1) - Linear(W, H) over the signed distance d, or sign(d) log(|d| + 1) with
    `log_distance`; `norm` puts a LayerNorm before each SiLU (the first without a bias, as
    x-transformers). W = `mlp_width`, default dim // 4, else 32. The MLP runs once per
    distinct distance.
    """

    provides = PositionBias.provides | {"distance"}
    paper = "Wang et al. 2022 (CrossFormer, arXiv 2108.00154); x-transformers"
    summary = "MLP of the signed (log-)distance, one bias per head (dynamic position bias)"
    integer_positions = True
    trainable = True
    _max_table = 1 << 20  # the widest span of distances score_mod tabulates

    def __init__(
        self,
        *,
        dim=None,
        heads=None,
        max_len=None,
        mlp_width=None,
        depth=2,
        log_distance=False,
        norm=False,
    ):
        super().__init__(heads, max_len)
        if mlp_width is None:
            mlp_width = max(check_int("dim", dim, low=1) // 4, 1) if dim is not None else 32
        width = check_int("mlp_width", mlp_width, low=1)
        check_int("depth", depth, low=1)
        self.log_distance = check_bool("log_distance", log_distance)
        self.norm = check_bool("norm", norm)
        layers: list[nn.Module] = [nn.Linear(1, width)]
        layers += [nn.LayerNorm(width, bias=False)] if norm else []
        layers.append(nn.SiLU())
        for _ in range(depth - 1):
            layers += [nn.Linear(width, width), *([nn.LayerNorm(width)] if norm else []), nn.SiLU()]
        layers.append(nn.Linear(width, self.heads))
        self.mlp = nn.Sequential(*layers)

    def table(self, distances: torch.Tensor) -> torch.Tensor:
        """distances [N] (int64) -> [N, H] float32: the MLP at each distance."""
        x = signed_log_distance(distances) if self.log_distance else distances.float()
        return self.mlp(x[:, None].to(self.mlp[0].weight.dtype)).float()

    def bias(self, q, k, q_pos, k_pos) -> torch.Tensor:
        qp, kp, _ = self._grids(q, k, q_pos, k_pos)
        d = (qp - kp)[:, 0]  # [b, Tq, Tk]
        if d.is_meta:  # no values to take unique: the MLP at every pair
            values = self.table(d.reshape(-1)).view(*d.shape, self.heads)
        else:
            distinct, at = torch.unique(d, return_inverse=True)
            values = self.table(distinct)[at]  # [b, Tq, Tk, H]
        return values.permute(0, 3, 1, 2).to(q.dtype)

    def score_mod(self, q_pos, k_pos):  # a table of the MLP over the span of distances
        q_pos, k_pos = self._score_mod_positions(q_pos, k_pos)
        lo = hi = 0
        if q_pos.numel() and k_pos.numel():
            lo = int(q_pos.min().item() - k_pos.max().item())
            hi = int(q_pos.max().item() - k_pos.min().item())
        if hi - lo >= self._max_table:
            raise ValueError(
                f"dynamic_bias: score_mod tabulates the distances {lo}..{hi}, more than "
                f"{self._max_table} values; use positions spanning less, or backend 'chunked'"
            )
        table = self.table(torch.arange(lo, hi + 1, device=q_pos.device))  # [N, H]
        q_at, k_at = position_at(q_pos), position_at(k_pos)

        def score_mod(score, b, h, q_idx, kv_idx):
            value = table[q_at(b, q_idx) - k_at(b, kv_idx) - lo, h]
            return score + value.to(score.dtype)

        return score_mod

    def distance_bias(self, distances, q_pos):
        return self.table(distances).t()

    def extra_repr(self) -> str:
        return f"heads={self.heads}, log_distance={self.log_distance}, norm={self.norm}"


class DistanceBasisBias(KeyBias):
    """Distance-basis bias (x-transformers' RelativeProjPositionalBias, after Thinking
    Machines' Inkling; no paper): R learned curves over the distance, bank [R, M], and each
    query's mix of them per head, bias_h(i, j) = sum_r w_hr(i) * bank[r, i - j] for
    0 <= i - j < M, else 0; w_h(i) = W_h q_i + c_h reads the query each head already has
    (x-transformers' Linear on x, of weight W_h^T W_q,h, gives the same numbers).
    M = `max_dist`, default `train_len`, else 1024."""

    paper = "x-transformers RelativeProjPositionalBias (Thinking Machines' Inkling; no paper)"
    summary = "each query mixes learned per-distance curves per head (distance-basis bias)"
    integer_positions = True

    def __init__(
        self,
        *,
        dim=None,
        heads=None,
        head_dim=None,
        max_len=None,
        train_len=None,
        num_basis=16,
        max_dist=None,
    ):
        super().__init__("distance_basis", dim, heads, head_dim, max_len)
        self.num_basis = check_int("num_basis", num_basis, low=1)
        if max_dist is None:
            max_dist = 1024 if train_len is None else check_int("train_len", train_len, low=1)
        self.max_dist = check_int("max_dist", max_dist, low=1)
        H, Dh, R = self.heads, self.head_dim, self.num_basis
        bound = Dh**-0.5  # nn.Linear(Dh, R)'s init, per head
        self.weight = nn.Parameter(torch.empty(H, Dh, R).uniform_(-bound, bound))  # [H, Dh, R]
        self.weight_bias = nn.Parameter(torch.empty(H, R).uniform_(-bound, bound))  # [H, R]
        self.bank = nn.Parameter(torch.randn(R, self.max_dist) * 0.02)  # [R, M]

    def mix(self, q: torch.Tensor) -> torch.Tensor:
        """q [B, H, Tq, Dh] -> the curves' weights [B, H, Tq, R] float32."""
        w = torch.einsum("bhid,hdr->bhir", q.float(), self.weight.float())
        return w + self.weight_bias.float()[:, None]

    def bias(self, q, k, q_pos, k_pos) -> torch.Tensor:
        qp, kp = qk_rows(self, q, k, q_pos, k_pos, integer=True)
        distance = qp.long()[:, :, None] - kp.long()[:, None, :]  # [b, Tq, Tk]
        return distance_basis_bias(self.mix(q), self.bank, distance).to(q.dtype)

    def extra_repr(self) -> str:
        return f"heads={self.heads}, num_basis={self.num_basis}, max_dist={self.max_dist}"


ENCODINGS: dict[str, type[PositionalEncoding]] = {
    "dynamic_bias": DynamicPositionBias,
    "distance_basis": DistanceBasisBias,
}
