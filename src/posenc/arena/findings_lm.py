"""The language-modelling findings (Press et al. 2022; the zero-shot RoPE scalings), each a
Claim computed from the lm rows: perplexity ratios per seed, then median [min–max]."""

from __future__ import annotations

from posenc.arena.findings import claim, group, show, spread
from posenc.arena.results import Results, main_metric
from posenc.explain.claims import Claim


def ratio(res: Results, L: int, enc: str, a: int, b: int, metric: str = "ppl"):
    """Per seed ppl(b) / ppl(a) -> median [min–max], or None."""
    pa, pb = res.per_seed("lm", L, metric, enc, a), res.per_seed("lm", L, metric, enc, b)
    return spread([pb[s] / pa[s] for s in sorted(set(pa) & set(pb)) if pa[s]])


def ppl(res: Results, L: int, enc: str, E: int):
    return spread(list(res.per_seed("lm", L, "ppl", enc, E).values()))


def lm_findings(res: Results) -> list[Claim]:
    L = group(res, "lm")
    out = [learned_table(res)]
    if L is None:
        need = "needs the lm task"
        return [
            claim(t, p, need, "not measured")
            for t, p in (
                ("Sinusoidal perplexity rises steeply past L", "Press et al. 2022"),
                ("ALiBi (and KERPLE) perplexity at 8L is no worse than at L", "Press et al. 2022"),
                ("T5 bias holds to about 2L, then rises slowly", "Press et al. 2022"),
                ("Zero-shot NTK / YaRN / dynamic scaling beat raw RoPE at 4L", "Peng et al. 2023"),
            )
        ] + out
    lens = res.eval_lens("lm", L)
    E2 = next((E for E in lens if E > L), None)
    Emax = max(lens)

    text = "Sinusoidal perplexity rises steeply past L"
    paper = "Press et al. 2022: 20.05 at L=512 → 43.54 at 1012 (×2.17), WikiText-103"
    r = ratio(res, L, "sinusoidal", L, E2) if E2 else None
    if r is None:
        out.insert(0, claim(text, paper, "needs sinusoidal at L and a longer length",
                            "not measured"))  # fmt: skip
    else:
        result = (
            f"{show(ppl(res, L, 'sinusoidal', L))} at L={L} → "
            f"{show(ppl(res, L, 'sinusoidal', E2))} at {E2}: ×{show(r)} (steep = ×1.5)"
        )
        out.insert(0, claim(text, paper, result, "reproduced" if r[0] >= 1.5 else
                            "not reproduced"))  # fmt: skip

    text = "ALiBi (and KERPLE) perplexity at 8L is no worse than at L"
    paper = "Press et al. 2022: ALiBi 19.73 at L=512 → 18.32 at 10512"
    parts, ok = [], []
    for enc in ("alibi", "kerple"):
        r = ratio(res, L, enc, L, Emax) if Emax > L else None
        if r is not None:
            parts.append(f"{enc} {show(ppl(res, L, enc, L))} → {show(ppl(res, L, enc, Emax))} "
                         f"at {Emax / L:g}L: ×{show(r)}")  # fmt: skip
            ok.append(r[0] <= 1.02)
    if not ok:
        out.append(claim(text, paper, "needs alibi/kerple and a longer length", "not measured"))
    else:
        result = "; ".join(parts) + "; no worse = within 2%"
        out.append(claim(text, paper, result, "reproduced" if all(ok) else "not reproduced"))

    text = "T5 bias holds to about 2L, then rises slowly"
    paper = "Press et al. 2022: 19.65 at L=512, 18.79 at 1012, 20.41 at 2512, 52.95 at 10512"
    r2 = ratio(res, L, "t5", L, 2 * L)
    if r2 is None:
        out.append(claim(text, paper, "needs t5 at L and 2L", "not measured"))
    else:
        result, good = f"ppl ×{show(r2)} at 2L", r2[0] <= 1.05
        r8 = ratio(res, L, "t5", L, Emax) if Emax > 2 * L else None
        if r8 is not None:
            result += f", ×{show(r8)} at {Emax / L:g}L"
            good = good and r8[0] <= 1.5
        result += " (holds = ×1.05 or less at 2L; slowly = ×1.5 or less after)"
        out.append(claim(text, paper, result, "reproduced" if good else "not reproduced"))

    text = "Zero-shot NTK / YaRN / dynamic scaling beat raw RoPE at 4L"
    paper = "Peng et al. 2023 (YaRN); bloc97 / emozilla (NTK, dynamic)"
    E4 = 4 * L if 4 * L in lens else next((E for E in lens if E > 2 * L), None)
    raw = ppl(res, L, "rope", E4) if E4 else None
    parts, wins = [], []
    for v in ("ntk", "yarn", "dynamic"):
        x = ppl(res, L, f"rope+{v}", E4) if E4 else None
        if x is not None and raw is not None:
            parts.append(f"rope+{v} {show(x)}")
            wins.append(x[0] < raw[0])
    if not wins:
        out.append(claim(text, paper, "needs rope and rope+ntk/yarn/dynamic at 4L",
                         "not measured"))  # fmt: skip
    else:
        result = f"ppl at {E4} ({E4 / L:g}L): rope {show(raw)} vs " + ", ".join(parts)
        verdict = "reproduced" if all(wins) else "not reproduced"
        if any(wins) and not all(wins):
            result += " (only some beat raw RoPE)"
        out.append(claim(text, paper, result, verdict))
    return out


def learned_table(res: Results) -> Claim:
    text = "Learned absolute positions cannot run past their table"
    paper = "Press et al. 2022: not evaluable past L"
    past, within = [], []
    for t, L in res.groups:
        for E in res.eval_lens(t, L):
            key = (t, L, main_metric(t), "learned", E)
            if E > L and (res.stat(*key) or res.is_na(*key)):
                past.append(res.is_na(*key))
            elif E <= L:
                within.append(res.med(*key) is not None)
    if not past:
        return claim(text, paper, "needs learned evaluated past L", "not measured")
    reason = next((res.na[k] for k in res.na if k[3] == "learned"), "")
    result = (f"{sum(past)}/{len(past)} evaluations past L are n/a (“{reason}”); "
              f"{sum(within)} within L are measured")  # fmt: skip
    return claim(text, paper, result, "reproduced" if all(past) else "not reproduced")
