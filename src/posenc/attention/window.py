"""Sliding-window attention as a boolean mask (Longformer, Mistral; the local layers of Gemma 2/3
and Command A): window_mask(q_pos, k_pos, window, Tq, Tk) -> bool [B or 1, 1, Tq, Tk] allows
0 <= q_pos - k_pos < window (causal) or |q_pos - k_pos| < window, by position VALUES as causal is
(a KV cache gives the full forward's mask), by index for 2-D / 3-D positions; ANDed with causal
and any other mask. layer_windows(window, depth): TransformerLM's per-layer windows.
"""

from __future__ import annotations

import torch

from posenc.checks import check_int


def window_mask(q_pos, k_pos, window: int, Tq: int, Tk: int, *, causal: bool = True,
                position_dims: int = 1, device=None) -> torch.Tensor:  # fmt: skip
    """Bool [B or 1, 1, Tq, Tk]; positions [T] / [B, T] or None (the default arange)."""
    check_int("window", window, low=1)
    by_index = position_dims > 1
    qp = torch.arange(Tk - Tq, Tk, device=device) if q_pos is None or by_index else q_pos
    kp = torch.arange(Tk, device=device) if k_pos is None or by_index else k_pos
    d = qp.unsqueeze(-1) - kp.unsqueeze(-2)  # [(B,) Tq, Tk]: how far back each key is
    ok = (d >= 0) & (d < window) if causal else d.abs() < window
    ok = ok.unsqueeze(-3)  # [(B,) 1, Tq, Tk]
    return ok if ok.dim() == 4 else ok.unsqueeze(0)


def layer_windows(window, depth: int) -> list[int | None]:
    """None (global), one int for every layer, or `depth` entries of int >= 1 or None."""
    if window is None or isinstance(window, int) and not isinstance(window, bool):
        entries = [window] * depth
    elif isinstance(window, list | tuple):
        if len(window) != depth:
            raise ValueError(
                f"window: a per-layer list needs depth={depth} entries, got {len(window)}"
            )
        entries = list(window)
    else:
        raise TypeError(
            f"window must be None, an int >= 1 or a list of depth ints / None, got {window!r}"
        )
    for i, w in enumerate(entries):
        if w is not None:
            check_int(f"window[{i}]" if isinstance(window, list | tuple) else "window", w, low=1)
    return entries
