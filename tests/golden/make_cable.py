"""Write tests/golden/cable.pt from CABLE's reference code (axiomlab/Cable, src/Cable.py,
commit 8bc6b83e872899c50827e6940344350c37fadaa8): its CausalSelfAttention on seeded random
inputs. Run with the snapshot's src/ directory in CABLE_SRC:

    CABLE_SRC=/path/to/Cable/src python tests/golden/make_cable.py

The reference's penalty Linear(D, H) reads the layer input x; posenc's reads each head's key.
So the penalty weights are drawn in posenc's form (w [H, Dh], c [H]) and the reference's
Linear is set to their composition with the key projection (weight w_h W_k,h, bias
w_h . bias_k,h + c_h): both then compute the same penalties, and the test compares outputs.
"""

import os
import sys
from pathlib import Path

import torch

B, T, H, DH = 2, 9, 4, 4
D = H * DH


def main() -> None:
    sys.path.insert(0, os.environ["CABLE_SRC"])
    from Cable import CausalSelfAttention  # the reference, from the snapshot

    class Config:
        n_embd, n_head, block_size = D, H, T

    torch.manual_seed(0)
    ref = CausalSelfAttention(Config())
    w = torch.randn(H, DH)  # posenc's penalty weight [H, Dh] and bias [H]
    c = torch.randn(H)
    with torch.no_grad():
        for p in ref.parameters():
            p.normal_(0, 0.5)
        w_k = ref.c_attn.weight[D : 2 * D].view(H, DH, D)  # the key rows, per head
        b_k = ref.c_attn.bias[D : 2 * D].view(H, DH)
        ref.h_attn.weight.copy_(torch.einsum("hd,hde->he", w, w_k))
        ref.h_attn.bias.copy_((w * b_k).sum(-1) + c)
        x = torch.randn(B, T, D)
        y = ref(x)
    state = {k: v.clone() for k, v in ref.state_dict().items()}
    out = {"x": x, "y": y, "penalty_weight": w, "penalty_bias": c, "state": state}
    torch.save(out, Path(__file__).with_name("cable.pt"))


if __name__ == "__main__":
    main()
