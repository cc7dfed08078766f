"""Matplotlib figures of positional encodings. Each function takes arrays, returns a Figure.

Figures are built with `matplotlib.figure.Figure` directly (no pyplot): no global state, no
GUI backend, nothing to close; `save(fig, path)` writes a PNG with the Agg canvas.
"""

from __future__ import annotations

import math
from pathlib import Path

import matplotlib
import matplotlib.ticker
import numpy as np
from matplotlib.figure import Figure

STYLE = {
    "font.size": 10,
    "axes.titlesize": 11,
    "axes.labelsize": 10,
    "xtick.labelsize": 9,
    "ytick.labelsize": 9,
    "legend.fontsize": 8.5,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "axes.grid": True,
    "grid.alpha": 0.25,
    "figure.dpi": 110,
}
WIDE = (6.4, 3.4)
COLORS = ["#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf"]


def figure(size=WIDE) -> Figure:
    with matplotlib.rc_context(STYLE):
        return Figure(figsize=size, layout="constrained")


def save(fig: Figure, path: str | Path) -> Path:
    """Write fig as a PNG; returns the path."""
    path = Path(path)
    with matplotlib.rc_context(STYLE):
        fig.savefig(path, format="png")
    return path


def _np(x) -> np.ndarray:
    return x.detach().cpu().double().numpy() if hasattr(x, "detach") else np.asarray(x, float)


def _diverging(ax, a: np.ndarray, **kw):
    """imshow of a [rows, cols] on a red-blue scale symmetric around 0."""
    m = float(np.nanmax(np.abs(a))) if a.size else 1.0
    m = m if m > 0 else 1.0
    kw = dict(cmap="RdBu_r", vmin=-m, vmax=m, aspect="auto", interpolation="nearest", **kw)
    return ax.imshow(a, **kw)


def heatmap(
    table,
    *,
    title: str,
    xlabel: str = "dimension",
    ylabel: str = "position t",
    cbar: str = "value",
) -> Figure:
    """table [T, F] -> positions down, features across, a diverging colour scale around 0."""
    a = _np(table)
    fig = figure()
    with matplotlib.rc_context(STYLE):
        ax = fig.add_subplot()
        im = _diverging(ax, a, extent=(-0.5, a.shape[1] - 0.5, a.shape[0] - 0.5, -0.5))
        ax.set(title=title, xlabel=xlabel, ylabel=ylabel)
        ax.xaxis.set_major_locator(matplotlib.ticker.MaxNLocator(integer=True))
        ax.grid(False)
        fig.colorbar(im, ax=ax, label=cbar, shrink=0.9)
    return fig


def head_matrices(mats, *, title: str, cbar: str = "added to the logit") -> Figure:
    """mats [H, Tq, Tk] -> one panel per head (up to 8), each with its own colour scale (slopes
    differ by orders of magnitude between heads); keys j > i blanked out (causal)."""
    a = _np(mats)[:8].copy()
    H, Tq, Tk = a.shape
    a[:, np.triu(np.ones((Tq, Tk), bool), k=1 + Tk - Tq)] = np.nan
    cols = min(H, 4)
    rows = math.ceil(H / cols)
    fig = figure((6.4, 0.9 + 2.0 * rows))
    with matplotlib.rc_context(STYLE):
        axes = fig.subplots(rows, cols, squeeze=False)
        cmap = matplotlib.colormaps["viridis"].with_extremes(bad="#eeeeee")
        for h, ax in enumerate(axes.flat):
            ax.grid(False)
            if h >= H:
                ax.set_visible(False)
                continue
            finite = a[h][np.isfinite(a[h])]
            lo, hi = (float(finite.min()), float(finite.max())) if finite.size else (0.0, 1.0)
            if hi - lo < 1e-12:
                lo, hi = lo - 1, hi + 1
            im = ax.imshow(a[h], cmap=cmap, vmin=lo, vmax=hi, interpolation="nearest")
            ax.set_title(f"head {h}", fontsize=9)
            ax.tick_params(labelsize=7.5)
            if h % cols == 0:
                ax.set_ylabel("query i")
            ax.set_xlabel("key j", fontsize=8.5)
            cb = fig.colorbar(im, ax=ax, shrink=0.8, location="bottom", pad=0.02)
            cb.ax.tick_params(labelsize=7, rotation=45)
        fig.suptitle(f"{title}\n({cbar}; own colour scale per head)", fontsize=10.5)
    return fig


def waveforms(table, dims, *, title: str, ylabel: str = "value", what: str = "dim") -> Figure:
    """table [T, F] -> one line per chosen column over positions."""
    a = _np(table)
    fig = figure()
    with matplotlib.rc_context(STYLE):
        ax = fig.add_subplot()
        t = np.arange(a.shape[0])
        for c, d in enumerate(dims):
            ax.plot(t, a[:, d], color=COLORS[c % len(COLORS)], lw=1.4, label=f"{what} {d}")
        ax.set(title=title, xlabel="position t", ylabel=ylabel)
        ax.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0), framealpha=0.9)
    return fig


def curves(
    x,
    lines: dict[str, object],
    *,
    title: str,
    xlabel: str,
    ylabel: str,
    note: str | None = None,
    overlay: bool = False,
) -> Figure:
    """Several labelled lines over a shared x (e.g. score against distance).

    overlay: lines expected to coincide; drawn wide-to-thin with different dashes so that
    every one stays visible on top of the others.
    """
    xs = _np(x)
    fig = figure()
    with matplotlib.rc_context(STYLE):
        ax = fig.add_subplot()
        for c, (label, y) in enumerate(lines.items()):
            style = "--" if label.startswith("bound") else "-"
            lw = 1.4
            if overlay:
                style, lw = ["-", "--", ":", "-."][c % 4], max(4.0 - 1.2 * c, 1.2)
            ax.plot(xs, _np(y), style, color=COLORS[c % len(COLORS)], lw=lw, label=label)
        ax.set(title=title, xlabel=xlabel, ylabel=ylabel)
        if len(lines) > 1:
            ax.legend(loc="best", ncols=2 if len(lines) > 4 else 1, framealpha=0.9)
        if note:
            ax.text(0.5, 0.6, note, transform=ax.transAxes, ha="center", fontsize=9, color="#444")
    return fig


def wavelengths(wl, *, title: str, base: float | None = 10000.0) -> Figure:
    """wl [R/2] wavelength (positions per turn) of each sin/cos pair, log scale."""
    w = _np(wl)
    fig = figure()
    with matplotlib.rc_context(STYLE):
        ax = fig.add_subplot()
        ax.semilogy(np.arange(len(w)), w, "o-", ms=3, lw=1.2, color=COLORS[0], label="measured")
        refs = [(2 * math.pi, "2π")] + ([(base * 2 * math.pi, f"{base:g}·2π")] if base else [])
        for value, label in refs:
            ax.axhline(value, color="#888", ls=":", lw=1)
            ax.text(len(w) - 1, value, f" {label}", va="bottom", ha="right", fontsize=8.5)
        ax.set(
            title=title,
            xlabel="pair index i (dims 2i, 2i+1)",
            ylabel="wavelength (positions per turn)",
        )
    return fig


def clocks(angles, positions, pairs, *, title: str) -> Figure:
    """Seed 004's clock view: one face per position, one hand per sin/cos pair.

    angles [len(positions), len(pairs)] in radians; the hand of pair i points at angle
    angle (counter-clockwise from 3 o'clock, as (cos, sin)); shorter hands turn slower.
    """
    a = _np(angles)
    n = len(positions)
    fig = figure((6.4, 2.6))
    with matplotlib.rc_context(STYLE):
        axes = fig.subplots(1, n, squeeze=False)[0]
        theta = np.linspace(0, 2 * math.pi, 100)
        for ax, p, row in zip(axes, positions, a):
            ax.plot(np.cos(theta), np.sin(theta), color="#999", lw=0.8)
            for c, ang in enumerate(row):
                r = 0.95 - 0.6 * c / max(len(pairs) - 1, 1)
                color = COLORS[c % len(COLORS)]
                ax.plot([0, r * math.cos(ang)], [0, r * math.sin(ang)], color=color, lw=2)
            ax.set_aspect("equal")
            ax.set_xlim(-1.1, 1.1)
            ax.set_ylim(-1.1, 1.1)
            ax.axis("off")
            ax.set_title(f"t = {p}", fontsize=9)
        handles = [
            matplotlib.lines.Line2D([], [], color=COLORS[c % len(COLORS)], lw=2)
            for c in range(len(pairs))
        ]
        fig.legend(
            handles,
            [f"pair {i}" for i in pairs],
            loc="outside lower center",
            ncols=len(pairs),
            fontsize=8.5,
        )
        fig.suptitle(title)
    return fig


def binary_counter(table, *, bits: int = 4, title: str) -> Figure:
    """Seed 000's analogy: the bits of t (low bit first) next to the first dims of the table."""
    a = _np(table)
    T = a.shape[0]
    b = np.array([[(t >> i) & 1 for i in range(bits)] for t in range(T)], float)
    fig = figure((6.4, 3.6))
    with matplotlib.rc_context(STYLE):
        left, right = fig.subplots(1, 2, width_ratios=[bits, a.shape[1]])
        left.imshow(b, cmap="Blues", vmin=0, vmax=2.2, aspect="auto", interpolation="nearest")
        for t in range(T):
            for i in range(bits):
                left.text(i, t, int(b[t, i]), ha="center", va="center", fontsize=7.5)
        left.set(title="binary t (bit 0 first)", xlabel="bit", ylabel="position t")
        left.set_xticks(range(bits))
        left.set_yticks(range(0, T, 2))
        im = _diverging(right, a)
        right.set(title="sinusoids (same positions)", xlabel="dimension")
        right.set_yticks(range(0, T, 2))
        for ax in (left, right):
            ax.grid(False)
        fig.colorbar(im, ax=right, label="value", shrink=0.9)
        fig.suptitle(title)
    return fig
