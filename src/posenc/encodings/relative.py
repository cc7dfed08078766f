"""Relative encodings whose score depends on positions AND content (q / k).

Each one adds bias(q, k, q_pos, k_pos) -> [B, H, Tq, Tk] to the scaled logits
q.k * softmax_scale(Dh). Values depend only on the position values passed (never on tensor
indices), so query-chunked and KV-cached evaluation equal the full one.

    shaw            Shaw et al. 2018      q.a^K[clip(j - i)] (+ relative values a^V)
    transformer_xl  Dai et al. 2019       u.k_j + (q_i + v).W_r R[i - j]
    deberta         He et al. 2021        c2p q_i.K_r[d(i, j)] + p2c k_j.Q_r[d(i, j)], log buckets
    cope            Golovneva et al. 2024 q_i.e[p_ij], p_ij = sum of sigmoid gates from j to i

Shaw and Transformer-XL are here; DeBERTa in relative_deberta, CoPE in relative_cope, the
helpers they share (keyword resolution, q / k checks, position differences) in relative_base.
"""

from __future__ import annotations

import torch
from torch import nn

from posenc.base import PositionalEncoding
from posenc.checks import check_int, check_max_len, renamed
from posenc.encodings.relative_base import check_qk, expand_heads, relative_positions, resolve_dims
from posenc.encodings.relative_cope import CoPE
from posenc.encodings.relative_deberta import DeBERTa
from posenc.functional import rel_shift, relative_sinusoid

# --------------------------------------------------------------------------- Shaw


class Shaw(PositionalEncoding):
    """Shaw et al. 2018: e_ij = q_i.(k_j + a^K[clip(j - i, -k, k)]) / sqrt(Dh), k = max_distance.

    The tables a^K (and a^V with `values=True`) are [2k + 1, Dh], shared by the heads as in the
    paper. bias() returns q_i.a^K * softmax_scale(Dh), so adding it to q.k * softmax_scale(Dh)
    gives e_ij; values() returns sum_j p_ij a^V[clip(j - i)], added to probs @ v.
    """

    family = "relative"
    provides = frozenset({"bias", "values"})  # values: only with values=True (__init__)
    paper = "Shaw et al. 2018"
    summary = "learned relative key (and value) embeddings, clipped at distance k"
    integer_positions = True
    trainable = True

    @renamed(max_relative_position="max_distance")
    def __init__(
        self,
        *,
        dim: int | None = None,
        heads: int | None = None,
        head_dim: int | None = None,
        max_len: int | None = None,
        max_distance: int = 16,
        values: bool = False,
    ):
        super().__init__()
        self.max_len = check_max_len(max_len)  # the hard limit
        _, self.heads, self.head_dim = resolve_dims("shaw", dim, heads, head_dim, need_heads=False)
        self.max_distance = check_int("max_distance", max_distance, low=1)
        n = 2 * max_distance + 1
        self.rel_keys = nn.Parameter(torch.randn(n, self.head_dim) * 0.02)  # a^K [2k+1, Dh]
        self.rel_values = nn.Parameter(torch.randn(n, self.head_dim) * 0.02) if values else None
        if not values:  # the declaration, per instance: no value table, no values hook
            self.provides = Shaw.provides - {"values"}

    def _index(self, rel: torch.Tensor) -> torch.Tensor:
        """rel = i - j -> table row clip(j - i, -k, k) + k."""
        k = self.max_distance
        return (-rel).clamp(-k, k) + k

    def bias(self, q, k, q_pos, k_pos):
        check_qk(self, q, k)
        b, h, tq, dh = q.shape
        idx = self._index(relative_positions(self, q_pos, k_pos, tq, k.shape[2], b, True))
        qa = q @ self.rel_keys.to(q.dtype).T  # [B, H, Tq, 2k+1]
        return qa.gather(-1, expand_heads(idx, b, h)) * self.softmax_scale(dh)

    def values(self, probs, q_pos, k_pos):
        if self.rel_values is None:
            return None
        b, h, tq, tk = probs.shape
        idx = expand_heads(
            self._index(relative_positions(self, q_pos, k_pos, tq, tk, b, True)), b, h
        )
        bins = probs.new_zeros(b, h, tq, 2 * self.max_distance + 1).scatter_add(-1, idx, probs)
        return bins @ self.rel_values.to(probs.dtype)  # [B, H, Tq, Dh]


# --------------------------------------------------------------------------- Transformer-XL


def _contiguous_start(pos: torch.Tensor) -> int | None:
    """pos[0] if pos ([T] or [1, T]) is pos[0] + arange(T), else None."""
    if pos.dim() == 2:
        if pos.shape[0] != 1:
            return None
        pos = pos[0]
    if pos.is_meta:  # no values: the general path
        return None
    start = int(pos[0].item()) if pos.numel() else 0
    ref = torch.arange(start, start + pos.numel(), device=pos.device)
    return start if torch.equal(pos.long(), ref) else None


class TransformerXL(PositionalEncoding):
    """Dai et al. 2019: score_ij = (q_i + u).k_j + (q_i + v).W_r R[i - j], times 1/sqrt(Dh).

    R is the sinusoid of the distance i - j (relative_sinusoid, rel_dim wide), W_r a Linear
    rel_dim -> H * Dh, u and v learned [H, Dh]. bias() returns (u.k_j + (q_i + v).W_r R[i - j])
    * softmax_scale(Dh). With `shift=True` and contiguous positions it scores q against R for
    the Tq + Tk - 1 distances and applies `rel_shift` (the paper's trick); otherwise it gathers
    those scores by each pair's distance.
    """

    family = "relative"
    provides = frozenset({"bias"})
    paper = "Dai et al. 2019"
    summary = "sinusoidal relative R with W_r, global content and position biases u, v"
    integer_positions = True
    trainable = True

    def __init__(
        self,
        *,
        dim: int | None = None,
        heads: int | None = None,
        head_dim: int | None = None,
        max_len: int | None = None,
        rel_dim: int | None = None,
        base: float = 10000.0,
        shift: bool = True,
    ):
        super().__init__()
        self.max_len = check_max_len(max_len)  # the hard limit
        d, self.heads, self.head_dim = resolve_dims("transformer_xl", dim, heads, head_dim, True)
        self.rel_dim = rel_dim if rel_dim is not None else d
        if not isinstance(self.rel_dim, int) or self.rel_dim < 2 or self.rel_dim % 2:
            raise ValueError(f"rel_dim must be an even int >= 2, got {self.rel_dim!r}")
        self.base, self.shift = float(base), shift
        self.u = nn.Parameter(torch.randn(self.heads, self.head_dim) * 0.02)  # [H, Dh]
        self.v = nn.Parameter(torch.randn(self.heads, self.head_dim) * 0.02)  # [H, Dh]
        self.w_r = nn.Linear(self.rel_dim, self.heads * self.head_dim, bias=False)

    def rel_keys(self, distances: torch.Tensor) -> torch.Tensor:
        """distances [L] -> W_r R[distances] as [H, L, Dh]."""
        r = relative_sinusoid(distances, self.rel_dim, self.base).to(self.w_r.weight.dtype)
        return self.w_r(r).view(-1, self.heads, self.head_dim).transpose(0, 1)

    def bias(self, q, k, q_pos, k_pos):
        check_qk(self, q, k)
        b, h, tq, dh = q.shape
        tk = k.shape[2]
        rel = relative_positions(self, q_pos, k_pos, tq, tk, b, True)  # [B or 1, 1, Tq, Tk]
        content = (k @ self.u.to(k.dtype)[:, :, None]).transpose(-1, -2)  # u.k_j [B, H, 1, Tk]
        qv = q + self.v.to(q.dtype)[:, None, :]  # [B, H, Tq, Dh]
        q0, k0 = _contiguous_start(q_pos), _contiguous_start(k_pos)
        if self.shift and q0 is not None and k0 is not None:
            position = self.position_shift(qv, q0 - k0, tk)
        else:
            position = self.position_gather(qv, rel)
        return (content + position) * self.softmax_scale(dh)

    def position_shift(self, qv: torch.Tensor, offset: int, tk: int) -> torch.Tensor:
        """(q + v).W_r R[i - j] for q_pos = offset + k_pos[0] + arange(Tq) (rel_shift path)."""
        tq = qv.shape[2]
        dmax = offset + tq - 1  # distance of (last query, first key)
        distances = dmax - torch.arange(tq + tk - 1, device=qv.device)  # decreasing
        bd = qv @ self.rel_keys(distances).to(qv.dtype).transpose(-1, -2)  # [B, H, Tq, Tq+Tk-1]
        return rel_shift(bd)[..., :tk]

    def position_gather(self, qv: torch.Tensor, rel: torch.Tensor) -> torch.Tensor:
        """(q + v).W_r R[i - j] for any positions: score every distance in range, then gather."""
        if rel.is_meta:  # a model on the meta device: no distances to range over, shapes only
            return qv.new_empty(*qv.shape[:3], rel.shape[-1])
        lo, hi = int(rel.min().item()), int(rel.max().item())
        distances = torch.arange(lo, hi + 1, device=qv.device)
        bd = qv @ self.rel_keys(distances).to(qv.dtype).transpose(-1, -2)  # [B, H, Tq, L]
        return bd.gather(-1, expand_heads(rel - lo, qv.shape[0], qv.shape[1]))


ENCODINGS: dict[str, type[PositionalEncoding]] = {
    "shaw": Shaw,
    "transformer_xl": TransformerXL,
    "deberta": DeBERTa,
    "cope": CoPE,
}
