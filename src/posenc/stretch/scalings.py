"""The RoPE scalings `posenc stretch` compares, as rope_parameters for posenc.hf.patch.

A scaling is named by a label: a name from SCALINGS, optionally with keywords, e.g. `yarn`,
`yarn(factor=4)`, `llama3(factor=2,high_freq_factor=8)`. Keywords are rope_parameters keys of
that rope_type. Unless given, `factor` of a static scaling (FACTOR) is the longest target
length over the model's context (at least 1) and is written into its label; dynamic scalings
take theirs from each call's length (dynamic NTK's `factor`, emozilla's alpha, defaults to 1).

    none          the model as trained (its own rope_parameters)
    linear        position interpolation (Chen et al. 2023): every frequency / factor
    ntk           NTK-aware (bloc97 2023): base * factor^(Dh / (Dh - 2))
    dynamic       dynamic NTK (emozilla 2023): the NTK base grows with the current length
    yarn          YaRN (Peng et al. 2023): NTK-by-parts, beta_fast 32 / beta_slow 1, temperature
    dynamic_yarn  Dynamic-YaRN (Peng et al. 2023): YaRN with factor max(1, length / context)
    llama3        Llama 3.1's band: wavelengths over context / 1 divided by factor, under / 4 kept
    longrope      LongRoPE's form with ramped factors (no search here): long factors from 1 for
                  the fastest pair to factor for the slowest, short factors 1
    proportional  p-RoPE (Barbero et al. 2025): the slowest quarter of the pairs stop turning
"""

from __future__ import annotations

from dataclasses import dataclass
from difflib import get_close_matches

from posenc.arena.config import parse_value

SCALINGS = ("none", "linear", "ntk", "dynamic", "yarn", "dynamic_yarn", "llama3", "longrope",
            "proportional")  # fmt: skip
QUICK = ("none", "yarn", "dynamic")
FACTOR = ("linear", "ntk", "yarn", "llama3", "longrope")  # static: factor = longest / context
ROPE_TYPE = {"none": None, **{s: s for s in SCALINGS[1:]}}


@dataclass(frozen=True)
class Scaling:
    """One scaling: its name and the keywords its label gave (sorted (key, value) pairs)."""

    name: str
    kwargs: tuple = ()

    @property
    def label(self) -> str:
        if not self.kwargs:
            return self.name
        return f"{self.name}({','.join(f'{k}={v!r}' for k, v in self.kwargs)})"

    def resolved(self, factor: float) -> Scaling:
        """This scaling with its default factor written in its label (`yarn` ->
        `yarn(factor=2)`), so that rows of different factors never share a label."""
        if self.name not in FACTOR or "factor" in dict(self.kwargs):
            return self
        f = round(float(factor), 4)
        return Scaling(
            self.name,
            tuple(sorted({**dict(self.kwargs), "factor": int(f) if f == int(f) else f}.items())),
        )

    def params(self, *, context: int, head_dim: int, factor: float) -> dict | None:
        """rope_parameters for posenc.hf.patch (None: the model's own). `factor` is the
        default factor: the longest target length over `context`, at least 1."""
        if self.name == "none":
            return None
        given = dict(self.kwargs)
        f = float(given.pop("factor", factor))
        p: dict = {"rope_type": ROPE_TYPE[self.name], "original_max_position_embeddings": context}
        if self.name in FACTOR:
            p["factor"] = f
        if self.name == "dynamic":  # emozilla's alpha: 1 unless given
            p["factor"] = f if "factor" in dict(self.kwargs) else 1.0
        if self.name == "llama3":
            p |= {"low_freq_factor": 1.0, "high_freq_factor": 4.0}
        if self.name == "longrope":
            half = head_dim // 2
            p["long_factor"] = [1.0 + (f - 1.0) * i / max(1, half - 1) for i in range(half)]
            p["short_factor"] = [1.0] * half
        if self.name == "proportional":
            p = {"rope_type": "proportional", "partial_rotary_factor": 0.75}
            if "factor" in dict(self.kwargs):
                p["factor"] = f
        return p | given


def split_labels(text: str, flag: str = "--scalings") -> list[str]:
    """'none,yarn(factor=2,beta_fast=16)' -> ['none', 'yarn(factor=2,beta_fast=16)']: commas
    inside parentheses stay. ValueError for an empty list or unbalanced parentheses."""
    parts, depth, cur = [], 0, ""
    for ch in text:
        depth += (ch == "(") - (ch == ")")
        if depth < 0:
            raise ValueError(f"{flag}: unbalanced ')' in {text!r}")
        if ch == "," and depth == 0:
            parts.append(cur.strip())
            cur = ""
        else:
            cur += ch
    if depth:
        raise ValueError(f"{flag}: unbalanced '(' in {text!r}")
    parts.append(cur.strip())
    labels = [p for p in parts if p]
    if not labels:
        raise ValueError(f"{flag}: give at least one name, e.g. none,yarn(factor=2)")
    return list(dict.fromkeys(labels))


def parse(label: str) -> Scaling:
    """A label -> Scaling; ValueError naming the label, the allowed names or the keyword."""
    name, kwargs = label.strip(), {}
    if name.endswith(")") and "(" in name:
        name, _, inside = name[:-1].partition("(")
        for item in filter(None, (p.strip() for p in inside.split(","))):
            key, eq, value = item.partition("=")
            if not eq or not key.strip().isidentifier():
                raise ValueError(f"--scalings {label!r}: write key=value, e.g. yarn(factor=4)")
            kwargs[key.strip()] = parse_value(value.strip())
    name = name.strip()
    if name not in SCALINGS:
        close = get_close_matches(name, SCALINGS, n=3, cutoff=0.5)
        hint = f" (did you mean {', '.join(close)}?)" if close else ""
        raise ValueError(
            f"--scalings: unknown scaling {name!r}{hint}; allowed: {', '.join(SCALINGS)}"
        )
    if name == "none" and kwargs:
        raise ValueError(f"--scalings {label!r}: none takes no keywords")
    if "rope_type" in kwargs:
        raise ValueError(f"--scalings {label!r}: the name sets rope_type; drop rope_type=")
    return Scaling(name, tuple(sorted(kwargs.items())))


def parse_all(text: str) -> list[Scaling]:
    scalings = [parse(lb) for lb in split_labels(text)]
    return list(dict.fromkeys(scalings))
