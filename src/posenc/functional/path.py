"""PaTH attention's math (Yang et al. 2025): data-dependent Householder transforms
H_t = I - beta_t w_t w_t^T accumulated between a key and a query. Float32 in and out. The
transforms of one run of increasing positions (a packed document) never reach another's keys.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F


def run_starts(k_pos: torch.Tensor) -> torch.Tensor:
    """k_pos [b, Tk] -> [b, Tk] int64: the first key of key t's run of increasing positions."""
    tk = k_pos.shape[-1]
    idx = torch.arange(tk, device=k_pos.device).expand_as(k_pos)
    restart = F.pad(k_pos[:, 1:] <= k_pos[:, :-1], (1, 0), value=True)  # [b, Tk]
    return torch.where(restart, idx, 0).cummax(-1).values


def short_conv(u: torch.Tensor, weight: torch.Tensor, k_pos: torch.Tensor) -> torch.Tensor:
    """A causal depthwise convolution over the keys, inside each run, then SiLU (FLA's
    ShortConvolution on w): u [B, H, Tk, Dh], weight [H, Dh, C] (tap s multiplies the key s
    back, s = 0 the key itself), k_pos [b, Tk] -> [B, H, Tk, Dh]. A tap that would reach
    before the run's first key (or before key 0) reads zero."""
    tk, c = u.shape[2], weight.shape[-1]
    start = run_starts(k_pos)  # [b, Tk]
    t = torch.arange(tk, device=u.device)
    out = torch.zeros_like(u)
    for s in range(min(c, tk)):
        inside = (t - s >= start)[:, None, :, None]  # [b, 1, Tk, 1]
        back = F.pad(u, (0, 0, s, 0))[:, :, :tk]  # u shifted s keys later: key t reads t - s
        out = out + back * inside * weight[:, :, s][None, :, None, :]
    return F.silu(out)


def householder(w: torch.Tensor, beta: torch.Tensor) -> torch.Tensor:
    """w [..., Dh], beta [...] -> H = I - beta w w^T [..., Dh, Dh] (figures and tests)."""
    eye = torch.eye(w.shape[-1], dtype=w.dtype, device=w.device)
    return eye - beta[..., None, None] * w[..., :, None] * w[..., None, :]


def path_scores(
    q: torch.Tensor,
    k: torch.Tensor,
    w: torch.Tensor,
    beta: torch.Tensor,
    q_pos: torch.Tensor,
    k_pos: torch.Tensor,
) -> torch.Tensor:
    """PaTH's scores: q [B, H, Tq, Dh], k and w [B, H, Tk, Dh] (|w| = 1), beta [B, H, Tk],
    q_pos [b, Tq], k_pos [b, Tk] (b in 1, B) -> S [B, H, Tq, Tk] float32 (not scaled),
    S[i, j] = q_i^T (prod over the keys l > j of j's run with k_pos[l] <= q_pos[i], latest
    first, of H_l) k_j: q_i^T H_i ... H_{j+1} k_j in a full forward, the same numbers for a
    block of queries or a cached decode step. O(Tk) steps from the last key, each carrying
    every query's H_{j+1} ... H_i q_i one key back.
    """
    q, k, w, beta = q.float(), k.float(), w.float(), beta.float()
    tk = k.shape[2]
    upto = k_pos[:, None, :] <= q_pos[:, :, None]  # [b, Tq, Tk]: key l at or before query i
    restart = k_pos[:, 1:] <= k_pos[:, :-1]  # [b, Tk - 1]: key l + 1 starts a new run
    cur = q  # [B, H, Tq, Dh]: H_{j+1} ... H_i q_i for the key j in hand
    cols = []
    for j in range(tk - 1, -1, -1):
        cols.append(torch.einsum("bhqd,bhd->bhq", cur, k[:, :, j]))
        if j == 0:
            break
        # one key back: key j joins L(i, j - 1) where it is at or before the query
        proj = torch.einsum("bhqd,bhd->bhq", cur, w[:, :, j])  # [B, H, Tq]
        moved = cur - (beta[:, :, j, None] * proj)[..., None] * w[:, :, j, None, :]
        cur = torch.where(upto[:, None, :, j, None], moved, cur)
        cur = torch.where(restart[:, None, j - 1, None, None], q, cur)  # a new run: none
    return torch.stack(cols[::-1], dim=-1)  # [B, H, Tq, Tk]
