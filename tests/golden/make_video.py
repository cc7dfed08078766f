"""Write tests/golden/video.pt: VideoRoPE's, HoPE's and VRoPE's own reference functions run on
seeded random inputs (position ids of text + image + video sequences, rotated q and k).

The references are research repositories, not packages; point the script at their files:
    VIDEOROPE_SRC  Wiselnn570/VideoRoPE @ 7712ca3f52b795284e0453badc6cf1642c1368c4,
                   videorope-transformer/modeling_videorope.py
    HOPE_SRC       hrlics/HoPE @ 85b76c03abcf9624b6efd27d1af1bc11ce9899c4, modeling_hope.py
    VROPE_SRC      johncaged/VRoPE @ 6a7adbc819c4520895b897ca3c3187bee56155b7, vrope.py
    python tests/golden/make_video.py
VideoRoPE's and HoPE's files are patched transformers-4.45 Qwen2-VL modeling files that do not
import under current transformers: the functions used (rotate_half, the rotary application,
the position-id builder, a method that reads only self.config) are taken from the file by name
(ast) and run as they are. vrope.py imports as it is. The cos / sin tables are transformers'
default Qwen2-VL rotary embedding (inv_freq in float32, as its rope init, angles in float64).
"""

from __future__ import annotations

import ast
import importlib.util
import os
import random
import types
import typing
from pathlib import Path

import torch

OUT = Path(__file__).with_name("video.pt")
VISION_START, IMAGE, VIDEO = 151652, 151655, 151656  # Qwen2-VL's token ids
MERGE = 2
# (kind, n tokens or grid): one row of a batch; "s" is the vision-start token (text).
ROWS = [
    [("t", 2), ("s", 1), ("v", (2, 4, 6)), ("t", 2), ("s", 1), ("i", (1, 6, 4)), ("t", 4)],
    [("s", 1), ("v", (3, 4, 12)), ("t", 3)],  # a video right at the start: negative h, w
]
ROTATIONS = [(16, [2, 3, 3], 10000.0), (12, [1, 2, 3], 1e6)]  # head dim, section, base


def functions(path: str, names: list[str]) -> dict:
    """The named top-level functions / methods of a reference file, run in a namespace of
    torch and the typing names they use."""
    tree = ast.parse(Path(path).read_text())
    found = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef) and node.name in names and node.name not in found:
            found[node.name] = node
    missing = set(names) - set(found)
    assert not missing, f"{path} lacks {missing}"
    ns = {"torch": torch, "random": random}
    ns |= {n: getattr(typing, n) for n in ("List", "Optional", "Tuple")}  # their annotations
    module = ast.Module(body=[found[n] for n in names], type_ignores=[])
    exec(compile(module, path, "exec"), ns)
    return ns


def batch():
    """input_ids [B, T] (left padded), attention_mask, token types (0 text, 1 image, 2
    video), image / video grids, and each row's shapes for VRoPE."""
    g = torch.Generator().manual_seed(0)
    rows, kinds, images, videos = [], [], [], []
    for spec in ROWS:
        ids, kind = [], []
        for what, n in spec:
            if what in "ts":
                count = n
                tok = [VISION_START] * n if what == "s" else torch.randint(100, (n,), generator=g)
                ids += list(map(int, tok))
                kind += [0] * count
                continue
            t, h, w = n
            count = t * (h // MERGE) * (w // MERGE)
            ids += [IMAGE if what == "i" else VIDEO] * count
            kind += [1 if what == "i" else 2] * count
            (images if what == "i" else videos).append([t, h, w])
        rows.append(ids)
        kinds.append(kind)
    T = max(map(len, rows))
    input_ids = torch.zeros(len(rows), T, dtype=torch.long)
    mask = torch.zeros(len(rows), T, dtype=torch.long)
    token_types = torch.zeros(len(rows), T, dtype=torch.long)
    for b, (ids, kind) in enumerate(zip(rows, kinds)):
        input_ids[b, T - len(ids) :] = torch.tensor(ids)
        mask[b, T - len(ids) :] = 1
        token_types[b, T - len(ids) :] = torch.tensor(kind)
    return input_ids, mask, token_types, torch.tensor(images), torch.tensor(videos)


def fake_model():
    cfg = types.SimpleNamespace(
        vision_config=types.SimpleNamespace(spatial_merge_size=MERGE),
        image_token_id=IMAGE, video_token_id=VIDEO, vision_start_token_id=VISION_START,
    )  # fmt: skip
    return types.SimpleNamespace(config=cfg)


def cos_sin(position_ids, head_dim, base):
    """transformers' default Qwen2-VL rotary: position_ids [3, B, T] -> cos, sin [3, B, T, Dh]
    float64 (inv_freq as its default rope init computes it, in float32)."""
    inv_freq = 1.0 / (base ** (torch.arange(0, head_dim, 2, dtype=torch.int64).float() / head_dim))
    freqs = position_ids.double()[..., None] * inv_freq.double()
    emb = torch.cat([freqs, freqs], dim=-1)
    return emb.cos(), emb.sin()


def main():
    torch.manual_seed(0)
    input_ids, mask, token_types, images, videos = batch()
    out = {"token_types": token_types, "attention_mask": mask, "image_grid_thw": images,
           "video_grid_thw": videos, "merge": MERGE}  # fmt: skip
    model = fake_model()
    refs = {
        "videorope": (os.environ["VIDEOROPE_SRC"], "get_t_scale_rope_index",
                      "apply_m_modify_multimodal_rotary_pos_emb", [1.0, 2.0]),
        "hope": (os.environ["HOPE_SRC"], "get_dynamic_rope_index",
                 "apply_hybrid_multimodal_rotary_pos_emb", [0.75, 1.5]),
    }  # fmt: skip
    for name, (path, index_fn, apply_fn, scales) in refs.items():
        ns = functions(path, ["rotate_half", apply_fn, index_fn])
        for scale in scales:
            if name == "videorope":
                pos, _ = ns[index_fn](model, input_ids, images, videos, mask, scale_factor=scale)
            else:  # one choice: DTS's draw made deterministic
                pos, _ = ns[index_fn](model, input_ids, images, videos, mask, scale_factors=[scale])
            out[f"{name}/positions/{scale}"] = pos  # [3, B, T] float32
        for head_dim, section, base in ROTATIONS:
            pos = out[f"{name}/positions/{scales[-1]}"]
            cos, sin = cos_sin(pos, head_dim, base)
            q, k = torch.randn(2, 2, 1, pos.shape[-1], head_dim, dtype=torch.float64).unbind(0)
            q_out, k_out = ns[apply_fn](q, k, cos, sin, section)
            key = f"{name}/rotate/{head_dim}"
            out[key] = {"section": section, "base": base, "q": q.float(), "k": k.float(),
                        "q_out": q_out.float(), "k_out": k_out.float()}  # fmt: skip

    spec = importlib.util.spec_from_file_location("vrope_ref", os.environ["VROPE_SRC"])
    vrope = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(vrope)
    for head_dim, _, base in ROTATIONS:
        per_row = []
        for row in ROWS:
            rope = vrope.VRoPE(half_head_dim=head_dim // 2, half_time_dim=1)
            for what, n in row:
                if what in "ts":
                    rope.add_shape(vrope.VRoPETextShape(n))
                else:
                    rope.add_shape(vrope.VRoPEVideoShape(n[0], n[1] // MERGE, n[2] // MERGE))
            per_row.append(rope())  # [T_b, Dh/2]
        pos = vrope.CustomRoPE.pad_position_ids(per_row, padding_mode="left")  # [B, T, Dh/2]
        inv_freq = 1.0 / (base ** (torch.arange(0, head_dim, 2).float() / head_dim))
        freqs = pos.double() * inv_freq.double()  # pair j turns by its own position
        emb = torch.cat([freqs, freqs], dim=-1)[:, None]  # [B, 1, T, Dh]
        cos, sin = emb.cos(), emb.sin()
        q, k = torch.randn(2, 2, 1, pos.shape[1], head_dim, dtype=torch.float64).unbind(0)
        rot = functions(os.environ["HOPE_SRC"], ["rotate_half"])["rotate_half"]
        out[f"vrope/rotate/{head_dim}"] = {
            "base": base, "positions": pos, "q": q.float(), "k": k.float(),
            "q_out": (q * cos + rot(q) * sin).float(), "k_out": (k * cos + rot(k) * sin).float(),
        }  # fmt: skip
    torch.save(out, OUT)
    print(f"wrote {OUT} ({OUT.stat().st_size} bytes)")


if __name__ == "__main__":
    main()
