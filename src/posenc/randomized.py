"""Randomized positional encodings (Ruoss et al. 2023): a wrapper around any encoding.

During training a sequence of n tokens gets as positions a sorted random subset of
[0, max_positions) instead of 0..n-1, so the model sees large positions (and large gaps) while
training on short sequences; at evaluation positions pass through unchanged.

The hook: `sample_positions(positions) -> positions`. TransformerLM calls it ONCE per forward,
before any layer, and hands the result to the input embedding and to every layer, so all layers
see the same positions. attention() never samples. Given positions p (e.g. arange(n), or
positions that restart per packed document), the sample is S[p] with S a sorted random subset
of size max(p) + 1, so order (and restarts) are kept. [T] positions get one subset shared by
the batch, [B, T] positions one subset per row.
"""

from __future__ import annotations

import torch

from posenc.base import PositionalEncoding


class Randomized(PositionalEncoding):
    """Wraps `base` (a registry name built with `base_kwargs`, or an encoding instance).

    Every hook and attribute is the base encoding's; the class-level family is "none" since the
    wrapper itself adds no signal, but an instance reports its base's family.
    """

    family = "none"
    paper = "Ruoss et al. 2023"
    summary = "wrapper: trains on sorted random positions from [0, max_positions)"

    def __init__(
        self,
        *,
        base: str | PositionalEncoding = "rope",
        base_kwargs: dict | None = None,
        max_positions: int = 2048,
        dim: int | None = None,
        heads: int | None = None,
        head_dim: int | None = None,
        max_len: int | None = None,
    ) -> None:
        super().__init__()
        if not isinstance(max_positions, int) or max_positions < 1:
            raise ValueError(f"max_positions must be a positive int, got {max_positions!r}")
        if isinstance(base, PositionalEncoding):
            if base_kwargs:
                raise TypeError("base_kwargs is only for a base given by name, not an instance")
        elif isinstance(base, str):
            from posenc import build, resolve

            if resolve(base) is Randomized:
                raise ValueError("base must be another encoding, not 'randomized' itself")
            # training positions reach max_positions - 1: tables must cover them
            reach = max(max_len or 0, max_positions)
            std = dict(dim=dim, heads=heads, head_dim=head_dim, max_len=reach)
            base = build(base, **{**std, **(base_kwargs or {})})
        else:
            raise TypeError(
                f"base must be an encoding name or a PositionalEncoding, got {type(base).__name__}"
            )
        if base.position_dims != 1:
            raise ValueError(
                f"base must take 1-D positions (position_dims=1), got {type(base).__name__} "
                f"with position_dims={base.position_dims}"
            )
        self.base = base
        self.max_positions = max_positions
        self.family = base.family
        self.integer_positions = base.integer_positions
        self.trainable = base.trainable
        self.cache_exact = base.cache_exact
        self.max_len = base.max_len
        self.heads = getattr(base, "heads", heads)

    def extra_repr(self) -> str:
        return f"max_positions={self.max_positions}"

    def sample_positions(self, positions: torch.Tensor) -> torch.Tensor:
        """positions [T] or [B, T] -> randomized positions of the same shape (in training).

        In eval mode, returns `positions` unchanged.
        """
        if not self.training:
            return positions
        if positions.is_floating_point():
            raise ValueError("positions must be integers to be randomized, got a float tensor")
        n = int(positions.max()) + 1 if positions.numel() else 0
        if n > self.max_positions:
            raise ValueError(
                f"positions go up to {n - 1}, past max_positions={self.max_positions}: "
                "raise max_positions"
            )
        device = positions.device
        if positions.dim() == 1:
            subset = torch.randperm(self.max_positions, device=device)[:n].sort().values
            return subset[positions]
        noise = torch.rand(positions.shape[0], self.max_positions, device=device)
        subset = noise.argsort(dim=-1)[:, :n].sort(dim=-1).values  # [B, n]
        return subset.gather(-1, positions.long())

    # ----------------------------------------------------------------- every hook: the base's

    def embed(self, x, positions):
        return self.base.embed(x, positions)

    def embed_dim(self, dim: int) -> int:
        return self.base.embed_dim(dim)

    def rotate(self, q, k, q_pos, k_pos):
        return self.base.rotate(q, k, q_pos, k_pos)

    def bias(self, q, k, q_pos, k_pos):
        return self.base.bias(q, k, q_pos, k_pos)

    def score_mod(self, q_pos, k_pos):
        return self.base.score_mod(q_pos, k_pos)

    def values(self, probs, q_pos, k_pos):
        return self.base.values(probs, q_pos, k_pos)

    def softmax_scale(self, head_dim: int) -> float:
        return self.base.softmax_scale(head_dim)

    def angles(self, positions: torch.Tensor) -> torch.Tensor:
        """The base's rotation angles (rotary bases only)."""
        return self.base.angles(positions)

    @property
    def has_bias(self) -> bool:
        return self.base.has_bias

    @property
    def has_values(self) -> bool:
        return self.base.has_values

    @property
    def content_dependent(self) -> bool:
        return self.base.content_dependent


ENCODINGS: dict[str, type[PositionalEncoding]] = {"randomized": Randomized}
