"""The shared base of the bias encodings (posenc.encodings.bias, posenc.encodings.bias_learned).

Every bias encoding defines one elementwise function `_value(qp, kp, h, params)` of query
positions, key positions and head indices. `bias()` calls it on broadcast grids
(qp [b, 1, Tq, 1], kp [b, 1, 1, Tk], h [1, H, 1, 1]) and `score_mod()` on FlexAttention's
scalar indices, so both give the same numbers by construction. Values depend on the position
values passed, never on tensor indices, so chunked and cached evaluation equal the full one.
"""

from __future__ import annotations

import torch

from posenc.base import PositionalEncoding
from posenc.checks import check_int, position_at


def difference(qp: torch.Tensor, kp: torch.Tensor) -> torch.Tensor:
    """i - j as float32, subtracted exactly first (int64, or float64 for float positions)."""
    if qp.is_floating_point() or kp.is_floating_point():
        return (qp.double() - kp.double()).float()
    return (qp - kp).float()


class PositionBias(PositionalEncoding):
    """Shared plumbing: head count, position checks, bias() and score_mod() from _value()."""

    family = "bias"
    provides = frozenset({"bias", "score_mod"})

    def __init__(self, heads: int | None):
        super().__init__()
        name = type(self).__name__
        if heads is None:
            raise ValueError(f"{name} needs heads= (the number of attention heads, >= 1)")
        self.heads = check_int("heads", heads, low=1)

    # -- what a subclass defines
    def _params(self) -> tuple:
        """Tensors computed once per call (e.g. positive parameters), passed to _value."""
        return ()

    def _value(self, qp: torch.Tensor, kp: torch.Tensor, h: torch.Tensor, params: tuple):
        """Elementwise bias for query positions qp, key positions kp, head indices h."""
        raise NotImplementedError

    # -- shared
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
        """q [B, H, Tq, Dh], k [B, H, Tk, Dh], positions [T] or [B, T] -> [1 or B, H, Tq, Tk].

        q and k only supply shapes, dtype and device.
        """
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

    def score_mod(self, q_pos: torch.Tensor, k_pos: torch.Tensor):
        """FlexAttention score_mod adding bias()'s values; q_idx / kv_idx index the positions."""
        q_pos, k_pos = self._score_mod_positions(q_pos, k_pos)
        q_at, k_at = position_at(q_pos), position_at(k_pos)
        params = self._params()

        def score_mod(score, b, h, q_idx, kv_idx):
            value = self._value(q_at(b, q_idx), k_at(b, kv_idx), h, params)
            return score + value.to(score.dtype)

        return score_mod

    def extra_repr(self) -> str:
        return f"heads={self.heads}"


class DistanceBias(PositionBias):
    """A bias of (head, q_pos - k_pos) alone (ALiBi, T5, KERPLE): _value at key position 0
    gives the `distance` form."""

    provides = PositionBias.provides | {"distance"}

    def distance_bias(self, distances: torch.Tensor, q_pos: torch.Tensor) -> torch.Tensor:
        """distances [N] int64 -> [H, N]: bias() at every pair that far apart."""
        d = distances.view(1, -1)  # [1, N] as query positions, keys at 0
        h = torch.arange(self.heads, device=d.device).view(-1, 1)  # [H, 1]
        return self._value(d, torch.zeros_like(d), h, self._params())
