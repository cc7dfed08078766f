"""Content-dependent attention math: FoX's forget-gate bias, stick-breaking weights, DAPE's MLP
over the logits, PaTH's Householder transforms H_t = I - beta_t w_t w_t^T accumulated between a
key and a query. Float32 in and out. Keys are grouped in runs of increasing positions (packed
documents): one run's gates and transforms never reach another's keys."""

from __future__ import annotations

import torch
import torch.nn.functional as F


def run_ends(k_pos: torch.Tensor) -> torch.Tensor:
    """k_pos [B or 1, Tk] -> [B or 1, Tk]: index of the first key after key j's run of
    increasing positions (a run ends where positions stop increasing: a packed document
    restarts), Tk for the last run."""
    tk = k_pos.shape[-1]
    t = torch.arange(1, tk, device=k_pos.device)
    starts = torch.where(k_pos[:, 1:] <= k_pos[:, :-1], t, tk)  # candidate for j = t - 1
    starts = torch.cat([starts, starts.new_full((k_pos.shape[0], 1), tk)], dim=-1)
    return starts.flip(-1).cummin(-1).values.flip(-1)


def forget_bias(log_f: torch.Tensor, q_pos: torch.Tensor, k_pos: torch.Tensor) -> torch.Tensor:
    """FoX's decay (Lin et al. 2025): log forget gates log_f [B, H, Tk] (<= 0, one per key)
    -> bias [B, H, Tq, Tk] float32, the sum of log_f[l] over the keys l after key j up to the
    query (j < l, l in j's run of increasing positions, k_pos[l] <= q_pos[i]); 0 for a key
    after the query. Summed from the query end, so non-increasing with distance in float32 too.
    """
    qp = q_pos if q_pos.dim() == 2 else q_pos[None]  # [b, Tq]
    kp = k_pos if k_pos.dim() == 2 else k_pos[None]  # [b, Tk]
    B, H, Tk = log_f.shape
    Tq = qp.shape[-1]
    upto = (kp[:, None, :] <= qp[:, :, None]).unsqueeze(1)  # [b, 1, Tq, Tk]
    w = log_f.float()[:, :, None, :] * upto  # [B, H, Tq, Tk]
    suffix = F.pad(w.flip(-1).cumsum(-1).flip(-1), (0, 1))  # sum over l >= j, [.., Tk + 1]
    end = run_ends(kp)[:, None, None, :].expand(B, H, Tq, Tk)
    return (suffix[..., 1:] - suffix.gather(-1, end)).clamp(max=0.0)


def stick_breaking(logits: torch.Tensor, allowed: torch.Tensor | None) -> torch.Tensor:
    """Stick-breaking weights (Tan et al. 2024): logits z [B, H, Tq, Tk], allowed bool
    broadcastable to it (None: every key) -> A [B, H, Tq, Tk] float32,
    A[i, j] = sigmoid(z_ij) * prod over allowed keys l > j of (1 - sigmoid(z_il)), zero where
    not allowed, in log space.
    """
    z = logits.float()
    log_rest = F.logsigmoid(-z)  # log(1 - beta)
    if allowed is not None:
        log_rest = log_rest.masked_fill(~allowed, 0.0)
    suffix = log_rest.flip(-1).cumsum(-1).flip(-1)  # sum over l >= j
    later = F.pad(suffix[..., 1:], (0, 1))  # sum over l > j
    weights = torch.exp(F.logsigmoid(z) + later)
    return weights if allowed is None else weights.masked_fill(~allowed, 0.0)


def dape_logits(
    logits: torch.Tensor,
    bias: torch.Tensor,
    w1: torch.Tensor,
    b1: torch.Tensor,
    w2: torch.Tensor,
    b2: torch.Tensor,
    negative_slope: float = 0.01,
) -> torch.Tensor:
    """DAPE (Zheng et al. 2024): logits x [B, H, Tq, Tk], positional bias b [B or 1, H, Tq, Tk]
    -> x + b + MLP([x; b]), the MLP applied at each (i, j) over the heads' axis:
    w2 @ leaky_relu(w1 @ [x_ij; b_ij] + b1) + b2, w1 [W, 2H], w2 [H, W]."""
    x = logits.float()
    b = bias.float().expand_as(x)
    feats = torch.cat([x, b], dim=1).movedim(1, -1)  # [B, Tq, Tk, 2H]
    hidden = F.leaky_relu(F.linear(feats, w1.float(), b1.float()), negative_slope)  # [.., W]
    return x + b + F.linear(hidden, w2.float(), b2.float()).movedim(-1, 1)


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
