"""The one interface every positional encoding implements, and the one shape legend.

Shape legend (used in every docstring of posenc):
    B    batch size
    T    sequence length; Tq queries, Tk keys (Tq <= Tk when decoding with a cache)
    D    model width
    H    query heads; Hkv key/value heads (H % Hkv == 0, grouped-query attention)
    Dh   head dim; R rotary dim (R <= Dh, even)
    P    position components: 1 for sequences (then the last axis is dropped), 2 for images
         (row, col), 3 for video (time, row, col)

Positions are explicit tensors: `[T]` (shared by the batch) or `[B, T]` (left padding, packed
sequences, decoding offsets), with a trailing `[..., P]` axis for 2-D / 3-D encodings.
The default is `arange(T)`; for queries when decoding, the last Tq of `arange(Tk)`.

An encoding overrides only the hooks of its family; the others are identity / None:
    embed(x, positions)          absolute: added to (or concatenated with) token embeddings
    rotate(q, k, q_pos, k_pos)   rotary: rotates queries and keys
    bias(q, k, q_pos, k_pos)     bias / relative: [B or 1, H, Tq, Tk], added to q.k * scale
    score_mod(q_pos, k_pos)      FlexAttention score_mod with the same values as bias()
"""

from __future__ import annotations

import torch
from torch import nn

FAMILIES = ("absolute", "rotary", "bias", "relative", "none")


class PositionalEncoding(nn.Module):
    """Base class. Subclasses set the class attributes and override their family's hooks.

    Class attributes:
        family:        one of FAMILIES.
        paper:         short citation, e.g. "Vaswani et al. 2017".
        summary:       one line for `posenc list`.
        position_dims: P, the number of position components (1, 2 or 3).
        integer_positions: True where positions must be integers (tables, buckets).
        trainable:     True if the encoding has parameters that training changes.
        cache_exact:   False where a token's encoding depends on the whole sequence (`phase`),
                       so cached decoding cannot reproduce a full forward.
    """

    family: str = "none"
    paper: str = ""
    summary: str = ""
    position_dims: int = 1
    integer_positions: bool = False
    trainable: bool = False
    cache_exact: bool = True

    # Largest supported position + 1 (learned tables); None means unbounded.
    max_len: int | None = None

    def embed(self, x: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
        """x [B, T, D], positions [T] or [B, T] -> [B, T, embed_dim(D)]."""
        return x

    def embed_dim(self, dim: int) -> int:
        """Width of embed()'s output for input width `dim` (concatenating encodings grow it)."""
        return dim

    def rotate(
        self, q: torch.Tensor, k: torch.Tensor, q_pos: torch.Tensor, k_pos: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """q [B, H, Tq, Dh], k [B, Hkv, Tk, Dh], q_pos [Tq] or [B, Tq] -> rotated (q, k)."""
        return q, k

    def bias(
        self, q: torch.Tensor, k: torch.Tensor, q_pos: torch.Tensor, k_pos: torch.Tensor
    ) -> torch.Tensor | None:
        """q [B, H, Tq, Dh], k [B, H, Tk, Dh] (kv heads already repeated) -> [B or 1, H, Tq, Tk].

        Added to the scaled logits q.k * softmax_scale(Dh). None: no bias.
        """
        return None

    def score_mod(self, q_pos: torch.Tensor, k_pos: torch.Tensor):
        """FlexAttention score_mod(score, b, h, q_idx, kv_idx) with bias()'s values, or None.

        Only for encodings whose bias depends on positions alone. q_pos [Tq], k_pos [Tk] are
        the positions that q_idx / kv_idx index into.
        """
        return None

    def values(
        self, probs: torch.Tensor, q_pos: torch.Tensor, k_pos: torch.Tensor
    ) -> torch.Tensor | None:
        """probs [B, H, Tq, Tk] -> extra output [B, H, Tq, Dh] added to probs @ v, or None.

        Only Shaw et al.'s relative value embeddings use it.
        """
        return None

    def softmax_scale(self, head_dim: int) -> float:
        """The factor on q.k before softmax; 1/sqrt(Dh) unless the method says otherwise."""
        return head_dim**-0.5

    @property
    def has_bias(self) -> bool:
        return type(self).bias is not PositionalEncoding.bias

    @property
    def has_values(self) -> bool:
        return type(self).values is not PositionalEncoding.values

    @property
    def content_dependent(self) -> bool:
        """True where the bias depends on q/k (no score_mod possible)."""
        return self.family == "relative"


# --------------------------------------------------------------------------- positions


def default_positions(
    length: int, *, offset: int = 0, device: torch.device | str | None = None
) -> torch.Tensor:
    """arange(offset, offset + length) as int64 [T]."""
    return torch.arange(offset, offset + length, device=device)


def check_positions(
    positions: torch.Tensor,
    *,
    name: str = "positions",
    integer: bool = False,
    max_len: int | None = None,
    position_dims: int = 1,
) -> torch.Tensor:
    """Validate positions and return them unchanged.

    Raises TypeError for non-tensors, ValueError for negative values, non-integer values where
    `integer`, values >= `max_len`, or a trailing axis that is not `position_dims` long.
    """
    if not isinstance(positions, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(positions).__name__}")
    if position_dims > 1 and (positions.dim() == 0 or positions.shape[-1] != position_dims):
        raise ValueError(
            f"{name} must have a trailing axis of size {position_dims} "
            f"(one component per axis), got shape {tuple(positions.shape)}"
        )
    if positions.numel() == 0 or torch.compiler.is_compiling():
        return positions  # value checks need .item(); under torch.compile they would break graphs
    if positions.dtype == torch.bool or positions.is_complex():
        raise TypeError(f"{name} must be an integer or float tensor, got {positions.dtype}")
    if positions.is_floating_point() and integer and not torch.equal(positions, positions.round()):
        raise ValueError(
            f"{name} must be integers for this encoding (a table or buckets index them); "
            "got non-integer float values"
        )
    low = positions.min().item()
    if low < 0:
        raise ValueError(f"{name} must be >= 0, got a minimum of {low}")
    if max_len is not None:
        high = positions.max().item()
        if high >= max_len:
            raise ValueError(
                f"{name} go up to {high}, past this encoding's max_len={max_len}: "
                f"allowed positions are 0..{max_len - 1}"
            )
    return positions


def position_at(pos: torch.Tensor):
    """(b, idx) -> position, for FlexAttention's score_mod / mask_mod: pos [T] or [B, T];
    [1, T] broadcasts over b."""
    if pos.dim() == 1:
        return lambda b, idx: pos[idx]
    if pos.shape[0] == 1:
        return lambda b, idx: pos[0, idx]
    return lambda b, idx: pos[b, idx]
