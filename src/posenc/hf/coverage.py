"""Coverage of posenc.hf.patch over every causal-LM model type of the installed transformers.

    python -m posenc.hf.coverage [--write docs/hf/coverage.md] [--sizes other] [TYPE ...]

Each causal-LM type whose modeling code has a rotary embedding is built tiny and random from its
config class (2 layers, hidden 64, 4 heads, head dim 16, MoE / MLA shrunk; the first size
variant that builds), then: parity (patch(model) keeps the logits to TOL at positions 0..7 and
across the original context, and patch(model, scaling=YARN / DYNAMIC) gives the logits of the
model transformers builds with that scaling, same weights), refused (patch's one-line
ValueError), wrong (patched, logits differ: must never happen), failed (anything else), n/a
(does not build tiny, or no rotary module). A scaling transformers refuses for the type is "-".
Needs transformers; downloads nothing.
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import os
import sys
import time
import warnings

import torch

from posenc.hf.config import ATTENTION_KEYS, layer_types_of
from posenc.hf.patch import patch, rotary_modules

TOL = 1e-4
MAX_PARAMS = 3_000_000  # a tiny form larger than this is "does not build tiny"
SMALL = dict(hidden_size=64, num_attention_heads=4, num_key_value_heads=2, num_hidden_layers=2,
             intermediate_size=128, vocab_size=128, max_position_embeddings=64, head_dim=16,
             pad_token_id=0, bos_token_id=1, eos_token_id=2, rotary_dim=8, global_head_dim=32,
             vocab_size_per_layer_input=128, hidden_size_per_layer_input=16)  # fmt: skip
MOE = dict(num_experts=4, num_local_experts=4, n_routed_experts=4, moe_intermediate_size=32,
           num_experts_per_tok=2, n_shared_experts=1, kv_lora_rank=16, q_lora_rank=16,
           qk_rope_head_dim=16, qk_nope_head_dim=16, v_head_dim=16, n_group=1,
           topk_group=1)  # fmt: skip
NO_HEAD_DIM = {k: v for k, v in SMALL.items() if k != "head_dim"}
VARIANTS = (  # tried in order; the first that builds and runs a forward is used
    {**SMALL, **MOE},
    SMALL,
    NO_HEAD_DIM,
    {**SMALL, **MOE, "num_key_value_heads": 4},  # MLA: as many kv heads as heads
    {**SMALL, **MOE, "num_hidden_layers": 8, "full_attention_interval": 2,
     "attn_layer_period": 2, "attn_layer_offset": 1},  # hybrids: some attention layers
)  # fmt: skip
# another set of sizes (python -m posenc.hf.coverage --sizes other): heads of 32 and of 16 with
# a quarter rotary (Qwen3.5's small form, where a module's default mrope_section cannot fit),
# hybrids with one attention layer in two
OTHER = dict(hidden_size=128, num_attention_heads=4, num_key_value_heads=1, head_dim=32,
             intermediate_size=64, moe_intermediate_size=16, num_hidden_layers=4,
             full_attention_interval=2, attn_layer_period=2, attn_layer_offset=1,
             rotary_dim=16, global_head_dim=64, qk_rope_head_dim=8, qk_nope_head_dim=24,
             v_head_dim=32)  # fmt: skip
QUARTER = dict(
    head_dim=16, partial_rotary_factor=0.25, num_hidden_layers=4, full_attention_interval=2
)
OTHER_VARIANTS = tuple({**v, **extra} for extra in (OTHER, QUARTER) for v in VARIANTS)
SIZES = {"default": VARIANTS, "other": OTHER_VARIANTS}
YARN = {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 64}
DYNAMIC = {"rope_type": "dynamic", "factor": 2.0}
SCALINGS = {"yarn": YARN, "dynamic": DYNAMIC}


def _quiet():
    import transformers

    transformers.logging.set_verbosity_error()
    warnings.filterwarnings("ignore")
    return transformers


def model_types() -> dict[str, str]:
    """{model_type: CausalLM class} of the causal-LM types whose modeling code has RoPE."""
    transformers = _quiet()
    from transformers.models.auto.configuration_auto import model_type_to_module_name
    from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING_NAMES

    root = os.path.join(os.path.dirname(transformers.__file__), "models")
    out = {}
    for model_type, cls in MODEL_FOR_CAUSAL_LM_MAPPING_NAMES.items():
        folder = os.path.join(root, model_type_to_module_name(model_type))
        files = [f for f in sorted(os.listdir(folder)) if f.startswith("modeling_")]
        text = ""
        for name in files:
            with open(os.path.join(folder, name)) as f:
                text += f.read()
        if "RotaryEmbedding" in text or "freqs_cis" in text:
            out[model_type] = cls
    return out


def _config(model_type: str, kwargs: dict, rope: dict | None = None):
    """The tiny config of `model_type` (sub-configs shrunk alike), `rope` over rope_parameters."""
    transformers = _quiet()
    config = transformers.AutoConfig.for_model(model_type, **kwargs)
    for name in getattr(config, "sub_configs", None) or {}:
        sub = getattr(config, name, None)
        if sub is not None and hasattr(sub, "hidden_size"):
            for key, value in kwargs.items():
                with contextlib.suppress(AttributeError, TypeError, ValueError):
                    setattr(sub, key, value)
    if rope is not None:
        target = _text(config)
        params = target.rope_parameters
        nested = layer_types_of(params)
        target.rope_parameters = (
            {t: _merged(p, rope) for t, p in params.items()} if nested else _merged(params, rope)
        )
    return config


def _text(config):
    text = getattr(config, "text_config", None)
    return text if getattr(text, "rope_parameters", None) is not None else config


def _merged(old: dict | None, new: dict) -> dict | None:
    if old is None:  # a layer type without rope
        return None
    keep = ("rope_theta", "partial_rotary_factor", "mrope_section", "mrope_interleaved",
            *ATTENTION_KEYS)  # fmt: skip
    return {**{k: old[k] for k in keep if k in old}, **copy.deepcopy(new)}


def _build(model_type: str, cls: str, config):
    transformers = _quiet()
    with torch.device("meta"):
        count = sum(p.numel() for p in getattr(transformers, cls)(config).parameters())
    if count > MAX_PARAMS:
        raise MemoryError(f"{count} parameters in its tiny form")
    torch.manual_seed(0)
    return getattr(transformers, cls)(config).eval()


def _inputs(length: int) -> list[dict]:
    """Forward calls, in order: positions 0..7, then 8 positions across `length`."""
    ids = torch.randint(3, 100, (1, 8), generator=torch.Generator().manual_seed(1))
    edge = torch.arange(length - 4, length + 4)[None]
    return [dict(input_ids=ids), dict(input_ids=ids, position_ids=edge)]


def _logits(model, calls) -> list[torch.Tensor]:
    with torch.no_grad():
        return [model(**call).logits for call in calls]


def tiny(model_type: str, cls: str, variants=VARIANTS):
    """(model, the kwargs variant it was built with); the last error when none builds."""
    error = None
    for kwargs in variants:
        try:
            model = _build(model_type, cls, _config(model_type, kwargs))
            _logits(model, _inputs(64)[:1])
            return model, kwargs
        except Exception as err:  # a variant the config or model code does not accept
            error = err
    raise RuntimeError(f"{type(error).__name__}: {error}".splitlines()[0][:160])


def _diff(a: list, b: list) -> float:
    return max((x - y).abs().max().item() for x, y in zip(a, b))


def check(model_type: str, cls: str, variants=VARIANTS) -> dict:
    """One row: status, reason, the largest logit differences (plain, yarn, dynamic)."""
    row = dict(model_type=model_type, status="n/a", reason="", plain=None)
    try:
        model, kwargs = tiny(model_type, cls, variants)
    except Exception as error:
        return {**row, "reason": f"does not build tiny: {error}"}
    if not rotary_modules(model):
        return {**row, "reason": "its model has no rotary embedding module"}
    calls = []
    for call in _inputs(64):  # the model's own limits (a table of 64 positions: GPT-J)
        try:
            _logits(model, [call])
            calls.append(call)
        except Exception:
            break
    want = _logits(model, calls)
    for name, scaling in [("plain", None), *SCALINGS.items()]:
        pre = "" if scaling is None else f"{name}: "
        after = "after patch" if scaling is None else f"{name}, after patch"
        mine, theirs = model, want
        if scaling is not None:
            try:
                ref = _build(model_type, cls, _config(model_type, kwargs, scaling))
                mine = _build(model_type, cls, _config(model_type, kwargs))
                ref.load_state_dict(mine.state_dict())
                theirs = _logits(ref, calls)
            except Exception:
                row[name] = "-"  # transformers does not build or run this type with the scaling
                continue
        try:
            patch(mine, scaling=None if scaling is None else _scaling_for(mine, scaling))
        except ValueError as error:
            return {**row, "status": "refused", "reason": f"{pre}{error}".splitlines()[0]}
        except Exception as error:
            reason = f"{pre}{type(error).__name__}: {error}"
            return {**row, "status": "failed", "reason": reason[:200]}
        try:
            row[name] = _diff(_logits(mine, calls), theirs)
        except Exception as error:
            reason = f"{after}: {type(error).__name__}: {error}".splitlines()[0]
            return {**row, "status": "failed", "reason": reason[:200]}
        if row[name] > TOL:
            return {**row, "status": "wrong", "reason": f"{pre}logits differ by {row[name]:.2g}"}
    return {**row, "status": "parity"}


def _scaling_for(model, scaling: dict) -> dict:
    params = _text(model.config).rope_parameters
    if layer_types_of(params):
        return {t: scaling for t, v in params.items() if v is not None}
    return scaling


def sweep(types: list[str] | None = None, log=None, variants=VARIANTS) -> list[dict]:
    """Rows for `types` (default: every model type with a rotary embedding)."""
    known = model_types()
    rows = []
    for model_type in types or list(known):
        start = time.perf_counter()
        row = check(model_type, known[model_type], variants)
        row["seconds"] = time.perf_counter() - start
        rows.append(row)
        if log:
            print(_line(row), file=log, flush=True)
    return rows


def _num(value) -> str:
    return "" if value is None else value if isinstance(value, str) else f"{value:.1e}"


def _line(row: dict) -> str:
    nums = " ".join(_num(row.get(k)) or "." for k in ("plain", "yarn", "dynamic"))
    return f"{row['model_type']:<24} {row['status']:<8} {nums}  {row['reason']}"


def summary(rows: list[dict]) -> dict:
    built = [r for r in rows if r["status"] != "n/a"]
    count = {s: sum(r["status"] == s for r in built) for s in ("parity", "refused", "wrong")}
    return dict(types=len(rows), built=len(built), **count,
                failed=len(built) - sum(count.values()))  # fmt: skip


def markdown(rows: list[dict], command: str) -> str:
    import transformers

    s = summary(rows)
    lines = [
        "# posenc.hf.patch on every RoPE model type of transformers",
        "",
        f"Generated by `{command}` (transformers {transformers.__version__}, torch "
        f"{torch.__version__}); do not edit by hand. Each causal-LM model type whose modeling "
        "code has a rotary embedding is built as a tiny random model (2 layers, hidden 64; see "
        "`posenc/hf/coverage.py`). parity: `patch(model)` keeps the float32 logits to "
        f"{TOL:g} at positions 0..7 and 60..67 (across max_position_embeddings = 64), and "
        "`patch(model, scaling=...)` gives the logits of the model transformers rebuilds with "
        f"that scaling (yarn: `{YARN}`, dynamic: `{DYNAMIC}`; `-`: transformers does not "
        "build the type with it). Columns: the largest logit difference.",
        "",
        f"**Parity on {s['parity']} of {s['built']} model types that build** "
        f"({100 * s['parity'] / max(s['built'], 1):.0f}%); refused {s['refused']}, failed "
        f"{s['failed']}, wrong {s['wrong']}; {s['types'] - s['built']} of the {s['types']} "
        "types do not build tiny here or have no rotary module (n/a).",
        "",
        "| model type | result | plain | yarn | dynamic | reason |",
        "|---|---|---|---|---|---|",
    ]
    for r in rows:
        nums = " | ".join(_num(r.get(k)) for k in ("plain", "yarn", "dynamic"))
        reason = r["reason"].replace("|", "\\|")
        lines.append(f"| {r['model_type']} | {r['status']} | {nums} | {reason} |")
    return "\n".join(lines) + "\n"


def readme_block(rows: list[dict]) -> str:
    """What docs/hf/README.md says is covered (tests keep it equal to a sweep)."""
    import transformers

    s = summary(rows)
    parity = ", ".join(r["model_type"] for r in rows if r["status"] == "parity")
    refused = ", ".join(r["model_type"] for r in rows if r["status"] == "refused")
    return (
        f"On transformers {transformers.__version__}, `patch` gives parity on **{s['parity']} of "
        f"the {s['built']} RoPE model types that build as tiny models here**, wrong on "
        f"{s['wrong']}, failed on {s['failed']} ([coverage.md](coverage.md)): "
        f"{parity}. Refused, each with its one-line reason in the table: {refused or 'none'}.\n"
    )


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m posenc.hf.coverage", description=__doc__)
    parser.add_argument("types", nargs="*", help="model types (default: every RoPE type)")
    parser.add_argument("--write", help="write the markdown table here")
    parser.add_argument("--sizes", choices=tuple(SIZES), default="default",
                        help="tiny sizes: default (docs/hf/coverage.md's) or other")  # fmt: skip
    args = parser.parse_args(argv)
    rows = sweep(args.types or None, log=sys.stdout, variants=SIZES[args.sizes])
    print(summary(rows))
    if args.write:
        with open(args.write, "w") as f:
            f.write(markdown(rows, "python -m posenc.hf.coverage --write " + args.write))
    return 0


if __name__ == "__main__":
    sys.exit(main())
