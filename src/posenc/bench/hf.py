"""Section `hf`: a transformers model patched by posenc.hf.patch against the same model
unpatched, in turn on one set of weights: a forward and a greedy decode with the KV cache.
"""

from __future__ import annotations

import torch

from posenc.bench.common import Sizes, optional, timeit_many
from posenc.bench.report import Report, Row
from posenc.hf import patch
from posenc.stretch import models


def hf_model(smoke: bool):
    """(model, name): the embedded SmolLM2-135M, else a tiny random Llama."""
    if not smoke:
        try:
            spec = models.resolve(None)
            return models.load(spec)[0], spec.name
        except (ValueError, ImportError):
            pass
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    config = LlamaConfig(vocab_size=256, hidden_size=64, intermediate_size=128,
                         num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                         max_position_embeddings=512)  # fmt: skip
    return LlamaForCausalLM(config).eval(), "tiny random llama"


def bench_hf(rep: Report, s: Sizes, device: str) -> dict | None:
    """Rows "hf" (ratio: the row's time / posenc's); {"fwd"|"decode": posenc / transformers}."""
    if optional("transformers", rep.notes, "transformers", "section hf") is None:
        return None
    model, name = hf_model(smoke=s.B == 1 or not s.hf_real)
    model = model.to(device)
    base = model.base_model
    own = base.rotary_emb
    ours = patch(model).base_model.rotary_emb
    T, new = (64, 4) if s.B == 1 else (s.hf_T, s.hf_new)
    ids = torch.randint(0, model.config.vocab_size, (1, T), device=device)

    def run(rotary, what):
        def fn():
            base.rotary_emb = rotary
            with torch.inference_mode():
                if what == "fwd":
                    model(ids, logits_to_keep=1)
                else:
                    model.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=new,
                                   min_new_tokens=new, do_sample=False, pad_token_id=0)  # fmt: skip

        return fn

    out = {}
    for what, case in (("fwd", f"{name} forward T={T}"),
                       ("decode", f"{name} prefill {T} + decode {new}")):  # fmt: skip
        ms = timeit_many({"posenc": run(ours, what), "transformers": run(own, what)}, device,
                         s.hf_repeats, warmup=1)  # fmt: skip
        for impl, t in ms.items():
            rep.rows.append(Row("hf", case, impl, t, t / ms["posenc"]))
        out[what] = ms["posenc"] / ms["transformers"]
    base.rotary_emb = ours
    return out
