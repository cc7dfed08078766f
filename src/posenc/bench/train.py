"""Section `train`: training tokens/s of posenc.TransformerLM against x-transformers at the
arena's default size, and of the score encodings against posenc before issue 15
(POSENC_DISTANCE_BIAS=0) and nope (the limit). One step: forward, cross-entropy, backward, AdamW.
"""

from __future__ import annotations

import os
from unittest import mock

import torch

from posenc import TransformerLM
from posenc.arena.config import ArenaConfig, task_config
from posenc.arena.tasks import build_task
from posenc.attention.fast_bias import ENV_VAR
from posenc.bench.common import Sizes, optional, timeit_many
from posenc.bench.report import Report, Row

VOCAB = 256
SMOKE = dict(dim=32, depth=1, heads=2, batch=2, T=16)  # --smoke: a tiny model
# encoding -> the x-transformers keyword that turns it on (its Decoder has no registry)
XT_ENCODING = {"rope": dict(rotary_pos_emb=True), "alibi": dict(alibi_pos_bias=True)}


def arena_size() -> dict:
    """The arena's default model and batch on its first algorithmic task (copy)."""
    c = task_config(ArenaConfig(), "copy")
    T = build_task("copy").tokens(c.train_len)
    return dict(dim=c.dim, depth=c.depth, heads=c.heads, batch=c.batch_size, T=T)


def xtransformers_model(cfg: dict, encoding: str, vocab: int):
    from x_transformers import Decoder, TransformerWrapper

    return TransformerWrapper(
        num_tokens=vocab, max_seq_len=cfg["T"], use_abs_pos_emb=False,
        attn_layers=Decoder(
            dim=cfg["dim"], depth=cfg["depth"], heads=cfg["heads"],
            attn_dim_head=cfg["dim"] // cfg["heads"], ff_mult=4, **XT_ENCODING[encoding],
        ),
        tie_embedding=True,  # posenc ties the output head to the embedding too
    )  # fmt: skip


def bench_train(rep: Report, s: Sizes, device: str) -> dict:
    """Rows "train" (ratio: posenc's tokens/s / the row's); {encoding: {impl: tokens/s}}."""
    cfg = SMOKE if s.B == 1 else arena_size()  # s.B == 1: --smoke
    B, T = cfg["batch"], cfg["T"]
    out = {}
    xt = optional("x_transformers", rep.notes, "x-transformers", "training comparison")
    for encoding in s.train_encodings:
        steps = {"posenc": train_step(cfg, encoding, device)}
        if xt is not None:
            steps["x-transformers"] = train_step(cfg, encoding, device, xtransformers_model)
        ms = timeit_many(steps, device, s.train_steps, warmup=3)  # side by side, in turn
        case = case_of(cfg, encoding)
        speeds = {name: B * T / (t / 1e3) for name, t in ms.items()}
        for name, t in ms.items():
            note = f"{speeds[name]:,.0f} tok/s, {steps[name].params:,} params"
            rep.rows.append(Row("train", case, name, t, t / ms["posenc"], note=note))
        out[encoding] = speeds
    for encoding in s.train_score_encodings:
        out.setdefault(encoding, {}).update(score_vs_before(rep, s, device, cfg, encoding))
    return out


def case_of(cfg: dict, encoding: str) -> str:
    return (f"{encoding} dim={cfg['dim']} depth={cfg['depth']} heads={cfg['heads']} "
            f"B={cfg['batch']} T={cfg['T']}")  # fmt: skip


def posenc_model(cfg: dict, encoding: str, vocab: int):
    return TransformerLM(vocab, cfg["dim"], cfg["depth"], cfg["heads"], encoding=encoding,
                         max_len=cfg["T"], train_len=cfg["T"])  # fmt: skip


def train_step(cfg: dict, encoding: str, device: str, build=posenc_model):
    """One AdamW step of a fresh model (build(cfg, encoding, vocab)) on fixed random tokens,
    as a call; its .params: the model's parameter count."""
    torch.manual_seed(0)
    B, T = cfg["batch"], cfg["T"]
    model = build(cfg, encoding, VOCAB).to(device).train()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    x = torch.randint(0, VOCAB, (B, T + 1), generator=torch.Generator().manual_seed(0)).to(device)

    def step():
        logits = model(x[:, :-1])  # [B, T, vocab]
        loss = torch.nn.functional.cross_entropy(logits.flatten(0, 1), x[:, 1:].flatten())
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()

    step.params = sum(p.numel() for p in model.parameters())
    return step


def score_vs_before(rep: Report, s: Sizes, device: str, cfg: dict, encoding: str) -> dict:
    """Rows "train" for one score encoding: posenc, posenc before, nope; {impl: tokens/s}."""
    step, limit = train_step(cfg, encoding, device), train_step(cfg, "nope", device)

    def with_env(value):
        def run():
            os.environ[ENV_VAR] = value
            step()

        return run

    with mock.patch.dict(os.environ):  # the environment as it was after
        fns = {"posenc": with_env("1"), "posenc before": with_env("0"), "nope": limit}
        ms = timeit_many(fns, device, s.train_steps, warmup=3)
    B, T = cfg["batch"], cfg["T"]
    case = case_of(cfg, encoding)
    labels = {"posenc": "posenc", "posenc before": f"posenc before ({ENV_VAR}=0)",
              "nope": "no encoding (nope: limit)"}  # fmt: skip
    for name, t in ms.items():
        note = f"{B * T / (t / 1e3):,.0f} tok/s"
        rep.rows.append(
            Row("train", case, labels[name], t, t / ms["posenc"], ms["nope"] / t, None, note)
        )
    return {name: B * T / (t / 1e3) for name, t in ms.items()}
