"""Write tests/golden/comrope.pt: ComRoPE rotations from the authors' reference code.

Reference: github.com/Longin-Yu/ComRoPE, model.py at commit
7aeef083f8af53479d0e86af562029bd89af6422 (ComRoPEAPAttention, ComRoPELDAttention). Run:

    COMROPE_REF=/dir/holding/that/model.py python tests/golden/make_comrope.py

It imports model.py from COMROPE_REF (torchvision, which it imports for image transforms only,
is stubbed when absent), builds each variant's attention for 2-D and 3-D positions, and saves
its parameters, seeded random positions, q, and R(p) q from its get_rotation_matrix.
tests/encodings/test_rotary_commuting.py loads the parameters into posenc's comrope and
compares. Not run by the tests (the reference needs transformers' CLIP classes).
"""

from __future__ import annotations

import os
import sys
import types
from pathlib import Path

import torch

OUT = Path(__file__).with_name("comrope.pt")


def reference_module():
    import transformers.models.clip.modeling_clip  # noqa: F401  (before any torchvision stub)

    try:
        import torchvision  # noqa: F401
    except ImportError:  # model.py imports transforms at module level; the math never uses them
        tv = types.ModuleType("torchvision")
        tv.transforms = types.ModuleType("torchvision.transforms")
        tv.transforms.transforms = types.SimpleNamespace(Compose=object)
        tv.transforms.InterpolationMode = None
        sys.modules["torchvision"], sys.modules["torchvision.transforms"] = tv, tv.transforms
    sys.path.insert(0, os.environ["COMROPE_REF"])
    import model

    return model


def main() -> None:
    model = reference_module()
    cases = []
    for variant, cls in (("ap", model.ComRoPEAPAttention), ("ld", model.ComRoPELDAttention)):
        for axes, block in ((2, 4), (3, 2)):
            torch.manual_seed(len(cases))
            heads, head_dim, B, T = 2, 24, 2, 5
            config = model.CustomVITConfig(
                hidden_size=heads * head_dim, num_attention_heads=heads, num_axes=axes,
                block_size=block, init_std=0.5,
            )  # fmt: skip
            attn = cls(config)
            positions = torch.rand(B, T, axes) * 4  # real coordinates, as the authors' grid
            attn.set_positions(positions)
            with torch.no_grad():
                R = attn.get_rotation_matrix().transpose(1, 2)  # [B, H, T, Dh, Dh]
                q = torch.randn(B, heads, T, head_dim)
                rq = (R @ q[..., None])[..., 0]
            case = dict(variant=variant, axes=axes, block_dim=block, heads=heads,
                        head_dim=head_dim, positions=positions, q=q, rotated=rq,
                        freqs=attn.freqs.detach().clone())  # fmt: skip
            if variant == "ld":
                case["multiplier"] = attn.multiplier.detach().clone()
            cases.append(case)
    torch.save(cases, OUT)
    print(f"wrote {OUT} ({OUT.stat().st_size} bytes, {len(cases)} cases)")


if __name__ == "__main__":
    main()
