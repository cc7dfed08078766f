"""Writes tests/golden/grape.pt: GRAPE's reference PyTorch modules on seeded random inputs.

The reference is github.com/model-architectures/GRAPE (commit f5b539f, the snapshot these
goldens were made from): MSGRAPECommuting (model/llama-mha-grape-m-nonctx.py) and the key-,
query- and query+key-gated additive biases (model/llama-mha-grape-a-*.py). Check it out, then

    GRAPE_REF=/path/to/GRAPE python tests/golden/make_grape.py

GRAPE_REF is the checkout's root (its model/ folder is imported; the Triton-only kv_shift
module, unused by these classes, is stubbed). Nothing of the reference is copied into posenc:
only its outputs are stored, and tests/encodings/test_grape.py compares posenc's to them.
"""

from __future__ import annotations

import importlib.util
import os
import sys
import types
from pathlib import Path

import torch

OUT = Path(__file__).with_name("grape.pt")
B, T, H, D = 2, 12, 4, 16


def load(model_dir: Path, file: str, name: str):
    """Import model_dir/file as grape_ref.<name> (its relative imports resolve in model_dir)."""
    if "grape_ref" not in sys.modules:
        pkg = types.ModuleType("grape_ref")
        pkg.__path__ = [str(model_dir)]
        sys.modules["grape_ref"] = pkg
        stub = types.ModuleType("grape_ref.kv_shift")  # Triton only; not used here
        stub.ShiftLinear = None
        sys.modules["grape_ref.kv_shift"] = stub
    spec = importlib.util.spec_from_file_location(f"grape_ref.{name}", model_dir / file)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def main() -> None:
    ref = os.environ.get("GRAPE_REF")
    if not ref:
        raise SystemExit("set GRAPE_REF to a checkout of github.com/model-architectures/GRAPE")
    model_dir = Path(ref) / "model"
    torch.manual_seed(0)
    out: dict[str, dict[str, torch.Tensor]] = {}

    m = load(model_dir, "llama-mha-grape-m-nonctx.py", "m_nonctx")
    for share in (True, False):
        grape = m.MSGRAPECommuting(
            H, D, base=10000.0, learnable=True, share_across_heads=share, log_freq_scale=16.0
        )
        with torch.no_grad():  # move away from RoPE's spectrum: the learned case
            grape.log_freq.add_(0.5 * torch.randn_like(grape.log_freq))
        q, k = torch.randn(B, T, H, D), torch.randn(B, T, H, D)
        with torch.no_grad():
            q_out, k_out = grape(q, k)
        out["m_shared" if share else "m_per_head"] = dict(
            log_freq=grape.log_freq.detach().clone(), q=q, k=k, q_out=q_out, k_out=k_out
        )

    for gate, file, cls in (
        ("key", "llama-mha-grape-a-keygated.py", "KeyGatedAdditiveBias"),
        ("query", "llama-mha-grape-a-querygated.py", "QueryGatedAdditiveBias"),
        ("query_key", "llama-mha-grape-a-querykeygated.py", "QueryKeyGatedAdditiveBias"),
    ):
        mod = load(model_dir, file, f"a_{gate}")
        bias_mod = getattr(mod, cls)(H, D)
        with torch.no_grad():
            bias_mod.omega.add_(0.3 * torch.randn_like(bias_mod.omega))
        q, k = torch.randn(B, T, H, D), torch.randn(B, T, H, D)
        with torch.no_grad():
            if gate == "key":
                bias = bias_mod(k)
            elif gate == "query":
                bias = bias_mod(q)
            else:
                bias = bias_mod(q, k)
        case = dict(omega=bias_mod.omega.detach().clone(), q=q, k=k, bias=bias)
        for probe in ("u", "v"):
            if hasattr(bias_mod, probe):
                case[probe] = getattr(bias_mod, probe).detach().clone()
        out[f"a_{gate}"] = case

    torch.save(out, OUT)
    print(f"wrote {OUT} ({OUT.stat().st_size} bytes)")


if __name__ == "__main__":
    main()
