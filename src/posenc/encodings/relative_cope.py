"""CoPE (Golovneva et al. 2024): contextual positions counted by sigmoid gates between key and
query, for causal attention. Registered in posenc.encodings.relative."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from posenc.base import PositionalEncoding
from posenc.checks import check_int, check_max_len, limit_and_hint, renamed
from posenc.encodings.relative_base import check_qk, expand_heads, relative_positions, resolve_dims
from posenc.functional.content import run_ends


class CoPE(PositionalEncoding):
    """Golovneva et al. 2024, contextual position encoding, for causal attention.

    Gates g_it = sigmoid(q_i.k_t * softmax_scale(Dh)) (the reference code gates the scaled
    logits); contextual position p_ij = sum of g_it over the keys t from j up to the query
    (k_pos[j] <= k_pos[t] <= q_pos[i], within j's run of increasing positions, so packed
    documents do not count each other), clamped to max_distance - 1; bias q_i.e[p_ij] with e
    [max_distance, Dh] (shared by the heads) linearly interpolated between floor and ceil.

    Non-causal pairs (k_pos[j] > q_pos[i]) have no gates between key and query: p_ij = 0 and
    the bias is q_i.e[0], the value the reference code gives masked pairs. With causal=False
    every future key therefore sits at contextual position 0.
    """

    family = "relative"
    provides = frozenset({"bias"})
    bidirectional = False  # positions count gates up to the query: causal attention only
    paper = "Golovneva et al. 2024"
    summary = "contextual positions from cumulative sigmoid gates, interpolated embeddings"
    trainable = True

    @renamed(npos_max="max_distance")
    def __init__(
        self,
        *,
        dim: int | None = None,
        heads: int | None = None,
        head_dim: int | None = None,
        max_len: int | None = None,
        train_len: int | None = None,
        max_distance: int | None = None,
    ):
        super().__init__()
        self.max_len = check_max_len(max_len)  # the hard limit
        _, self.heads, self.head_dim = resolve_dims("cope", dim, heads, head_dim, need_heads=False)
        if max_distance is None:  # scaled with train_len (max_len alone: the deprecated hint)
            self.max_len, train_len = limit_and_hint(max_len, train_len)
            max_distance = train_len or 64
        self.max_distance = check_int("max_distance", max_distance, low=1)
        self.pos_emb = nn.Parameter(torch.randn(max_distance, self.head_dim) * 0.02)  # [npos, Dh]

    def positions(self, q, k, q_pos, k_pos) -> torch.Tensor:
        """Contextual positions p [B, H, Tq, Tk] float32 (before clamping)."""
        check_qk(self, q, k)
        b, h, tq, dh = q.shape
        tk = k.shape[2]
        rel = relative_positions(self, q_pos, k_pos, tq, tk, b, False)  # i - j
        logits = (q.float() @ k.float().transpose(-1, -2)) * self.softmax_scale(dh)
        gates = torch.sigmoid(logits).masked_fill(rel < 0, 0.0)  # keys after the query: closed
        suffix = F.pad(gates.flip(-1).cumsum(-1).flip(-1), (0, 1))  # sum_{t >= j}, [.., Tk+1]
        kp = k_pos if k_pos.dim() == 2 else k_pos[None]
        nxt = expand_heads(run_ends(kp)[:, None, None, :], b, h).expand(b, h, tq, tk)
        return suffix[..., :tk] - suffix.gather(-1, nxt)

    def bias(self, q, k, q_pos, k_pos):
        pos = self.positions(q, k, q_pos, k_pos).clamp(0, self.max_distance - 1)
        lo = pos.floor()
        w = (pos - lo).to(q.dtype)
        logits = q @ self.pos_emb.to(q.dtype).T  # q_i . e[n], [B, H, Tq, max_distance]
        at_lo = logits.gather(-1, lo.long())
        at_hi = logits.gather(-1, pos.ceil().long())
        return at_hi * w + at_lo * (1 - w)
