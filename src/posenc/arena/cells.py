"""The arena's grid: a cell is (task, label, seed, train_len); the cells of one trained model
("rope", "rope+ntk", ..., "rope+drope") form a group, the unit of work a worker takes.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass

import torch

from posenc.arena.backbones import build_model
from posenc.arena.config import (
    HYBRIDS,
    PROTOCOL,
    RANDOMIZED_DRAWS,
    RANDOMIZED_REACH,
    TaskConfig,
    backbone_of,
    drope_recipe,
    encoding_of,
    hybrid_kwargs,
    split_label,
)


@dataclass(frozen=True)
class Cell:
    task: str
    label: str
    seed: int
    train_len: int
    train_cfg: dict  # hashed: everything that decides the trained weights
    cfg: dict  # train_cfg + the evaluation settings of this label

    @property
    def train_hash(self) -> str:
        return config_hash(self.train_cfg)

    @property
    def hash(self) -> str:
        return config_hash(self.cfg)

    @property
    def name(self) -> str:
        return f"{self.task}/{self.label}/seed{self.seed}"

    @property
    def group(self) -> tuple[str, str, int, int]:
        """(task, trained label, seed, train_len): the cells that share one trained model."""
        return self.task, split_label(self.label)[0], self.seed, self.train_len


def config_hash(cfg: dict) -> str:
    return hashlib.sha1(json.dumps(cfg, sort_keys=True).encode()).hexdigest()[:16]


def model_kwargs(task, base: str, tc: TaskConfig) -> dict:
    """TransformerLM(**kwargs) for a trained label (train_len in tokens); randomized samples from
    [0, RANDOMIZED_REACH x the longest evaluation's tokens). "backbone" is absent for posenc's
    (its cells keep their hashes)."""
    backbone, base = backbone_of(base)
    if base in HYBRIDS:
        layers = hybrid_kwargs(base, tc.depth, task.tokens(tc.train_len))
        return dict(model_kwargs(task, "nope", tc), **layers)
    name, enc_kwargs = encoding_of(base)
    if name == "randomized":
        longest = task.tokens(max(tc.train_len, *tc.eval_lens))
        enc_kwargs = dict(enc_kwargs, sample_len=RANDOMIZED_REACH * longest, sample_at_eval=True)
    return {
        **({} if backbone == "posenc" else {"backbone": backbone}),
        "vocab_size": task.vocab_size,
        "dim": tc.dim,
        "depth": tc.depth,
        "heads": tc.heads,
        "encoding": name,
        "encoding_kwargs": enc_kwargs,
        "train_len": task.tokens(tc.train_len),
        "causal": True,
    }


def check_builds(task, tc: TaskConfig) -> None:
    """Every trained label of tc built as a worker builds it (on the meta device): a bad one is
    a ValueError naming it now, not in the worker (a missing optional package: the worker's)."""
    for base in dict.fromkeys(split_label(label)[0] for label in tc.encodings):
        try:
            with torch.device("meta"):
                build_model(model_kwargs(task, base, tc))
        except (TypeError, ValueError) as err:
            raise ValueError(f"{base!r} ({tc.task}): {err}") from None
        except ImportError:
            pass
        except (RuntimeError, NotImplementedError) as err:  # a backbone (transformers' Llama)
            if "meta" not in str(err):  # that reads values while it builds: the worker checks
                raise


def rope_scaling(variant: str, train_tokens: int, eval_tokens: list[int], head_dim: int) -> dict:
    """HF rope_scaling for a zero-shot variant; static ones target the longest eval length.
    longrope (no searched factors): short = 1, long ramps from 1 to the factor; proportional:
    the slowest quarter of the pairs stop turning."""
    factor = max(1.0, max(eval_tokens) / train_tokens)
    params = {"rope_type": variant, "factor": 1.0 if variant == "dynamic" else factor}
    if variant == "llama3":
        params |= {"low_freq_factor": 1.0, "high_freq_factor": 4.0}
    if variant == "longrope":
        half = head_dim // 2
        ramp = [1.0 + (factor - 1.0) * i / max(1, half - 1) for i in range(half)]
        params |= {"short_factor": [1.0] * half, "long_factor": ramp}
    if variant == "proportional":
        return {"rope_type": variant, "partial_rotary_factor": 0.75}
    return params | {"original_max_position_embeddings": train_tokens}


def ordered_labels(labels) -> list[str]:
    """Each trained label followed by its zero-shot variants (one model in memory at a time)."""
    bases = list(dict.fromkeys(split_label(lb)[0] for lb in labels))
    group = lambda b: [lb for lb in labels if split_label(lb)[0] == b]  # noqa: E731
    return [lb for b in bases for lb in sorted(group(b), key=lambda lb: "+" in lb)]


def make_cells(tcs: list[TaskConfig], tasks: dict) -> list[Cell]:
    cells = []
    for tc in tcs:
        task = tasks[tc.task]
        for seed in range(tc.seeds):
            for label in ordered_labels(tc.encodings):
                base, variant = split_label(label)
                train_cfg = {
                    "protocol": PROTOCOL,
                    "task": tc.task,
                    "model": model_kwargs(task, base, tc),
                    "seed": seed,
                    "train_len": tc.train_len,
                    "steps": tc.steps,
                    "batch_size": tc.batch_size,
                    "lr": tc.lr,
                }
                # keys only where they differ from the recipe before train-to-the-bar (issue
                # 29), so that the cells it did not change (lm, passkey) keep their hashes
                if tc.task != "lm" and tc.mix != 0.5:
                    train_cfg["mix"] = tc.mix
                randomized = train_cfg["model"]["encoding"] == "randomized"
                if randomized:
                    train_cfg["draws"] = "per instance, own length"  # train.per_instance
                if tc.check_every:
                    train_cfg["bar"] = {"stop": tc.stop, "valid": tc.valid,
                                        "every": tc.check_every, "decay": tc.decay}  # fmt: skip
                if tc.task == "lm":
                    train_cfg["corpus"] = task.corpus.digest
                    full = dict(train_cfg, eval_tokens=tc.eval_tokens)
                else:
                    full = dict(train_cfg, eval_samples=tc.eval_samples)
                if randomized:
                    full["eval_draws"] = RANDOMIZED_DRAWS  # evaluate: draws per instance
                if variant == "drope":
                    full["drope"] = drope_recipe(tc)
                elif variant:
                    toks = [task.tokens(e) for e in tc.eval_lens]
                    L, dh = task.tokens(tc.train_len), tc.dim // tc.heads
                    full["rope_scaling"] = rope_scaling(variant, L, toks, dh)
                cells.append(Cell(tc.task, label, seed, tc.train_len, train_cfg, full))
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
