"""Seed 001's windowed learned encoding: a learned table plus a learned mix of the J - 1 rows
before it.

    PE_t = psi(t) + sum_{j=1}^{J-1} beta_j * f(t - j) * w_j

The seed leaves psi, f, beta and w undefined; here psi = f = one trained table W [max_len, D]
(a fully connected layer on one-hot positions is such a table), beta_j a learned scalar and w_j a
learned vector [D] (element-wise), rows before position 0 are zero. beta starts at 0 and w at 1,
so training starts from the plain learned table. The window sum depends on t alone, never on a
token: it is one more learned table (posenc explain checks the seed's reason for it).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from posenc.base import PositionalEncoding
from posenc.checks import check_int
from posenc.encodings.absolute import Learned


class LearnedWindow(Learned):
    """x + W[t] + sum_{j<J} beta_j W[t - j] * w_j; max_len rows (train_len if not given)."""

    paper = "seed 001's formula (no published source)"
    summary = "a trained table plus a learned mix of the J - 1 rows before each position"

    def __init__(self, *, dim=None, max_len=None, train_len=None, window: int = 5):
        super().__init__(dim=dim, max_len=max_len, train_len=train_len)
        self.window = check_int("window", window, low=1)
        self.beta = nn.Parameter(torch.zeros(self.window - 1))  # [J - 1]
        self.w = nn.Parameter(torch.ones(self.window - 1, self.dim))  # [J - 1, D]

    def table(self, positions: torch.Tensor, dim: int | None = None) -> torch.Tensor:
        positions = self.check_positions(positions, integer=True)
        pos = positions.long()  # [T] or [B, T]
        pe = F.embedding(pos, self.weight)  # [(B,) T, D]
        for j in range(1, self.window):
            back = pos - j
            rows = F.embedding(back.clamp(min=0), self.weight) * (back >= 0).unsqueeze(-1)
            pe = pe + self.beta[j - 1] * rows * self.w[j - 1]
        return pe

    def extra_repr(self) -> str:
        return f"max_len={self.max_len}, dim={self.dim}, window={self.window}"


ENCODINGS: dict[str, type[PositionalEncoding]] = {"learned_window": LearnedWindow}
