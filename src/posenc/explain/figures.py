"""Which figures an encoding gets, drawn from its hooks (see posenc.analysis for the probes)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import torch

from posenc import analysis, plots
from posenc.base import PositionalEncoding
from posenc.explain.i18n import tr
from posenc.explain.i18n.fonts import cjk_family

KINDS = {  # figure kind: its title, in page order (the comparison page groups by kind)
    "heatmap": "The encoding",  # the table, rotation angles, or per-head bias matrices
    "waveforms": "Waveforms",  # chosen dims over positions
    "similarity": "Similarity / score against distance",  # <p_t, p_(t+k)>, or score against k
    "attention": "The attention it yields",  # from the positions alone (q, k the same everywhere)
    "wavelengths": "Wavelengths",  # of each sin/cos pair (2π .. base·2π)
    "clock": "Clock view (seed 004)",  # each pair a hand turning at its own speed
    "binary": "Binary counter (seed 000)",  # next to the sinusoids
    "trained": "Trained state",  # from a checkpoint (trainable encodings)
}
ATTENTION = ("Softmax over keys j <= i of the scores above, q and k the same everywhere: where "
             "each query looks for the positions alone (without: uniform, 1/(i+1)).")  # fmt: skip


@dataclass
class Fig:
    kind: str
    file: str  # PNG file name, relative to the page
    caption: str
    width: int = 0
    height: int = 0


def pick_dims(F: int, n: int = 4, step: int = 1) -> list[int]:
    """n columns spread geometrically over 0..F-1 (multiples of `step`: the sin columns of
    interleaved pairs), so fast and slow ones both show."""
    if n * step >= F:
        return list(range(0, F, step))
    top = (F - 1) // step
    picks = {0} | {int(round(top ** (i / (n - 1)))) for i in range(1, n)}
    return sorted(p * step for p in picks)


def encoding_angles(enc, vectors, positions) -> torch.Tensor | None:
    """[T, R/2] angles of each sin/cos pair over positions (1-D encodings), when it has them."""
    if enc.position_dims != 1:
        return None
    if "angles" in enc.provides:
        return enc.angles(positions).double()
    return analysis.pair_angles(vectors) if "embed" in enc.provides else None


def translate(fig, name: str, lang: str) -> None:
    """Every text of a drawn figure (titles, labels, legends, notes) in `lang`, line by line,
    an encoding's name before a colon kept; set in a font that has the glyphs."""
    from matplotlib.text import Text

    family = cjk_family()
    for t in fig.findobj(Text):
        lines = []
        for line in t.get_text().split("\n"):
            head, colon, rest = line.partition(": ")
            lines.append(f"{head}: {tr(rest, lang)}" if colon and head == name else tr(line, lang))
        t.set_text("\n".join(lines))
        t.set_fontfamily(family)


@torch.no_grad()
def draw(
    enc: PositionalEncoding,
    name: str,
    out: Path,
    *,
    dim: int,
    heads: int,
    max_pos: int,
    state: str = "initial",
    lang: str = "en",
) -> list[Fig]:
    """Draw every figure that applies to `enc` into `out`; returns them in page order (its
    texts in `lang`)."""
    figs: list[Fig] = []
    stem = "trained_" if state == "trained" else ""
    title_state = (
        " (trained)" if state == "trained" else (" (initial state)" if enc.trainable else "")
    )

    def put(kind: str, fig, caption: str) -> None:
        file = f"{stem}{kind}.png"
        if lang != "en":
            translate(fig, name, lang)
        plots.save(fig, out / file)
        w, h = (int(round(v)) for v in fig.get_size_inches() * fig.dpi)
        figs.append(Fig("trained" if state == "trained" else kind, file, caption, w, h))

    pos = torch.arange(max_pos)
    vectors = analysis.position_vectors(enc, pos, dim=dim)
    angles = encoding_angles(enc, vectors, pos)
    T = min(max_pos, 64)
    part = None  # what an absolute encoding adds, or (concatenating) the columns it appends
    if "embed" in enc.provides:
        part = vectors[:, dim:] if vectors.shape[1] > dim else vectors

    # heatmap ---------------------------------------------------------------------------
    if part is not None:
        put(
            "heatmap",
            plots.heatmap(
                part.float(),
                title=f"{name}: value per position and dim{title_state}",
                xlabel="dimension" if part is vectors else "appended feature",
                cbar="encoding value",
            ),
            "Each row is the vector the encoding adds (or appends) at that position.",
        )
    elif "angles" in enc.provides and angles is not None:
        put(
            "heatmap",
            plots.heatmap(
                torch.cos(angles),
                title=f"{name}: cos(rotation angle){title_state}",
                xlabel="rotary pair i (dims rotated together)",
                cbar="cos(angle)",
            ),
            "Rotary encodings add nothing: they turn each pair of query/key dims by an angle "
            "that grows with the position. Shown: the cosine of that angle.",
        )
    elif "angles" in enc.provides:  # 2-D / 3-D rotary: the rotated query
        put(
            "heatmap",
            plots.heatmap(
                vectors.float(), title=f"{name}: rotated query{title_state}", cbar="component"
            ),
            "A fixed query (all ones) rotated to each position.",
        )
    else:  # in attention (bias, relative, content) or nothing at all
        p = torch.arange(T)
        mats = analysis.scores(enc, p, p, dim=dim, heads=heads)
        what = {"bias": "bias", "relative": "position part of the score",
                "none": "score from positions (none)"}  # fmt: skip
        what = what.get(enc.family, "score, the content held fixed,")
        lead = "Added to q·k/√Dh before the softmax, for query i and key j"
        if enc.family == "content":  # FoX's gates, DAPE's MLP, stick-breaking's stick alone
            lead = (
                f"{analysis.score_label(enc).capitalize()} for query i and key j, the content "
                "held fixed (one random q and k at every position; q·k = 0 where the scheme "
                "reads the logits)"
            )
        elif enc.family == "relative":
            lead += " (one fixed random q and k at every position)"
        put(
            "heatmap",
            plots.head_matrices(
                mats, title=f"{name}: {what} per head{title_state}", cbar=analysis.score_label(enc)
            ),
            lead + "; keys after the query (j > i, grey) are left out, as a causal model masks "
            "them.",
        )

    # waveforms -------------------------------------------------------------------------
    if state == "initial":
        if part is not None:
            interleaved = angles is not None and analysis.pair_angles(part[:, :2]) is not None
            dims = pick_dims(part.shape[1], step=2 if interleaved else 1)
            put(
                "waveforms",
                plots.waveforms(part[:T], dims, title=f"{name}: chosen dims over positions"),
                "Each line is one dimension of the encoding as the position grows"
                + (" (the sin column of pairs spread from fast to slow)." if interleaved else "."),
            )
        elif angles is not None:
            dims = pick_dims(angles.shape[1])
            put(
                "waveforms",
                plots.waveforms(
                    torch.cos(angles[:T]),
                    dims,
                    title=f"{name}: cos(angle) of chosen pairs",
                    ylabel="cos(angle)",
                    what="pair",
                ),
                "Low pairs turn fast, high pairs slowly.",
            )

    # similarity / score against distance ----------------------------------------------
    what, xlabel, kw = "score against distance", "distance k = i - j (positions)", {}
    if "embed" in enc.provides:
        K = max_pos // 2
        G = vectors @ vectors.T
        lines = {f"t = {t}": G[t, t : t + K] for t in [0, max_pos // 4, max_pos // 2 - 1]}
        what, xlabel, kw = "<p_t, p_(t+k)> against k", "offset k (positions)", {"overlay": True}
        ylabel = "dot product"
        caption = (
            "If the lines for different t coincide, the similarity depends only on the offset."
        )
    elif "angles" in enc.provides:
        K = 4 * max_pos
        lines = {
            "score, q = k = ones/√Dh": analysis.score_vs_distance(enc, K, dim=dim, heads=heads)[0]
        }
        a = encoding_angles(enc, None, torch.arange(K))  # rotary: its own angles
        if a is not None:
            bound = analysis.su_bound(a)
            lines["bound (Su et al.), scaled"] = bound / bound[0]
        ylabel = "q·k after rotation"
        caption = (
            "Su et al.'s long-term decay: the score of a fixed query with keys further away. "
            "Dashed: their bound (1/(R/2))·Σ_j |Σ_(i<j) e^(i·k·θ_i)|, divided by its value at "
            "k = 0."
        )
    else:
        K = max_pos
        curve = analysis.score_vs_distance(enc, K, dim=dim, heads=heads)[:8]
        lines = {f"head {h}": curve[h] for h in range(curve.shape[0])}
        if len(lines) == 1:
            lines = {"score": curve[0]}
        ylabel = analysis.score_label(enc)
        kw = {"note": "no positional signal" if float(curve.abs().max()) == 0 else None}
        caption = (
            f"{analysis.score_label(enc).capitalize()}: a key k positions before the query"
            + (", the content held fixed." if enc.family == "content" else ".")
        )
    title = f"{name}: {what}{title_state}"
    curves = plots.curves(torch.arange(K), lines, title=title, xlabel=xlabel, ylabel=ylabel, **kw)
    put("similarity", curves, caption)

    if state == "initial" and "embed" not in enc.provides:  # the attention the positions yield
        w = analysis.attention_weights(enc, min(max_pos, 32), dim=dim, heads=heads)
        title = f"{name}: causal attention from the positions alone"
        put("attention", plots.head_matrices(w, title=title, cbar="attention weight"), ATTENTION)

    # wavelengths, clock, binary counter (sin/cos pairs only) ---------------------------
    if state == "initial" and angles is not None:
        wl = analysis.wavelengths(angles)
        keep = torch.isfinite(wl)
        base = getattr(enc, "base", None)
        base = float(base) if isinstance(base, int | float) else 10000.0
        put(
            "wavelengths",
            plots.wavelengths(wl[keep], title=f"{name}: wavelength of each pair", base=base),
            "Positions per full turn of each pair, fitted from the angles; dotted: 2π and "
            f"{base:g}·2π (seed 000).",
        )
        n_pairs = angles.shape[1]
        pairs = sorted({0, n_pairs // 8, n_pairs // 4, n_pairs // 2} - {n_pairs})
        show = [t for t in (0, 1, 2, 5, 10, 20) if t < max_pos]
        put(
            "clock",
            plots.clocks(
                angles[show][:, pairs],
                show,
                pairs,
                title=f"{name}: each pair a clock hand (seed 004)",
            ),
            "Pair 0 is the second hand, the later pairs the minute and hour hands: together "
            "they tell the position like a clock tells the time.",
        )
        if part is None:  # rotary: the sin / cos of its angles, pair by pair
            part = torch.stack([angles.sin(), angles.cos()], -1).flatten(1)
        put(
            "binary",
            plots.binary_counter(
                part[:16, :8], title=f"{name}: binary counter vs sinusoids (seed 000)"
            ),
            "Low bits flip fastest and high bits slowest; the sinusoids do the same "
            "continuously, the first dims fastest.",
        )
    return figs
