"""The arena's configuration: the default grid, the training recipe per task, encoding labels.

Lengths are in each task's unit (posenc.arena.tasks); L = train_len is the largest training
size. Labels: a registry name ("alibi", "sinusoidal(fusion=concat)", "learned(max_len=1024)");
"randomized:<name>" (Ruoss et al. 2023); "rope+<variant>", the trained rope model with a
zero-shot scaling; "<name>+drope" (posenc.arena.drope); a hybrid schedule ("rnope-swa");
"hf-llama:<label>" and "lstm:<label>" for another backbone (posenc.arena.backbones).
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass, field

from posenc.arena.names import BACKBONES, DEFAULT_TASKS, TASK_NAMES, VARIANTS
from posenc.checks import closest_names
from posenc.cliargs import split_call
from posenc.encodings import build_for, resolve

PROTOCOL = "arena-2"  # hashed into every cell: bump when the recipe changes what a cell means
HF_ENCODINGS = ("rope", "nope")  # what hf-llama can take (what posenc.hf.patch applies)
RANDOMIZED_REACH = 4  # randomized: positions sampled from [0, 4 x tokens of the longest eval)
# randomized: each instance evaluated under 8 position draws (one draw moved a 128-instance
# exact match by up to 0.06, docs/arena/recipe round 6)
RANDOMIZED_DRAWS = 8
# DroPE: recalibrate for 20% of the task's steps (10% left passkey at 0.89-0.92 at L:
# docs/arena/frontier/README.md), lr warmed up over 10%, then constant at 1.0 x the task's lr
DROPE_FRACTION = 0.2
DROPE_WARMUP = 0.1
DROPE_LR = 1.0
# Hybrid per-layer schedules (TransformerLM's per-layer `encoding` and `window`): rnope-swa is
# RoPE with a sliding window in three layers of four, NoPE with global attention in the fourth
# and the last (Yang et al. 2025; Command A's 3:1). The window is shorter than training
# sequences, so the global NoPE layer learns the long-range retrieval already in training.
HYBRIDS = ("rnope-swa",)
GLOBAL_EVERY = 4  # one global NoPE layer per four (3:1, Command A / Llama 4)
WINDOW_FRACTION = 0.5  # the local layers' window: half the training length in tokens

# Kazemnejad et al.'s comparison and Ruoss et al.'s randomized positions, on the algorithmic
# tasks; Press et al.'s perplexity findings and the zero-shot rope scalings on lm.
ALGORITHMIC_ENCODINGS = (
    "nope", "t5", "alibi", "rope", "sinusoidal", "randomized:rope", "randomized:sinusoidal",
)  # fmt: skip
LM_ENCODINGS = ("learned", "sinusoidal", "rope", "nope", "alibi", "t5", "kerple", "fire") + tuple(
    f"rope+{v}" for v in ("ntk", "yarn", "dynamic")
)
# context extension: rope trained at L, every zero-shot scaling at 2L..8L (and NoPE beside it)
PASSKEY_ENCODINGS = ("nope", "rope") + tuple(f"rope+{v}" for v in VARIANTS)
# DroPE and the RNoPE-SWA hybrid beside them, on context extension (passkey) and lm
PASSKEY_ENCODINGS += ("rope+drope", "rnope-swa")
LM_ENCODINGS += ("rope+drope", "rnope-swa")

# Train to the bar (Kazemnejad et al.): an algorithmic model trains until its exact match on
# VALID held-out instances is at least STOP at every size 1..L, checked every CHECK_EVERY steps,
# `steps` the cap; STOP is a margin above BAR (docs/arena/recipe: rounds 4 and 5).
BAR = 0.95  # exact match at L (median over seeds) for a model to count as trained
STOP = 0.97
VALID = 256
CHECK_EVERY = 250

# The training recipe per task (docs/arena/README.md); `mix` is the share of each batch at size
# L, the rest at sizes U(1..L).
ALGO = dict(dim=64, depth=4, heads=4, batch_size=32, lr=1e-3, steps=3000, check_every=0, mix=0.5,
            decay=0, stop=STOP, valid=VALID)  # fmt: skip
BARRED = dict(ALGO, train_len=8, steps=15000, decay=0, check_every=CHECK_EVERY,
              encodings=ALGORITHMIC_ENCODINGS)  # fmt: skip
LM = dict(dim=128, depth=2, batch_size=16, lr=2e-3, steps=1000, train_len=32, mix=0.0)
TASK_DEFAULTS: dict[str, dict] = {
    "copy": BARRED,
    "reverse": BARRED,
    "sort": BARRED,
    "addition": dict(BARRED, train_len=5, mix=0.0),
    "passkey": dict(ALGO, train_len=32, encodings=PASSKEY_ENCODINGS, eval_lens=(32, 64, 128, 256)),
    "lm": dict(ALGO, **LM, encodings=LM_ENCODINGS),
}


@dataclass
class ArenaConfig:
    """A run. Fields left None take the task's default from TASK_DEFAULTS."""

    tasks: list[str] = field(default_factory=lambda: list(DEFAULT_TASKS))
    encodings: list[str] | None = None
    backbones: tuple[str, ...] = ("posenc",)  # each label runs on each (hf-llama: rope, nope)
    seeds: int = 3
    steps: int | None = None
    fixed_steps: bool = False  # train exactly `steps` (no bar, lr cosine over all of them)
    train_len: int | None = None
    eval_lens: list[int] | None = None
    dim: int | None = None
    depth: int | None = None
    heads: int | None = None
    batch_size: int | None = None
    lr: float | None = None
    corpus: str | None = None
    db: str = "arena.sqlite"
    out: str = "arena_out"
    device: str = "cpu"
    workers: int = 1
    ray: str | None = None  # None: this machine; "local", "auto" or "HOST:PORT": a Ray cluster
    cpus_per_cell: int = 1
    gpus_per_cell: float = 0.0
    ray_slots: int | None = None  # groups in flight on the cluster (default: what fits)
    eval_samples: int = 128  # instances per eval size (tasks)
    eval_tokens: int = 32768  # bytes of the valid split (lm), the same for every length
    checkpoint_seconds: float = 30.0
    # per task: recipe fields replaced for that task only (the quick run's lm, tests)
    overrides: dict[str, dict] = field(default_factory=dict)


@dataclass(frozen=True)
class TaskConfig:
    """Everything that decides one task's cells: the recipe, the lengths, the labels."""

    task: str
    encodings: tuple[str, ...]
    seeds: int
    steps: int
    train_len: int
    eval_lens: tuple[int, ...]
    dim: int
    depth: int
    heads: int
    batch_size: int
    lr: float
    check_every: int  # 0: train `steps`; else check the bar every so many steps, `steps` the cap
    mix: float  # share of each training batch at size L (algorithmic tasks)
    decay: int  # steps of the lr's cosine (0: all `steps`); at its floor after
    stop: float  # with check_every: the validation's lowest exact match that ends training
    valid: int  # with check_every: validation instances per size
    eval_samples: int
    eval_tokens: int


def task_config(cfg: ArenaConfig, task: str) -> TaskConfig:
    """The run's settings for `task`: its defaults, overridden by what the run sets."""
    d = {**TASK_DEFAULTS[task], **cfg.overrides.get(task, {})}
    pick = {
        k: d.get(k) if getattr(cfg, k, None) is None else getattr(cfg, k)
        for k in (*ALGO, "train_len", "eval_lens", "encodings")
    }
    pick["decay"] = min(pick["decay"], pick["steps"])  # a cap under the decay: decay to the cap
    if cfg.fixed_steps:
        pick["check_every"], pick["decay"] = 0, 0
    L, lens, encodings = pick["train_len"], pick.pop("eval_lens"), pick.pop("encodings")
    if lens is None:  # lm: L..8L; the others every size 1..2L (passkey from its minimum, 12)
        low = min(12 if task == "passkey" else 1, L)
        lens = [L, 2 * L, 4 * L, 8 * L] if task == "lm" else range(low, 2 * L + 1)
    return TaskConfig(
        task=task, encodings=tuple(on_backbones(encodings, cfg.backbones)),
        seeds=cfg.seeds, eval_lens=tuple(sorted(set(lens))), eval_samples=cfg.eval_samples,
        eval_tokens=cfg.eval_tokens, **pick,
    )  # fmt: skip


def split_label(label: str) -> tuple[str, str | None]:
    """'rope+yarn' -> ('rope', 'yarn'); 'alibi' -> ('alibi', None)."""
    base, _, variant = label.partition("+")
    return base, (variant or None)


def backbone_of(label: str) -> tuple[str, str]:
    """'hf-llama:rope+yarn' -> ('hf-llama', 'rope+yarn'); 'rope' -> ('posenc', 'rope')."""
    head, sep, rest = label.partition(":")
    return (head, rest) if sep and head in BACKBONES else ("posenc", label)


# What the lstm backbone applies of an encoding (it has no attention): its embed() alone.
LSTM_TAKES = frozenset({"embed", "embed_dim", "token_scale"})


def takes(backbone: str, name: str) -> str | None:
    """None if `backbone` can run the registry name `name`, else why not."""
    if backbone == "hf-llama" and name not in HF_ENCODINGS:
        return (f"the hf-llama backbone takes {', '.join(HF_ENCODINGS)} (and rope's zero-shot "
                "variants): what posenc.hf.patch applies to transformers' attention")  # fmt: skip
    if name in HYBRIDS:
        return None if backbone == "posenc" else f"{name} is a schedule of posenc's layers"
    cls = resolve(name)
    if backbone == "lstm" and (not cls.provides <= LSTM_TAKES or cls.position_dims != 1):
        return "the lstm backbone has no attention: it takes 1-D absolute encodings and nope"
    return None


def on_backbones(labels, backbones) -> list[str]:
    """Each label on each backbone (prefixed) where that backbone can run it, posenc all;
    labels already prefixed stay as they are."""
    out = []
    for backbone in backbones:
        for label in labels:
            if backbone_of(label)[0] != "posenc" or backbone == "posenc":
                out.append(label)
            elif takes(backbone, encoding_of(split_label(label)[0])[0]) is None:
                out.append(f"{backbone}:{label}")
    return list(dict.fromkeys(out))


def drope_recipe(tc: TaskConfig) -> dict:
    """DroPE's recalibration for a task (hashed into its cells: a change changes their hash)."""
    steps = max(1, round(DROPE_FRACTION * tc.steps))
    return {"recipe": "drope-1", "encoding": "nope", "steps": steps, "lr": DROPE_LR * tc.lr,
            "warmup": max(1, round(DROPE_WARMUP * steps))}  # fmt: skip


def hybrid_kwargs(name: str, depth: int, train_tokens: int) -> dict:
    """TransformerLM's `encoding` schedule and per-layer `window` for a hybrid label."""
    if name not in HYBRIDS:
        raise ValueError(f"unknown hybrid {name!r}; known: {', '.join(HYBRIDS)}")
    window = max(1, int(WINDOW_FRACTION * train_tokens))
    is_global = [(i + 1) % GLOBAL_EVERY == 0 or i == depth - 1 for i in range(depth)]
    return {
        "encoding": ["nope" if g else "rope" for g in is_global],
        "window": [None if g else window for g in is_global],
    }


def encoding_of(base: str) -> tuple[str, dict]:
    """A trained label -> (registry name, encoding_kwargs): 'randomized:rope' ->
    ('randomized', {'encoding': 'rope'}); 'learned(max_len=64)' -> ('learned', {'max_len': 64})."""
    base, kwargs = split_call(base, "label", "max_len=64")
    if base.startswith("randomized:"):  # the keywords are NAME's: randomized:rope(base=500)
        inner = {"encoding": base.partition(":")[2]}
        return "randomized", inner | ({"encoding_kwargs": kwargs} if kwargs else {})
    return base, kwargs


def validate_encodings(labels: list[str]) -> None:
    """ValueError naming the label (with the closest names) unless every label is runnable."""
    for label in labels:
        backbone, inner = backbone_of(label)
        base, variant = split_label(inner)
        if base in HYBRIDS:
            why = takes(backbone, base) or (variant and f"{base} is a schedule: no variant")
            if why:
                raise ValueError(f"{label!r}: {why}")
            continue
        try:
            name, kwargs = encoding_of(base)
        except ValueError as err:
            raise ValueError(f"{label!r}: {err}") from None
        resolve(name)  # ValueError with the closest names
        why = takes(backbone, name)
        if why:
            raise ValueError(f"{label!r}: {why}")
        inner_name = kwargs.get("encoding") if name == "randomized" else None
        own = kwargs.get("encoding_kwargs", {}) if inner_name else kwargs
        params = inspect.signature(resolve(inner_name or name)).parameters
        unknown = [k for k in own if k not in params]
        if unknown:
            raise ValueError(
                f"{label!r}: {inner_name or name} takes no keyword {', '.join(unknown)}; it "
                f"takes {', '.join(params)}"
            )
        try:  # every label built as a worker builds it: a bad value fails here, not hours later
            build_for(name, causal=True, **dict(dim=64, heads=4, head_dim=16, train_len=8),
                      **kwargs)  # fmt: skip
        except (TypeError, ValueError) as err:
            raise ValueError(f"{label!r}: {err}") from None
        if variant == "drope":
            if "embed" in resolve(name).provides:
                raise ValueError(f"{label!r}: DroPE drops an encoding that acts in attention; "
                                 f"{base} is absolute (it acts at the input)")  # fmt: skip
            continue
        if variant is not None and (base != "rope" or variant not in VARIANTS):
            known = [f"rope+{v}" for v in (*VARIANTS, "drope")]
            close = closest_names(label, known)
            hint = f"; did you mean {', '.join(repr(c) for c in close)}?" if close else ""
            raise ValueError(
                f"unknown encoding {label!r}{hint} Variants of the trained rope model: "
                f"{', '.join(known)}"
            )


def validate_tasks(names: list[str]) -> None:
    for name in names:
        if name not in TASK_NAMES:
            close = closest_names(name, TASK_NAMES)
            hint = f"; did you mean {', '.join(repr(c) for c in close)}?" if close else ""
            raise ValueError(f"unknown task {name!r}{hint} Known tasks: {', '.join(TASK_NAMES)}")
