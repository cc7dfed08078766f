"""The worked example of docs/hf/golden.md: transformers' own RoPE caches of a Llama 3.1 config
(rope_theta 500000, llama3 scaling, 131072 positions; the rotary module only, no weights),
dumped and judged by `posenc conform`. Its output is docs/hf/golden_example.txt:

    PYTHONPATH=src python docs/hf/golden_example.py > docs/hf/golden_example.txt
"""

import json
import os
import tempfile
from pathlib import Path

import torch
import transformers
from transformers import LlamaConfig
from transformers.models.llama.modeling_llama import LlamaRotaryEmbedding

from posenc.cli import main

CONFIG = {  # Llama 3.1 8B's config.json, its attention and rope keys
    "model_type": "llama", "hidden_size": 4096, "num_attention_heads": 32,
    "num_key_value_heads": 8, "num_hidden_layers": 32, "intermediate_size": 14336,
    "vocab_size": 128256, "max_position_embeddings": 131072, "rope_theta": 500000.0,
    "rope_scaling": {"factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                     "original_max_position_embeddings": 8192, "rope_type": "llama3"},
}  # fmt: skip
T = 131072


def posenc(*args: str) -> None:
    """Run the posenc command (its main, in this process) in the work folder, and show it."""
    print(f"$ posenc {' '.join(args)}", flush=True)
    here = os.getcwd()
    os.chdir(WORK)
    try:
        code = main(list(args))
    finally:
        os.chdir(here)
    print(f"(exit {code})\n", flush=True)


def dump(name: str, rotary: torch.nn.Module, dtype: torch.dtype) -> None:
    """cos, sin [1, T, 128] of transformers' forward for an input of `dtype`, at 0..T-1."""
    with torch.no_grad():
        cos, sin = rotary(torch.zeros(1, dtype=dtype), torch.arange(T)[None])
    torch.save({"cos": cos, "sin": sin}, WORK / name)


with tempfile.TemporaryDirectory() as tmp:
    WORK = Path(tmp)
    (WORK / "config.json").write_text(json.dumps(CONFIG))
    config = LlamaConfig(**{k: v for k, v in CONFIG.items() if k != "model_type"})
    rotary = LlamaRotaryEmbedding(config)
    print(f"transformers {transformers.__version__}, torch {torch.__version__}\n")
    dump("float32.pt", rotary, torch.float32)  # the float32 model's cache
    dump("bfloat16.pt", rotary, torch.bfloat16)  # a bf16 model's: float32 math, cast at the end
    dump("bfloat16_module.pt", rotary.to(torch.bfloat16), torch.bfloat16)  # inv_freq cast too
    posenc("golden", "config.json", "--positions", "0:131072:61", "--out", "golden.safetensors")
    posenc("conform", "config.json", "float32.pt")
    posenc("conform", "config.json", "bfloat16.pt")
    posenc("conform", "config.json", "bfloat16.pt", "--dtype", "float32")
    posenc("conform", "config.json", "bfloat16_module.pt")
    positions = torch.arange(0, T, 61)
    cos, sin = LlamaRotaryEmbedding(config)(torch.zeros(1), positions[None])
    torch.save({"cos": cos, "sin": sin}, WORK / "float32_sparse.pt")
    posenc("conform", "config.json", "float32_sparse.pt", "--golden", "golden.safetensors")
