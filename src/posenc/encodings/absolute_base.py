"""The shared plumbing of the absolute encodings (posenc.encodings.absolute): validation of x
[B, T, D] and positions, and the two ways to attach table(positions): added (x + table, width
D) or concatenated ([x, table], width D + width)."""

from __future__ import annotations

import torch

from posenc.base import PositionalEncoding
from posenc.checks import check_float, check_int, check_max_len


def check_size(name: str, value, *, required: str | None = None) -> int | None:
    """None (allowed unless `required` says why it is needed) or a positive int."""
    if value is None:
        if required:
            raise ValueError(f"{name} is required: {required}; got None")
        return None
    return check_int(name, value, low=1)


def check_base(base) -> float:
    return check_float("base", base, gt=0)


class AbsoluteEncoding(PositionalEncoding):
    """Shared validation for the absolute family. Subclasses define table()."""

    family = "absolute"

    def __init__(self, *, dim: int | None = None, max_len=None):
        super().__init__()
        self.max_len = check_max_len(max_len)  # the hard limit
        self.dim = check_size("dim", dim)

    def table(self, positions: torch.Tensor, dim: int | None = None) -> torch.Tensor:
        """positions [T] / [B, T] (+[P]) -> [T, W] / [B, T, W], the positional features."""
        raise NotImplementedError

    def _width(self, dim: int | None) -> int:
        dim = dim if dim is not None else self.dim
        if dim is None:
            raise ValueError("dim (the model width D) is needed: pass dim=, or call embed(x, ...)")
        return dim

    def _check(self, x: torch.Tensor, positions: torch.Tensor) -> int:
        """Validate x [B, T, D] and positions; return D."""
        if not isinstance(x, torch.Tensor) or x.dim() != 3:
            shape = tuple(x.shape) if isinstance(x, torch.Tensor) else type(x).__name__
            raise ValueError(f"x must be [B, T, D], got {shape}")
        P = self.position_dims
        positions = self.check_positions(positions, integer=self.integer_positions, position_dims=P)
        lead = positions.shape[:-1] if P > 1 else positions.shape  # [T] or [B, T]
        B, T, D = x.shape
        if len(lead) not in (1, 2) or lead[-1] != T or (len(lead) == 2 and lead[0] not in (1, B)):
            want = "[T] or [B, T]" + (f" + [{P}]" if P > 1 else "")
            raise ValueError(
                f"positions must be {want} with T={T}, B={B} (as x), got {tuple(positions.shape)}"
            )
        if self.dim is not None and self.dim != D:
            raise ValueError(f"x has width {D}, but this encoding was built with dim={self.dim}")
        return D

    @staticmethod
    def _positions_for(x: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
        """float64 x: float64 positions, so the table is computed in float64 too."""
        return positions.double() if x.dtype == torch.float64 else positions


class AddedEncoding(AbsoluteEncoding):
    """x + table(positions): the output width is D."""

    provides = frozenset({"embed"})

    def embed(self, x: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
        D = self._check(x, positions)
        return x + self.table(self._positions_for(x, positions), D).to(x.dtype)


class ConcatEncoding(AbsoluteEncoding):
    """[x, table(positions)]: the output width is D + width (the model projects back to D)."""

    provides = frozenset({"embed", "embed_dim"})
    width: int = 1

    def embed_dim(self, dim: int) -> int:
        return dim + self.width

    def embed(self, x: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
        D = self._check(x, positions)
        feats = self.table(self._positions_for(x, positions), D).to(x.dtype)  # [T, W] / [B, T, W]
        return torch.cat([x, feats.expand(x.shape[0], x.shape[1], -1)], dim=-1)
