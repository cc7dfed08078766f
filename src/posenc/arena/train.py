"""Training one arena model: the recipe, batches, and checkpoints that survive a kill (saved
atomically every `checkpoint_seconds`). Everything random is seeded from the cell, so a cell
trains to the same weights in any process, in any order."""

from __future__ import annotations

import math
import os
import re
import sys
import time
import zlib

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from posenc.arena.backbones import build_model, decayed
from posenc.arena.cells import Cell
from posenc.arena.config import TaskConfig, split_label
from posenc.checks import load_checkpoint

WEIGHT_DECAY = 0.1
WARMUP = 100
VALID_SEED = 54321  # the bar's validation instances (evaluation: posenc.arena.evaluate.EVAL_SEED)
# the training loss (EMA) recorded at these fractions of the steps: a learning curve per model
CURVE = (0.125, 0.25, 0.5, 1.0)


def param_groups(model: nn.Module) -> list[dict]:
    """AdamW groups: decay on the blocks' weight matrices; none on the embedding (tied with the
    head), norms, biases and the encoding's own parameters (tables, slopes, FIRE's MLP)."""
    decay, rest = [], []
    for name, p in model.named_parameters():
        (decay if decayed(name, p) else rest).append(p)
    return [{"params": decay, "weight_decay": WEIGHT_DECAY}, {"params": rest, "weight_decay": 0.0}]


def lr_at(step: int, steps: int, lr: float) -> float:
    """Linear warmup, then cosine from lr down to 0.1 lr at `steps`, and 0.1 lr after."""
    warm = max(1, min(WARMUP, steps // 10))
    if step < warm:
        return lr * (step + 1) / warm
    t = min(1.0, (step - warm) / max(1, steps - warm))
    return lr * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * t)))


def train_batch(task, tc: TaskConfig, rng: np.random.Generator):
    """lm: batch_size windows of train_len bytes; algorithmic: a share `mix` at size L, the rest
    at sizes U(min..L), right-padded."""
    if tc.task == "lm":
        return task.sample_batch(rng, tc.batch_size, tc.train_len)
    sizes = rng.integers(task.min_size, tc.train_len + 1, size=tc.batch_size)
    sizes[: round(tc.batch_size * tc.mix)] = tc.train_len
    return task.sample(rng, sizes)


def validation(task, tc: TaskConfig) -> list:
    """The bar's held-out data: tc.valid instances at every size min..L, from a seed of their own
    (neither the training stream's nor the evaluation's)."""
    sizes = range(task.min_size, tc.train_len + 1)
    rng = lambda n: np.random.default_rng([VALID_SEED, task_seed(tc.task), n])  # noqa: E731
    return [task.sample_batch(rng(n), tc.valid, n) for n in sizes]


def per_instance(model: nn.Module, inputs: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """logits [B, T, V] of inputs [B, T] (mask [B, T]: the scored targets). An encoding that
    draws its positions (randomized) draws one subset per instance, of its own length (Ruoss et
    al.): its right-padding is a document of its own (doc_ids) at its last position. A shared
    [T] draw would train a short instance on the first few positions of the longest row's."""
    if "sample_positions" not in model.encoding.provides:
        return model(inputs)
    B, T = inputs.shape
    last = T - 1 - mask.flip(-1).int().argmax(dim=-1, keepdim=True)  # [B, 1]
    index = torch.arange(T, device=inputs.device).expand(B, T)
    pad = index > last  # [B, T]
    return model(inputs, positions=index.minimum(last), doc_ids=pad.long() if pad.any() else None)


@torch.no_grad()
def lowest_exact_match(model: nn.Module, batches: list, device: str) -> float:
    """The lowest exact match over the batches; torch's random state is kept (randomized draws
    positions here too), so that checking does not change the training."""
    was_training = model.training
    model.eval()
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(VALID_SEED)
        low = 1.0
        for inputs, targets, mask in (b[:3] for b in batches):
            logits = per_instance(model, inputs.to(device), mask.to(device))
            hit = logits.argmax(-1).cpu() == targets
            low = min(low, (hit | ~mask).all(dim=1).float().mean().item())
    model.train(was_training)
    return low


def task_seed(name: str) -> int:
    return zlib.crc32(name.encode())


def atomic_save(obj, path: str) -> None:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    tmp = f"{path}.tmp{os.getpid()}"
    torch.save(obj, tmp)
    os.replace(tmp, path)


def model_path(out: str, cell: Cell) -> str:
    base = re.sub(r"[^\w.+-]", "-", split_label(cell.label)[0])  # 'lstm:learned(max_len=64)'
    name = f"{cell.task}-{base}-s{cell.seed}-L{cell.train_len}-{cell.train_hash}.ckpt"
    return os.path.join(out, "models", name)


def read_checkpoint(path: str, name: str) -> dict | None:
    """A checkpoint's contents, or None if there is none; one that cannot be read (truncated,
    corrupt, not a checkpoint) is reported (as `name`'s), removed and treated as absent."""
    if not os.path.exists(path):
        return None
    try:
        return load_checkpoint(path, (), weights_only=False)  # holds numpy RNG state too
    except (ValueError, OSError) as err:
        print(f"{name}: checkpoint unreadable: {err}; training from scratch",
              file=sys.stderr, flush=True)  # fmt: skip
        os.remove(path)
        return None


def load_final(path: str, key: str, kwargs: dict, name: str) -> nn.Module | None:
    """The finished model saved at `path` under `key` (a hash), built from `kwargs`; or None."""
    ckpt = read_checkpoint(path, name)
    if ckpt is None or ckpt.get("arena", {}).get("train_hash") != key:
        return None
    model = build_model(kwargs)
    try:
        model.load_state_dict(ckpt["model"])
    except (KeyError, RuntimeError) as err:
        print(f"{name}: {path} does not fit the model ({type(err).__name__}); "
              "training from scratch", file=sys.stderr, flush=True)  # fmt: skip
        return None
    model.arena = ckpt["arena"]  # fit()'s record: curves, steps taken
    return model


def save_final(path: str, model: nn.Module, key: str, kwargs: dict, meta: dict) -> None:
    """{"config": kwargs (build_model rebuilds it), "model", "arena": meta + train_hash=key}."""
    sd = {k: v.detach().cpu() for k, v in model.state_dict().items()}
    atomic_save({"config": dict(kwargs), "model": sd, "arena": {"train_hash": key, **meta}}, path)


def train(cell: Cell, task, tc: TaskConfig, *, out: str, device: str, checkpoint_seconds: float,
          on_step=None) -> nn.Module:  # fmt: skip
    """Train (or resume, or load) the model of a cell; returns it in eval mode. on_step(step,
    loss) is called after every step."""
    final = model_path(out, cell)
    model = load_final(final, cell.train_hash, cell.train_cfg["model"], cell.name)
    if model is not None:
        return model.to(device).eval()

    def fresh():
        torch.manual_seed(cell.seed)
        model = build_model(cell.train_cfg["model"]).to(device)
        opt = torch.optim.AdamW(param_groups(model), lr=tc.lr, betas=(0.9, 0.98))
        return model, opt, np.random.default_rng([cell.seed, task_seed(cell.task)])

    lr_of = lambda step: lr_at(step, tc.decay or tc.steps, tc.lr)  # noqa: E731 (decay <= steps)
    check = None
    if tc.check_every:
        batches = validation(task, tc)
        check = lambda m: lowest_exact_match(m, batches, device)  # noqa: E731
    model = fit(cell.name, cell.train_hash, final, fresh, tc.steps, lr_of, task, tc,
                device=device, checkpoint_seconds=checkpoint_seconds, on_step=on_step,
                kwargs=cell.train_cfg["model"], meta={"train_cfg": cell.train_cfg},
                check=check, check_every=tc.check_every)  # fmt: skip
    return model.eval()


def fit(name: str, key: str, final: str, fresh, steps: int, lr_of, task, tc: TaskConfig, *,
        device: str, checkpoint_seconds: float, kwargs: dict, meta: dict, on_step=None,
        check=None, check_every: int = 0) -> nn.Module:  # fmt: skip
    """`steps` optimizer steps from fresh() -> (model, optimizer, numpy rng) at lr_of(step),
    resuming from the state saved beside `final` under `key`; the model is then saved at `final`
    (kwargs, meta, loss, steps, curves). With check_every, check(model) runs every check_every
    steps and at the last, and training stops (`learned`) once it reaches tc.stop."""
    state_path = final[: -len(".ckpt")] + ".train.ckpt"
    model, opt, rng = fresh()
    step = 0
    # step -> fraction of the steps: the loss curve of a fixed budget (a capped one has `valid`)
    marks = {} if check_every else {max(1, round(f * steps)): f for f in CURVE}
    curve, valid, loss_ema = {}, {}, None
    st = read_checkpoint(state_path, name)
    if st is not None and st.get("train_hash") == key:
        try:
            model.load_state_dict(st["model"])
            opt.load_state_dict(st["optimizer"])
            rng.bit_generator.state = st["rng"]
            torch.set_rng_state(st["torch_rng"])
            step = int(st["step"])
            curve, valid = dict(st.get("curve", {})), dict(st.get("valid", {}))
            loss_ema = st.get("loss_ema")
            print(f"{name}: resuming at step {step}", file=sys.stderr, flush=True)
        except (KeyError, RuntimeError, ValueError, TypeError) as err:
            print(f"{name}: {state_path} does not fit ({type(err).__name__}); training "
                  "from scratch", file=sys.stderr, flush=True)  # fmt: skip
            (model, opt, rng), step = fresh(), 0
    model.train()
    last_save = time.time()
    while step < steps:
        batch = train_batch(task, tc, rng)
        inputs, targets, mask = (t.to(device) for t in batch[:3])
        for g in opt.param_groups:
            g["lr"] = lr_of(step)
        logits = per_instance(model, inputs, mask)  # [B, T, V]
        loss = F.cross_entropy(logits[mask], targets[mask])
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        step += 1
        val = loss.item()
        loss_ema = val if loss_ema is None else 0.95 * loss_ema + 0.05 * val
        if step in marks:
            curve[marks[step]] = loss_ema
        if on_step is not None:
            on_step(step, loss_ema)
        if check_every and (step % check_every == 0 or step == steps):
            valid[step] = check(model)
            if valid[step] >= tc.stop:
                break
        if step < steps and time.time() - last_save >= checkpoint_seconds:
            atomic_save(
                {
                    "train_hash": key,
                    "model": model.state_dict(),
                    "optimizer": opt.state_dict(),
                    "rng": rng.bit_generator.state,
                    "torch_rng": torch.get_rng_state(),
                    "step": step,
                    "curve": curve,
                    "valid": valid,
                    "loss_ema": loss_ema,
                },
                state_path,
            )
            last_save = time.time()
    done = {"loss": loss_ema, "curve": curve, "steps": step}
    if check_every:
        done |= {"valid": valid, "learned": valid.get(step, 0.0) >= tc.stop}
    model.arena = done  # evaluate.trained_rows
    save_final(final, model, key, kwargs, {**meta, **done})
    if os.path.exists(state_path):
        os.remove(state_path)
    return model
