"""The language-modelling findings (Press et al. 2022; the zero-shot RoPE scalings), declared on
posenc.verdict, each measured from the lm rows: perplexity ratios per seed, then median
[min–max]."""

from __future__ import annotations

from posenc.arena.findings import group, published, show, spread
from posenc.arena.results import Results, main_metric
from posenc.verdict import NOT_REPRODUCED, Absent, Claim, Measured, Rule


def ratio(res: Results, L: int, enc: str, a: int, b: int):
    """Per seed ppl(b) / ppl(a) -> median [min–max], or None."""
    pa, pb = res.per_seed("lm", L, "ppl", enc, a), res.per_seed("lm", L, "ppl", enc, b)
    return spread([pb[s] / pa[s] for s in sorted(set(pa) & set(pb)) if pa[s]])


def ppl(res: Results, L: int, enc: str, E: int):
    return spread(list(res.per_seed("lm", L, "ppl", enc, E).values()))


def lm_group(res: Results) -> tuple[int, list[int]]:
    """(L, eval lengths) of the lm rows; Absent without them."""
    L = group(res, "lm")
    if L is None:
        raise Absent("needs the lm task")
    return L, res.eval_lens("lm", L)


def lm_findings(res: Results) -> list[Claim]:
    return [sinusoid_steep(res), learned_table(res), alibi_flat(res), t5_slow(res),
            zero_shot(res)]  # fmt: skip


@published(
    "Sinusoidal perplexity rises steeply past L",
    "Press et al. 2022: 20.05 at L=512 → 43.54 at 1012 (×2.17), WikiText-103",
    rules=(Rule("ppl ratio, next length / L", "<", 1.5, NOT_REPRODUCED),),  # steep: ×1.5
)
def sinusoid_steep(res: Results) -> Measured:
    L, lens = lm_group(res)
    E2 = next((E for E in lens if E > L), None)
    r = ratio(res, L, "sinusoidal", L, E2) if E2 else None
    if r is None:
        raise Absent("needs sinusoidal at L and a longer length")
    result = (
        f"{show(ppl(res, L, 'sinusoidal', L))} at L={L} → "
        f"{show(ppl(res, L, 'sinusoidal', E2))} at {E2}: ×{show(r)} (steep = ×1.5)"
    )
    return Measured(measured={"ppl ratio, next length / L": r[0]}, result=result)


@published(
    "ALiBi (and KERPLE) perplexity at 8L is no worse than at L",
    "Press et al. 2022: ALiBi 19.73 at L=512 → 18.32 at 10512",
    rules=(Rule("largest ppl ratio, longest / L", ">", 1.02, NOT_REPRODUCED),),  # within 2%
)
def alibi_flat(res: Results) -> Measured:
    L, lens = lm_group(res)
    Emax = max(lens)
    parts, ratios = [], []
    for enc in ("alibi", "kerple"):
        r = ratio(res, L, enc, L, Emax) if Emax > L else None
        if r is not None:
            parts.append(f"{enc} {show(ppl(res, L, enc, L))} → {show(ppl(res, L, enc, Emax))} "
                         f"at {Emax / L:g}L: ×{show(r)}")  # fmt: skip
            ratios.append(r[0])
    if not ratios:
        raise Absent("needs alibi/kerple and a longer length")
    result = "; ".join(parts) + "; no worse = within 2%"
    return Measured(measured={"largest ppl ratio, longest / L": max(ratios)}, result=result)


@published(
    "T5 bias holds to about 2L, then rises slowly",
    "Press et al. 2022: 19.65 at L=512, 18.79 at 1012, 20.41 at 2512, 52.95 at 10512",
    rules=(Rule("ppl ratio, 2L / L", ">", 1.05, NOT_REPRODUCED),
           Rule("ppl ratio, longest / L", ">", 1.5, NOT_REPRODUCED)),
)  # fmt: skip
def t5_slow(res: Results) -> Measured:
    L, lens = lm_group(res)
    Emax = max(lens)
    r2 = ratio(res, L, "t5", L, 2 * L)
    if r2 is None:
        raise Absent("needs t5 at L and 2L")
    result = f"ppl ×{show(r2)} at 2L"
    r8 = ratio(res, L, "t5", L, Emax) if Emax > 2 * L else None
    if r8 is not None:
        result += f", ×{show(r8)} at {Emax / L:g}L"
    result += " (holds = ×1.05 or less at 2L; slowly = ×1.5 or less after)"
    measured = {"ppl ratio, 2L / L": r2[0], "ppl ratio, longest / L": r8 and r8[0]}
    return Measured(measured=measured, result=result)  # None past 2L: not evaluated there


@published(
    "Zero-shot NTK / YaRN / dynamic scaling beat raw RoPE at 4L",
    "Peng et al. 2023 (YaRN); bloc97 / emozilla (NTK, dynamic)",
    rules=(Rule("scalings not below raw RoPE", ">", 0, NOT_REPRODUCED),),
)
def zero_shot(res: Results) -> Measured:
    L, lens = lm_group(res)
    E4 = 4 * L if 4 * L in lens else next((E for E in lens if E > 2 * L), None)
    raw = ppl(res, L, "rope", E4) if E4 else None
    parts, wins = [], []
    for v in ("ntk", "yarn", "dynamic"):
        x = ppl(res, L, f"rope+{v}", E4) if E4 else None
        if x is not None and raw is not None:
            parts.append(f"rope+{v} {show(x)}")
            wins.append(x[0] < raw[0])
    if not wins:
        raise Absent("needs rope and rope+ntk/yarn/dynamic at 4L")
    result = f"ppl at {E4} ({E4 / L:g}L): rope {show(raw)} vs " + ", ".join(parts)
    if any(wins) and not all(wins):
        result += " (only some beat raw RoPE)"
    return Measured(measured={"scalings not below raw RoPE": wins.count(False)}, result=result)


@published(
    "Learned absolute positions cannot run past their table",
    "Press et al. 2022: not evaluable past L",
    rules=(Rule("evaluations past L that ran", ">", 0, NOT_REPRODUCED),),
)
def learned_table(res: Results) -> Measured:
    past, within = [], []
    for t, L in res.groups:
        for E in res.eval_lens(t, L):
            key = (t, L, main_metric(t), "learned", E)
            if E > L and (res.stat(*key) or res.is_na(*key)):
                past.append(res.is_na(*key))
            elif E <= L:
                within.append(res.med(*key) is not None)
    if not past:
        raise Absent("needs learned evaluated past L")
    reason = next((res.na[k] for k in res.na if k[3] == "learned"), "")
    result = (f"{sum(past)}/{len(past)} evaluations past L are n/a (“{reason}”); "
              f"{sum(within)} within L are measured")  # fmt: skip
    return Measured(measured={"evaluations past L that ran": past.count(False)}, result=result)
