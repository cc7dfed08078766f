"""Evaluating one arena cell: exact match and per-token accuracy at every size (tasks), loss and
perplexity per position band (lm). Evaluation data depends only on the task and the size, so
every encoding and seed is measured on the same instances."""

from __future__ import annotations

import math

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from posenc.analysis import measures
from posenc.arena.backbones import build_model
from posenc.arena.cells import Cell, metrics_for, position_bands
from posenc.arena.config import TaskConfig
from posenc.arena.store import Row
from posenc.arena.train import per_instance, task_seed
from posenc.encodings.absolute import Learned

EVAL_SEED = 12345
TOKENS_PER_FORWARD = 8192
MATERIALIZE = 2**22  # largest heads * T * T bias for which evaluation uses sdpa


def variant_model(model: nn.Module, cell: Cell, device: str) -> nn.Module:
    """The trained rope model rebuilt with the cell's zero-shot rope scaling."""
    kwargs = cell.train_cfg["model"]
    scaling = dict(kwargs["encoding_kwargs"], scaling=cell.cfg["rope_scaling"])
    scaled = build_model(dict(kwargs, encoding_kwargs=scaling))
    scaled.load_state_dict(model.state_dict())
    return scaled.to(device).eval()


def trained_rows(model: nn.Module, task, cell: Cell) -> list[Row]:
    """Rows about the training, at eval_len = train_len: steps, learned and valid@<step> (to the
    bar) or train_loss@<fraction>; a learned table's table_jump / table_periodicity (trained and
    @init) and table_drift@seen / @unseen (mean |W - W0| / |W0| of the rows training reached or
    not); a learned scalar encoding_scale."""
    row = lambda m, v: Row(  # noqa: E731
        cell.task, cell.label, cell.seed, cell.train_len, cell.train_len, m, v, "ok", None
    )
    done = getattr(model, "arena", {})
    rows = [row(f"train_loss@{f:g}", v) for f, v in done.get("curve", {}).items()]
    if "steps" in done:
        rows.append(row("steps", done["steps"]))
    if "learned" in done:
        rows.append(row("learned", float(done["learned"])))
        rows += [row(f"valid@{step}", v) for step, v in done["valid"].items()]
    enc = model.encoding
    if isinstance(getattr(enc, "scale", None), nn.Parameter) and enc.scale.numel() == 1:
        rows.append(row("encoding_scale", enc.scale.item()))
    if isinstance(enc, Learned):
        torch.manual_seed(cell.seed)  # the init the training started from
        init = build_model(cell.train_cfg["model"]).encoding.weight.detach().double()
        trained, seen = enc.weight.detach().double().cpu(), task.tokens(cell.train_len)
        drift = (trained - init).norm(dim=-1) / init.norm(dim=-1).clamp_min(1e-300)
        rows.append(row("table_drift@seen", drift[:seen].mean().item()))
        if trained.shape[0] > seen:
            rows.append(row("table_drift@unseen", drift[seen:].mean().item()))
        for name, table in (("", trained), ("@init", init)):
            rows.append(row(f"table_jump{name}", measures.table_jump(table[:seen])))
            rows.append(row(f"table_periodicity{name}", measures.table_periodicity(table[:seen])))
    return rows


def eval_batch(task, tc: TaskConfig, size: int):
    if tc.task == "lm":
        return task.eval_chunks(size, tc.eval_tokens)
    rng = np.random.default_rng([EVAL_SEED, task_seed(tc.task), size])
    return task.sample_batch(rng, tc.eval_samples, size)


@torch.no_grad()
def evaluate(model: nn.Module, task, cell: Cell, size: int, tc: TaskConfig,
             device: str) -> list[Row]:  # fmt: skip
    """The rows of one evaluation size: 'n/a' with a reason where the encoding cannot run."""
    metrics = metrics_for(cell.task, cell.train_len, size)
    row = lambda m, v, status="ok", reason=None: Row(  # noqa: E731
        cell.task, cell.label, cell.seed, cell.train_len, size, m, v, status, reason
    )
    T, limit = task.tokens(size), model.encoding.max_len  # a hard limit: a learned table
    if limit is not None and limit < T:
        reason = f"{cell.label} has a table of {limit} positions; {T} tokens need more"
        return [row(m, None, "n/a", reason) for m in metrics]
    batch = eval_batch(task, tc, size)
    # randomized: each instance `eval_draws` times, so that its exact match averages its draws
    # (one per row: per_instance), the same draws for every cell
    batch = [t.repeat(cell.cfg.get("eval_draws", 1), 1) for t in batch[:3]]
    torch.manual_seed(EVAL_SEED + size)
    # sequences per forward: <= TOKENS_PER_FORWARD tokens, and a bias sdpa can materialize
    per_chunk = min(max(1, TOKENS_PER_FORWARD // T), MATERIALIZE // (tc.heads * T * T))
    backend = model.attn_backend
    hooks = any(e.score_hooks for e in getattr(model, "encodings", [model.encoding]))
    model.attn_backend = "auto" if per_chunk < 1 or hooks else "sdpa"  # hooks: sdpa refuses
    per_chunk = max(1, per_chunk)
    try:
        nll, hit = [], []
        for i in range(0, batch[0].shape[0], per_chunk):
            x, y, m = (t[i : i + per_chunk].to(device) for t in batch)
            logits = per_instance(model, x, m).float()  # [b, T, V]
            nll.append(F.cross_entropy(logits.transpose(1, 2), y, reduction="none").cpu())
            hit.append((logits.argmax(-1) == y).cpu())
    finally:
        model.attn_backend = backend
    nll, hit, mask = torch.cat(nll), torch.cat(hit), batch[2]
    if cell.task != "lm":
        exact = (hit | ~mask).all(dim=1).float().mean().item()
        return [row("accuracy", exact), row("token_accuracy", hit[mask].float().mean().item())]
    loss = nll.mean().item()
    rows = [row("loss", loss), row("ppl", math.exp(loss))]
    for a, b in position_bands(cell.train_len, size):
        rows.append(row(f"loss@{a}-{b}", nll[:, a:b].mean().item()))
    return rows
