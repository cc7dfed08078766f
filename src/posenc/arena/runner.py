"""Train, evaluate, checkpoint, resume: the arena's cells.

A cell is (task, encoding label, seed, train_len). Training a cell trains one
`posenc.TransformerLM`; labels like "rope+yarn" evaluate the trained `rope` model zero-shot with a
rope scaling (no training of their own). Each cell's rows are written in one transaction after
its evaluation; training state is checkpointed atomically (tmp file + os.replace) every
`checkpoint_seconds`, so a run killed at any moment resumes where it was and a rerun skips
finished cells.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import os
import sys
import time
import zlib
from dataclasses import dataclass, field

import numpy as np
import torch
import torch.nn.functional as F

from posenc import __version__
from posenc.arena.store import Row, Store
from posenc.arena.tasks import TASK_NAMES
from posenc.base import PositionalEncoding
from posenc.checks import closest_names
from posenc.encodings import resolve
from posenc.model import TransformerLM

PROTOCOL = "arena-1"
TRAINED = ("learned", "sinusoidal", "rope", "nope", "alibi", "t5", "kerple", "fire")
VARIANTS = ("ntk", "yarn", "dynamic")  # zero-shot rope scalings: labels "rope+ntk", ...
DEFAULT_ENCODINGS = TRAINED + tuple(f"rope+{v}" for v in VARIANTS)
EVAL_SEED = 12345  # evaluation data is the same for every encoding and seed
ALGORITHMIC = ("copy", "reverse", "sort", "addition", "passkey")
# The algorithmic tasks train at half lm's length, 4x the sequences per batch, lr 1e-3: at
# L = 32 and batch 16 copy stays at 0 exact match after 1000 steps on CPU (lr 3e-3 is worse).
TASK_OVERRIDES = {t: {"train_len": 16, "batch_size": 64, "lr": 1e-3} for t in ALGORITHMIC}


@dataclass
class ArenaConfig:
    tasks: list[str] = field(default_factory=lambda: list(TASK_NAMES))
    encodings: list[str] = field(default_factory=lambda: list(DEFAULT_ENCODINGS))
    seeds: int = 2
    steps: int = 1000
    train_len: int = 32
    eval_lens: list[int] = field(default_factory=lambda: [32, 64, 128, 256])
    corpus: str | None = None
    db: str = "arena.sqlite"
    out: str = "arena_out"
    device: str = "cpu"
    dim: int = 128
    depth: int = 2
    heads: int = 4
    batch_size: int = 16
    lr: float = 2e-3
    eval_samples: int = 128  # sequences per eval length (tasks)
    eval_tokens: int = 32768  # bytes of the valid split (lm), the same for every length
    checkpoint_seconds: float = 30.0
    # per task: ArenaConfig fields replaced for that task (eval_lens scale with train_len)
    task_overrides: dict[str, dict] = field(default_factory=lambda: dict(TASK_OVERRIDES))


def task_config(cfg: ArenaConfig, task_name: str) -> ArenaConfig:
    """cfg with `task_name`'s overrides; a new train_len scales eval_lens by the same factor."""
    ov = cfg.task_overrides.get(task_name) or {}
    tcfg = dataclasses.replace(cfg, **ov, task_overrides={})
    L = ov.get("train_len", cfg.train_len)
    if cfg.train_len != L:
        tcfg.eval_lens = sorted({max(1, e * L // cfg.train_len) for e in cfg.eval_lens})
    return tcfg


# ----------------------------------------------------------------------------- encodings


def split_label(label: str) -> tuple[str, str | None]:
    """'rope+yarn' -> ('rope', 'yarn'); 'alibi' -> ('alibi', None)."""
    base, _, variant = label.partition("+")
    return base, (variant or None)


def rope_scaling(variant: str, train_len: int, eval_lens: list[int]) -> dict:
    """HF rope_scaling for a zero-shot variant; static ones target the longest eval length."""
    factor = max(1.0, max(eval_lens) / train_len)
    if variant == "dynamic":  # s = max(1, T / L) at each forward
        factor = 1.0
    return {"rope_type": variant, "factor": factor, "original_max_position_embeddings": train_len}


def validate_encodings(labels: list[str]) -> None:
    for label in labels:
        base, variant = split_label(label)
        resolve(base)  # ValueError with the closest names
        if variant is not None and (base != "rope" or variant not in VARIANTS):
            known = [f"rope+{v}" for v in VARIANTS]
            close = closest_names(label, known)
            hint = f"; did you mean {', '.join(repr(c) for c in close)}?" if close else ""
            raise ValueError(
                f"unknown encoding {label!r}{hint} Zero-shot variants: {', '.join(known)}"
            )


# ----------------------------------------------------------------------------- cells


@dataclass
class Cell:
    task: str
    label: str
    seed: int
    train_len: int
    train_cfg: dict  # hashed: everything that decides the trained weights
    cfg: dict  # train_cfg + the eval settings of this label

    @property
    def train_hash(self) -> str:
        return config_hash(self.train_cfg)

    @property
    def hash(self) -> str:
        return config_hash(self.cfg)

    @property
    def name(self) -> str:
        return f"{self.task}/{self.label}/seed{self.seed}"


def config_hash(cfg: dict) -> str:
    return hashlib.sha1(json.dumps(cfg, sort_keys=True).encode()).hexdigest()[:16]


def model_kwargs(task, encoding: str, cfg: ArenaConfig) -> dict:
    """TransformerLM(**kwargs); the encoding reads what it needs from train_len (a learned
    table's size, T5's buckets, FIRE's threshold)."""
    return {
        "vocab_size": task.vocab_size,
        "dim": cfg.dim,
        "depth": cfg.depth,
        "heads": cfg.heads,
        "encoding": encoding,
        "encoding_kwargs": {},
        "train_len": cfg.train_len,
        "causal": True,
    }


def ordered_labels(labels: list[str]) -> list[str]:
    """Each trained encoding followed by its zero-shot variants (one model in memory at a time)."""
    bases = list(dict.fromkeys(split_label(lb)[0] for lb in labels))
    group = lambda b: [lb for lb in labels if split_label(lb)[0] == b]  # noqa: E731
    return [lb for b in bases for lb in sorted(group(b), key=lambda lb: "+" in lb)]


def make_cells(cfg: ArenaConfig, tasks: dict) -> list[Cell]:
    cells, base_cfg = [], cfg
    for task_name in base_cfg.tasks:
        task = tasks[task_name]
        cfg = task_config(base_cfg, task_name)
        for seed in range(cfg.seeds):
            for label in ordered_labels(cfg.encodings):
                base, variant = split_label(label)
                train_cfg = {
                    "protocol": PROTOCOL,
                    "task": task_name,
                    "model": model_kwargs(task, base, cfg),
                    "seed": seed,
                    "train_len": cfg.train_len,
                    "steps": cfg.steps,
                    "batch_size": cfg.batch_size,
                    "lr": cfg.lr,
                }
                full = dict(train_cfg)
                if task_name == "lm":
                    train_cfg["corpus"] = task.corpus.digest
                    full = dict(train_cfg, eval_tokens=cfg.eval_tokens)
                else:
                    full["eval_samples"] = cfg.eval_samples
                if variant:
                    full["rope_scaling"] = rope_scaling(variant, cfg.train_len, cfg.eval_lens)
                cells.append(Cell(task_name, label, seed, cfg.train_len, train_cfg, full))
    return cells


def metrics_for(task_name: str, train_len: int, eval_len: int) -> list[str]:
    if task_name != "lm":
        return ["accuracy", "token_accuracy"]
    return ["loss", "ppl"] + [f"loss@{a}-{b}" for a, b in position_bands(train_len, eval_len)]


def position_bands(train_len: int, eval_len: int) -> list[tuple[int, int]]:
    """[0, L), [L, 2L), [2L, 4L), ... cut at eval_len: where the loss per position is reported."""
    bands, a, b = [], 0, train_len
    while a < eval_len:
        bands.append((a, min(b, eval_len)))
        a, b = b, 2 * b
    return bands


# ----------------------------------------------------------------------------- checkpoints


def atomic_save(obj, path: str) -> None:
    tmp = f"{path}.tmp{os.getpid()}"
    torch.save(obj, tmp)
    os.replace(tmp, path)


def model_path(out: str, cell: Cell) -> str:
    base = split_label(cell.label)[0]
    return os.path.join(
        out, "models", f"{cell.task}-{base}-s{cell.seed}-L{cell.train_len}-{cell.train_hash}.ckpt"
    )


def lr_at(step: int, steps: int, lr: float) -> float:
    warm = max(1, min(100, steps // 10))
    if step < warm:
        return lr * (step + 1) / warm
    t = (step - warm) / max(1, steps - warm)
    return lr * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * t)))


def build_model(kwargs: dict) -> TransformerLM:
    return TransformerLM(**kwargs)


def task_seed(name: str) -> int:
    return zlib.crc32(name.encode())


class Progress:
    """A tqdm bar per cell (stderr, TTY only) and one line per finished cell."""

    def __init__(self, total_steps: int, n_cells: int):
        self.total, self.done_steps, self.train_time = total_steps, 0, 0.0
        self.n_cells, self.finished = n_cells, 0
        self.start = time.time()
        self.tty = sys.stderr.isatty()
        self.rate = None  # training steps/s of the last trained cell

    def left(self, extra_steps: int = 0) -> str:
        done = self.done_steps + extra_steps
        if done == 0:
            return "?"
        rate = (time.time() - self.start) / done
        return fmt_time(rate * max(0, self.total - done))

    def bar(self, cell: Cell, steps: int, start: int):
        from tqdm import tqdm

        return tqdm(
            total=steps, initial=start, desc=cell.name, file=sys.stderr, disable=not self.tty,
            leave=False, dynamic_ncols=True,
        )  # fmt: skip

    def cell_done(self, cell: Cell, summary: str, wall: float) -> None:
        self.finished += 1
        rate = f"{self.rate:.1f} steps/s, " if self.rate else ""
        self.rate = None
        print(
            f"[{self.finished}/{self.n_cells}] {cell.name}: {summary} "
            f"({rate}{wall:.1f} s, ~{self.left()} left)",
            file=sys.stderr,
            flush=True,
        )


def fmt_time(s: float) -> str:
    return f"{s:.0f}s" if s < 90 else f"{s / 60:.1f}m" if s < 5400 else f"{s / 3600:.1f}h"


def train(cell: Cell, task, cfg: ArenaConfig, progress: Progress):
    """Train (or resume, or load) the model of a cell; returns it in eval mode."""
    final = model_path(cfg.out, cell)
    kwargs = cell.train_cfg["model"]
    if os.path.exists(final):
        ckpt = torch.load(final, map_location="cpu", weights_only=False)
        if ckpt.get("arena", {}).get("train_hash") == cell.train_hash:
            model = build_model(kwargs)
            model.load_state_dict(ckpt["model"])
            progress.done_steps += cfg.steps
            return model.to(cfg.device).eval()
    state_path = final[: -len(".ckpt")] + ".train.ckpt"
    torch.manual_seed(cell.seed)
    model = build_model(kwargs).to(cfg.device)
    opt = torch.optim.AdamW(model.parameters(), lr=cfg.lr, weight_decay=0.01, betas=(0.9, 0.98))
    rng = np.random.default_rng([cell.seed, task_seed(cell.task)])
    step = 0
    if os.path.exists(state_path):
        st = torch.load(state_path, map_location="cpu", weights_only=False)
        if st.get("train_hash") == cell.train_hash:
            model.load_state_dict(st["model"])
            opt.load_state_dict(st["optimizer"])
            rng.bit_generator.state = st["rng"]
            torch.set_rng_state(st["torch_rng"])
            step = st["step"]
            print(f"{cell.name}: resuming at step {step}", file=sys.stderr, flush=True)
    progress.done_steps += step
    t_train, first = time.time(), step
    model.train()
    bar = progress.bar(cell, cfg.steps, step)
    last_save, loss_ema = time.time(), None
    while step < cfg.steps:
        length = cfg.train_len
        if cell.task != "lm":
            length = int(rng.integers(task.min_len, cfg.train_len + 1))
        batch = task.sample_batch(rng, cfg.batch_size, length)
        inputs, targets, mask = (t.to(cfg.device) for t in batch)
        for g in opt.param_groups:
            g["lr"] = lr_at(step, cfg.steps, cfg.lr)
        logits = model(inputs)  # [B, T, V]
        loss = F.cross_entropy(logits[mask], targets[mask])
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        step += 1
        progress.done_steps += 1
        val = loss.item()
        loss_ema = val if loss_ema is None else 0.95 * loss_ema + 0.05 * val
        bar.update(1)
        bar.set_postfix_str(f"loss {loss_ema:.3f}, run ~{progress.left()} left", refresh=False)
        if step < cfg.steps and time.time() - last_save >= cfg.checkpoint_seconds:
            os.makedirs(os.path.dirname(state_path), exist_ok=True)
            atomic_save(
                {
                    "train_hash": cell.train_hash,
                    "model": model.state_dict(),
                    "optimizer": opt.state_dict(),
                    "rng": rng.bit_generator.state,
                    "torch_rng": torch.get_rng_state(),
                    "step": step,
                },
                state_path,
            )
            last_save = time.time()
    bar.close()
    if step > first:
        progress.rate = (step - first) / (time.time() - t_train)
    os.makedirs(os.path.dirname(final), exist_ok=True)
    sd = {k: v.detach().cpu() for k, v in model.state_dict().items()}
    arena_meta = {"train_hash": cell.train_hash, "train_cfg": cell.train_cfg, "loss": loss_ema}
    atomic_save({"config": dict(model.config), "model": sd, "arena": arena_meta}, final)
    if os.path.exists(state_path):
        os.remove(state_path)
    return model.eval()


def encoding_limit(model) -> int | None:
    """The max_len of the model's encoding (a learned table), None if unbounded."""
    for m in model.modules():
        if isinstance(m, PositionalEncoding) and getattr(m, "max_len", None):
            return int(m.max_len)
    return None


@torch.no_grad()
def evaluate(model, task, cell: Cell, eval_len: int, cfg: ArenaConfig) -> list[Row]:
    """The rows of one eval length: 'n/a' with a reason where the encoding cannot run."""
    metrics = metrics_for(cell.task, cell.train_len, eval_len)
    row = lambda m, v, status="ok", reason=None: Row(  # noqa: E731
        cell.task, cell.label, cell.seed, cell.train_len, eval_len, m, v, status, reason
    )
    limit = encoding_limit(model)
    if limit is not None and eval_len > limit:
        reason = f"{cell.label} has a table of {limit} positions; {eval_len} tokens need more"
        return [row(m, None, "n/a", reason) for m in metrics]
    if cell.task == "lm":
        batch = task.eval_chunks(eval_len, cfg.eval_tokens)
    else:
        rng = np.random.default_rng([EVAL_SEED, task_seed(cell.task), eval_len])
        batch = task.sample_batch(rng, cfg.eval_samples, eval_len)
    # sequences per forward: <= 8192 tokens, and a bias small enough for sdpa to materialize
    heads = cell.train_cfg["model"]["heads"]
    per_chunk = min(max(1, 8192 // eval_len), 2**22 // (heads * eval_len * eval_len))
    model.attn_backend = "auto" if per_chunk < 1 else "sdpa"
    per_chunk = max(1, per_chunk)
    nll, hit = [], []
    for i in range(0, batch.inputs.shape[0], per_chunk):
        x, y = (t[i : i + per_chunk].to(cfg.device) for t in batch[:2])
        logits = model(x).float()  # [b, T, V]
        nll.append(F.cross_entropy(logits.transpose(1, 2), y, reduction="none").cpu())
        hit.append((logits.argmax(-1) == y).cpu())
    nll, hit, mask = torch.cat(nll), torch.cat(hit), batch.mask
    if cell.task != "lm":
        exact = (hit | ~mask).all(dim=1).float().mean().item()
        model.attn_backend = "auto"
        return [row("accuracy", exact), row("token_accuracy", hit[mask].float().mean().item())]
    model.attn_backend = "auto"
    loss = nll.mean().item()
    rows = [row("loss", loss), row("ppl", math.exp(loss))]
    for a, b in position_bands(cell.train_len, eval_len):
        rows.append(row(f"loss@{a}-{b}", nll[:, a:b].mean().item()))
    return rows


def variant_model(model, cell: Cell, cfg: ArenaConfig):
    """The trained rope model rebuilt with a zero-shot rope scaling."""
    kwargs = json.loads(json.dumps(cell.train_cfg["model"]))
    kwargs["encoding_kwargs"] = dict(kwargs["encoding_kwargs"], scaling=cell.cfg["rope_scaling"])
    scaled = build_model(kwargs)
    scaled.load_state_dict(model.state_dict())
    return scaled.to(cfg.device).eval()


def check_conflicts(store: Store, cells: list[Cell]) -> None:
    for cell in cells:
        for r in store.cell_rows(cell.task, cell.label, cell.seed, cell.train_len):
            if r[4] != cell.hash:
                raise ValueError(
                    f"--db: {store.path} already holds {cell.name} train_len={cell.train_len} "
                    f"from another configuration (hash {r[4]}, this run {cell.hash}); "
                    "use another --db"
                )


def run(cfg: ArenaConfig, tasks: dict, store: Store) -> int:
    """Run every unfinished cell; returns the number of rows written."""
    torch.use_deterministic_algorithms(True, warn_only=True)
    versions = {"posenc_version": __version__, "torch_version": torch.__version__}
    cells = make_cells(cfg, tasks)
    check_conflicts(store, cells)
    todo = []
    for cell in cells:
        L = cell.train_len
        have = {(r[0], r[1]) for r in store.cell_rows(cell.task, cell.label, cell.seed, L)}
        missing = [
            e
            for e in task_config(cfg, cell.task).eval_lens
            if any((e, m) not in have for m in metrics_for(cell.task, L, e))
        ]
        if missing:
            todo.append((cell, missing))
    n_train = len({(c.task, split_label(c.label)[0], c.seed) for c, _ in todo})
    progress = Progress(n_train * cfg.steps, len(todo))
    if not todo:
        print(f"arena: all {len(cells)} cells already in {store.path}", file=sys.stderr)
    written, models = 0, {}
    for cell, missing in todo:
        t0 = time.time()
        task, tcfg = tasks[cell.task], task_config(cfg, cell.task)
        base, variant = split_label(cell.label)
        key = (cell.task, base, cell.seed)
        if key not in models:
            models.clear()  # keep one trained model in memory at a time
            models[key] = train(cell, task, tcfg, progress)
        model = models[key]
        if variant:
            model = variant_model(model, cell, tcfg)
        rows = [r for e in missing for r in evaluate(model, task, cell, e, tcfg)]
        wall = time.time() - t0
        store.write_cell(rows, config=cell.cfg, config_hash=cell.hash, wall_time=wall, **versions)
        written += len(rows)
        progress.cell_done(cell, summarize(rows), wall)
    return written


def summarize(rows: list[Row]) -> str:
    main = {r.eval_len: r for r in rows if r.metric in ("ppl", "accuracy")}
    parts = []
    for e, r in sorted(main.items()):
        parts.append(f"{r.metric}@{e}=" + ("n/a" if r.value is None else f"{r.value:.3g}"))
    return ", ".join(parts)


def replace(cfg: ArenaConfig, **kw) -> ArenaConfig:
    return dataclasses.replace(cfg, **kw)
