"""Write tests/golden/path.pt: PaTH attention outputs of the authors' plain-PyTorch reference.

Reference: fla-org/flash-linear-attention, fla/ops/path_attn/naive.py (naive_path_attn), at
commit bc3b101dcb713ddc5bd8924b66754eb68b5ccf89. The package itself imports Triton at import
time, so the one file is loaded on its own (it needs torch and einops only):

    git -C <clone> show bc3b101d:fla/ops/path_attn/naive.py > /tmp/naive.py
    FLA_PATH_NAIVE=/tmp/naive.py python tests/golden/make_path.py

Each case: seeded random q [B, T, HQ, D], k, v [B, T, H, D], unit w [B, T, H, D], beta in
(0, 2) [B, T, H], log forget gates g [B, T, HQ] (zeros: no gate), the scale, and the
reference output o [B, T, HQ, D], float32. tests/encodings/test_content_path.py reads them.
"""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

import torch
import torch.nn.functional as F

# (B, T, H, HQ, D, gate, chunk_size): T not a multiple of the chunk (padding), several chunks,
# grouped-query heads, beta over all of (0, 2).
CASES = [(2, 11, 2, 4, 8, True, 4), (1, 9, 1, 1, 8, False, 4), (1, 16, 2, 2, 4, True, 8)]


def main() -> None:
    spec = importlib.util.spec_from_file_location("fla_path_naive", os.environ["FLA_PATH_NAIVE"])
    naive = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(naive)
    out = []
    for n, (B, T, H, HQ, D, gate, chunk) in enumerate(CASES):
        torch.manual_seed(n)
        q = torch.randn(B, T, HQ, D)
        k = torch.randn(B, T, H, D)
        v = torch.randn(B, T, H, D)
        w = F.normalize(torch.randn(B, T, H, D), dim=-1)
        beta = 2 * torch.rand(B, T, H)
        g = torch.rand(B, T, HQ).mul(0.5).add(0.5).log() if gate else torch.zeros(B, T, HQ)
        scale = D**-0.5
        o = naive.naive_path_attn(q, k, v, w, beta, g, scale, chunk_size=chunk)
        out.append(dict(q=q, k=k, v=v, w=w, beta=beta, g=g, scale=scale, o=o, chunk=chunk))
    torch.save(out, Path(__file__).with_name("path.pt"))


if __name__ == "__main__":
    main()
