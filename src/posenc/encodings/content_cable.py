"""CABLE: context-aware biases for length extrapolation, a content-dependent ALiBi."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from posenc.base import PositionalEncoding
from posenc.encodings.content import KeyBias
from posenc.encodings.relative import qk_rows
from posenc.functional.content import forget_bias


class CABLE(KeyBias):
    """Context-aware biases for length extrapolation (Veisi et al. 2025): a penalty
    p_hl = softplus(w_h . k_hl + c_h) per token l and head h, and bias_h(i, j) =
    -(p_h,j+1 + ... + p_h,i): ALiBi whose slope each token sets. The penalty reads the key each
    head already has (the reference's Linear on x, of weight w_h W_k,h, gives the same
    numbers). Init as the reference: w ~ normal(0, 0.02), c = 0.
    """

    paper = "Veisi et al. 2025 (arXiv 2503.08067)"
    summary = "learned per-token, per-head penalties summed between key and query (CABLE)"

    def __init__(self, *, dim=None, heads=None, head_dim=None, max_len=None):
        super().__init__("cable", dim, heads, head_dim, max_len)
        self.penalty_weight = nn.Parameter(torch.randn(self.heads, self.head_dim) * 0.02)
        self.penalty_bias = nn.Parameter(torch.zeros(self.heads))  # [H]

    def penalties(self, k: torch.Tensor) -> torch.Tensor:
        """k [B, H, Tk, Dh] -> the penalties p [B, H, Tk] float32 (>= 0)."""
        logit = torch.einsum("bhtd,hd->bht", k.float(), self.penalty_weight.float())
        return F.softplus(logit + self.penalty_bias.float()[:, None])

    def bias(self, q, k, q_pos, k_pos):
        qp, kp = qk_rows(self, q, k, q_pos, k_pos)
        return forget_bias(-self.penalties(k), qp, kp).to(q.dtype)


ENCODINGS: dict[str, type[PositionalEncoding]] = {"cable": CABLE}
