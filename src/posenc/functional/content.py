"""Content-dependent attention math: FoX's forget-gate bias, stick-breaking weights, DAPE's MLP
over the logits. Float32 in and out; shapes follow posenc.base."""

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
