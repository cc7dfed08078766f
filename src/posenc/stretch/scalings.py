"""The RoPE scalings `posenc stretch` compares, labels like `yarn(factor=4)` or
`yarn@full_attention(factor=4)`, as rope_parameters for posenc.hf.patch."""

from __future__ import annotations

import copy
import re
import warnings
from dataclasses import dataclass
from difflib import get_close_matches

from posenc.cliargs import split_call
from posenc.functional.rope_scaling import check_values
from posenc.hf.config import layer_types_of
from posenc.stretch.names import FACTOR, SCALINGS

_LEN = "original_max_position_embeddings"
_YARN = ("attention_factor", "mscale", "mscale_all_dim", "beta_fast", "beta_slow", "truncate")
READS = {  # the keywords each variant's function reads (posenc.functional.rope_scaling)
    "none": (), "linear": ("factor",), "ntk": ("factor",), "dynamic": ("factor", _LEN),
    "yarn": ("factor", _LEN, *_YARN), "dynamic_yarn": (_LEN, *_YARN),
    "llama3": ("factor", "low_freq_factor", "high_freq_factor", _LEN),
    "longrope": ("factor", _LEN, "attention_factor"),
    "proportional": ("factor", "partial_rotary_factor"),
}  # fmt: skip
BOOLS = ("truncate",)


@dataclass(frozen=True)
class Scaling:
    name: str
    kwargs: tuple = ()  # the label's keywords, sorted (key, value) pairs
    layer_type: str | None = None  # the one the label names: yarn@full_attention
    targets: tuple | None = None  # the layer types it scales (for_model); not in the label

    @property
    def label(self) -> str:
        head = self.name + (f"@{self.layer_type}" if self.layer_type else "")
        if not self.kwargs:
            return head
        return f"{head}({','.join(f'{k}={_show(v)}' for k, v in self.kwargs)})"

    def resolved(self, factor: float) -> Scaling:
        """`yarn` -> `yarn(factor=2)`: rows of different factors never share a label."""
        if self.name not in FACTOR or "factor" in dict(self.kwargs):
            return self
        f = round(float(factor), 4)
        kw = {**dict(self.kwargs), "factor": int(f) if f == int(f) else f}
        return Scaling(self.name, tuple(sorted(kw.items())), self.layer_type, self.targets)

    def for_model(self, types: list[str] | None, flat: list[str] | None) -> Scaling:
        """Aimed at a model's layer `types` with RoPE; `flat`: those transformers scales for a
        flat rope_scaling (None: no flat meaning). ValueError naming the label."""
        if self.name == "none":
            return self
        if types is None:
            if self.layer_type is not None:
                raise ValueError(f"--scalings {self.label}: this model has one rope for every "
                                 "layer; drop @" + self.layer_type)  # fmt: skip
            return self
        if self.layer_type is not None:
            if self.layer_type not in types:
                raise ValueError(f"--scalings {self.label}: this model's layer types with RoPE "
                                 f"are {', '.join(types)}; got @{self.layer_type}")  # fmt: skip
            return Scaling(self.name, self.kwargs, self.layer_type, (self.layer_type,))
        if not flat:
            raise ValueError(f"--scalings {self.label}: this model has RoPE per layer type and "
                             "transformers gives a flat scaling no meaning for it; name a type: "
                             + ", ".join(f"{self.name}@{t}" for t in types))  # fmt: skip
        return Scaling(self.name, self.kwargs, None, tuple(flat))

    def params(self, *, context: int, head_dim: int, factor: float) -> dict | None:
        """rope_parameters for posenc.hf.patch (None: the model's own; {type: dict} for the
        `targets`); `factor`: the default one, the longest length over `context`."""
        if self.name == "none":
            return None
        given = dict(self.kwargs)
        f = float(given.pop("factor", factor))
        p: dict = {"rope_type": self.name, _LEN: context}
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
        p |= given
        return p if self.targets is None else {t: dict(p) for t in self.targets}


def _show(v) -> str:
    return ("true" if v else "false") if isinstance(v, bool) else repr(v)


def flat_targets(config) -> list[str] | None:
    """The layer types transformers scales for a flat rope_scaling on this model's config class
    (Gemma 3: ['full_attention']); None where it has no flat meaning for the model."""
    d = copy.deepcopy(config.to_dict())
    own = d.get("rope_parameters") or {}
    probe = {"rope_type": "linear", "factor": 2.0}
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            new = type(config).from_dict({**copy.deepcopy(d), "rope_scaling": probe}).to_dict()
    except Exception:  # noqa: BLE001 - any refusal: no flat meaning
        return None
    params = new.get("rope_parameters") or {}
    if layer_types_of(params) is None:
        return None
    changed = [t for t, p in params.items() if p and p.get("rope_type") == "linear"
               and (own.get(t) or {}).get("rope_type") != "linear"]  # fmt: skip
    return changed or None


def split_labels(text: str, flag: str = "--scalings") -> list[str]:
    """'none,yarn(factor=2,beta_fast=16)' -> ['none', 'yarn(factor=2,beta_fast=16)']: commas
    inside parentheses stay (`parse` refuses unbalanced ones). ValueError for an empty list."""
    labels = [p.strip() for p in re.split(r",(?![^(]*\))", text) if p.strip()]
    if not labels:
        raise ValueError(f"{flag}: give at least one name, e.g. none,yarn(factor=2)")
    return list(dict.fromkeys(labels))


def parse(label: str) -> Scaling:
    """A label -> Scaling; ValueError naming --scalings and the label, and the allowed names,
    layer types or keywords."""
    where = f"--scalings {label.strip()!r}"
    head, kwargs = split_call(label, where, "yarn(factor=4)")
    name, at, layer_type = (s.strip() for s in head.partition("@"))
    if name not in SCALINGS:
        close = get_close_matches(name, SCALINGS, n=3, cutoff=0.5)
        hint = f" (did you mean {', '.join(close)}?)" if close else ""
        raise ValueError(
            f"--scalings: unknown scaling {name!r}{hint}; allowed: {', '.join(SCALINGS)}"
        )
    if at and not layer_type.isidentifier():
        raise ValueError(
            f"{where}: name a layer type after @: write name@layer_type, e.g. "
            "yarn@full_attention(factor=4)"
        )
    if name == "none" and (kwargs or at):
        raise ValueError(f"{where}: none takes no keywords and no layer type")
    if "rope_type" in kwargs:
        raise ValueError(f"{where}: the name sets rope_type; drop rope_type=")
    for key, value in kwargs.items():
        if key not in READS[name]:
            raise ValueError(f"{where}: {name} does not read {key!r} (it would change nothing); "
                             f"its keywords: {', '.join(READS[name]) or 'none'}")  # fmt: skip
        if (key in BOOLS) != isinstance(value, bool) or isinstance(value, str):
            kind = "true or false" if key in BOOLS else "a number"
            raise ValueError(f"{where}: {key} must be {kind}, got {value!r}")
    try:
        if kwargs:
            check_values(kwargs, name)
    except (ValueError, TypeError) as err:
        raise ValueError(f"{where}: {str(err).partition(': ')[2] or err}") from None
    return Scaling(name, tuple(sorted(kwargs.items())), layer_type or None)


def parse_all(text: str) -> list[Scaling]:
    scalings = [parse(lb) for lb in split_labels(text)]
    return list(dict.fromkeys(scalings))
