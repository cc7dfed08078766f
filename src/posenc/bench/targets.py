"""The acceptance targets (issues 6, 15, 38) as findings of the verdict engine, whose Rule decides:
TARGETS: target -> (measurement, ">=" a speed-up / "<=" a cost, threshold); measurements()
turns a run's results into {measurement: (value, as printed)} or why it has none (absent)."""

from __future__ import annotations

from posenc.bench.common import Sizes
from posenc.bench.report import Report
from posenc.verdict import (
    ABSENT,
    FAILS,
    HOLDS,
    MEASUREMENTS,
    Absent,
    Finding,
    Measured,
    Rule,
    Source,
    check,
)

TARGETS: dict[str, tuple[str, str, float]] = {
    "out-of-place RoPE >= 3x transformers": ("rope_fwd_speedup", ">=", 3.0),
    "in-place RoPE >= 10x transformers": ("rope_inplace_speedup", ">=", 10.0),
    "fwd+bwd RoPE >= 3x transformers": ("rope_bwd_speedup", ">=", 3.0),
    "in-place RoPE within 1.5x of copy": ("rope_inplace_over_copy", "<=", 1.5),
    "accurate angles cost <= 1.2x float32 products (T <= 8192)": ("precision_cost", "<=", 1.2),
    "t5 T=16384 peak extra memory <= 1/8 of 8.6 GB": ("t5_peak_mb", "<=", 8.6e3 / 8),
    "t5 no slower than materialized (largest T where it fits)": ("t5_vs_mat", ">=", 1.0),
    "alibi T=16384 peak extra memory <= 1/8 of 8.6 GB": ("alibi_peak_mb", "<=", 8.6e3 / 8),
    "alibi no slower than materialized (largest T where it fits)": ("alibi_vs_mat", ">=", 1.0),
    "TransformerLM training >= 1.2x x-transformers (rope)": ("train_rope_speedup", ">=", 1.2),
    "transformers model patched by posenc: forward <= 1.02x unpatched": ("hf_fwd", "<=", 1.02),
    "transformers model patched by posenc: decode <= 1.02x unpatched": ("hf_decode", "<=", 1.02),
    "posenc --help <= 0.1x import torch": ("cli_help", "<=", 0.1),
    "every posenc COMMAND --help <= 0.1x import torch": ("cli_command_help", "<=", 0.1),
    "posenc list <= 1.2x import torch": ("cli_list", "<=", 1.2),
}
# issues 15, 41: forward time / SDPA-without-bias time at most this at every T >= LIMIT_MIN_T
# with the backward too; fire_past: FIRE past its threshold (bench.attention.REGIMES)
OVER_LIMIT = {"alibi": 1.5, "kerple": 1.5, "sandwich": 1.5, "t5": 1.5}
OVER_LIMIT.update(fire=2.0, fire_past=2.0)
LIMIT_MIN_T = 2048
for _name, _r in OVER_LIMIT.items():
    TARGETS.update({
        f"{_name} fwd <= {_r}x SDPA without bias (T >= 2k)": (f"{_name}_fwd_limit", "<=", _r),
        f"{_name} fwd+bwd <= {_r}x SDPA without bias (T >= 2k)": (f"{_name}_bwd_limit", "<=", _r),
        f"{_name} no slower than compiled FlexAttention (fwd)": (f"{_name}_vs_flex", ">=", 1.0),
    })  # fmt: skip
    if _name not in ("t5", "alibi"):
        _key = f"{_name} T=16384 peak extra memory <= 1/8 of 8.6 GB"
        TARGETS[_key] = (f"{_name}_peak_mb", "<=", 8.6e3 / 8)
    TARGETS[f"{_name} training step >= 1.3x faster than before"] = (
        f"train_{_name}_vs_before", ">=", 1.3)  # fmt: skip
ROPE_SHAPE = (4, 16, 2048, 128)  # the RoPE targets hold at this (B, H, T, Dh) only
MEMORY_T = 16384  # the memory targets' length
SOURCE = Source(paper="posenc's acceptance targets (issues 6 and 15), measured by posenc bench")


def read_target(measured: dict, key: str) -> Measured:
    """The measurement of one target: measured[key] = (value, as printed), or why it is absent."""
    m = measured.get(key, "not in this run")
    if isinstance(m, str):
        raise Absent(m)
    value, shown = m
    return Measured(measured={key: value}, result=shown)


MEASUREMENTS["bench-target"] = read_target
WRONG_SIDE = {">=": "<", "<=": ">"}  # a target does not hold on this side of its threshold
FINDINGS: dict[str, Finding] = {
    target: Finding(id=f"bench-{key}", claim=target, source=SOURCE, measure="bench-target",
                    rules=(Rule(key, WRONG_SIDE[how], threshold, FAILS),), otherwise=HOLDS)
    for target, (key, how, threshold) in TARGETS.items()
}  # fmt: skip


def target_rows(measured: dict) -> list[dict]:
    """[{target, status (the verdict), value, note}] in TARGETS order, from measurements()."""
    rows = []
    for target, found in FINDINGS.items():
        c = check(found, measured, found.rules[0].quantity)
        absent = c.verdict in ABSENT
        rows.append(dict(target=target, status=c.verdict, value="-" if absent else c.result,
                         note=c.result if absent else ""))  # fmt: skip
    return rows


def ratio(a, b, spec: str, why: str):
    """(a / b, as printed) where both were measured, else why not."""
    return (a / b, f"{a / b:{spec}}x") if a and b else why


def measurements(
    s: Sizes, copy_ms, rope, precision, bias, train, quick: bool, patched=None, cli=None
) -> dict:
    """measurement -> (value, as printed), or why this run has none; the sections' results as
    they return them (None where not run)."""
    out: dict = {}
    ms = cli or {}
    for key, name in (("cli_help", "posenc --help"), ("cli_list", "posenc list"),
                      ("cli_command_help", "posenc COMMAND --help")):  # fmt: skip
        out[key] = ratio(ms.get(name), ms.get("import torch"), ".2f", "section cli not in this run")
    for what in ("fwd", "decode"):
        r = (patched or {}).get(what)
        out[f"hf_{what}"] = (r, f"{r:.3f}x") if r is not None else "section hf not in this run"
    at_shape = (s.B, s.H, s.T, s.Dh) == ROPE_SHAPE
    why = "" if at_shape else "not at the target shape (B=4 H=16 T=2048 Dh=128)"
    fwd, bwd = (rope or {}).get("fwd", {}), (rope or {}).get("bwd", {})
    hf, hfb = fwd.get("transformers"), bwd.get("transformers")
    for key, ours, other in (
        ("rope_fwd_speedup", fwd.get("posenc"), hf),
        ("rope_inplace_speedup", fwd.get("posenc in-place"), hf),
        ("rope_bwd_speedup", bwd.get("posenc"), hfb),
    ):
        out[key] = why or ratio(other, ours, ".1f", "transformers not measured")
    inp = fwd.get("posenc in-place")
    out["rope_inplace_over_copy"] = why or ratio(inp, copy_ms, ".2f", "")
    if precision is not None:
        out["precision_cost"] = (precision, f"{precision:.2f}x (largest case)")
    else:
        out["precision_cost"] = "not in this run"
    out.update(bias_measurements(bias or {}, train or {}, quick))
    for name in ("t5", "alibi"):  # their peak memory: bias_measurements, like every bias
        res = (bias or {}).get(name, {}).get("fwd", {})
        mat = res.get("materialized", {})
        common = [T for T in mat if T in res.get("posenc", {})]
        if common:  # the largest T where the materialized path fit
            T = max(common)
            r = mat[T]["ms"] / res["posenc"][T]["ms"]
            out[f"{name}_vs_mat"] = (r, f"{r:.2f}x at T={T}")
        else:
            out[f"{name}_vs_mat"] = "materialized path not measured"
    sp = (train or {}).get("rope", {})
    out["train_rope_speedup"] = ratio(
        sp.get("posenc"), sp.get("x-transformers"), ".2f", "not in this run"
    )
    return out


def worst_ratio(res: dict, path: str, over: str, invert: bool = False):
    """(worst ratio path / over across T, as printed) or None; invert: over / path, lowest."""
    Ts = sorted(T for T in res.get(path, {}) if T in res.get(over, {}))
    if not Ts:
        return None
    ratios = {T: res[path][T]["ms"] / res[over][T]["ms"] for T in Ts}
    if invert:
        ratios = {T: 1 / r for T, r in ratios.items()}
    T = min(ratios, key=ratios.get) if invert else max(ratios, key=ratios.get)
    where = ",".join(str(t) for t in Ts)
    return ratios[T], f"{ratios[T]:.2f}x at T={T} (worst of T={where})"


def bias_measurements(bias: dict, train: dict, quick: bool) -> dict:
    """The issue-15 measurements: per encoding, time over the limit, vs flex, memory, train."""
    out: dict = {}
    for name in OVER_LIMIT:
        res = bias.get(name)
        for key, mode in (("fwd_limit", "fwd"), ("bwd_limit", "fwd+bwd")):
            long = {p: {T: r for T, r in by_T.items() if T >= LIMIT_MIN_T}
                    for p, by_T in res.get(mode, {}).items()} if res else {}  # fmt: skip
            m = worst_ratio(long, "posenc", "limit") if res else None
            out[f"{name}_{key}"] = m or f"{name} {mode} not in this run"
        m = worst_ratio(res.get("fwd", {}), "posenc", "flex", invert=True) if res else None
        out[f"{name}_vs_flex"] = m or "FlexAttention not measured in this run"
        ours = (res or {}).get("fwd", {}).get("posenc", {}).get(MEMORY_T)
        if ours:
            out[f"{name}_peak_mb"] = (ours["peak_mb"], f"{ours['peak_mb']:.0f} MB")
        else:
            out[f"{name}_peak_mb"] = f"T={MEMORY_T} not in this run" + (" (--quick)" * quick)
        sp = train.get(name, {})
        m = ratio(sp.get("posenc"), sp.get("posenc before"), ".2f", "not in this run")
        if "nope" in sp and not isinstance(m, str):  # the most a bias path can gain
            bound = sp["nope"] / sp["posenc before"]
            m = (m[0], f"{m[1]} (bound: before took {bound:.2f}x nope's step)")
        out[f"train_{name}_vs_before"] = m
    return out


def check_targets(
    rep: Report, s: Sizes, copy_ms, rope, precision, bias, train, quick: bool, hf=None, cli=None
) -> None:
    measured = measurements(s, copy_ms, rope, precision, bias, train, quick, hf, cli)
    rep.targets.extend(target_rows(measured))
