"""The reference engines test their RoPE against: float64 cos / sin (and rotated q / k) of a
transformers config (golden), and an engine's dump judged against them by position band, each
value against the error budget of its dtype (conform).

    parse_positions("0:4096,131071") -> [T] int64      items A:B, A:B:S or N, comma separated
    read_config(path) -> config                        a config.json, or a model folder holding one
    golden(config, positions, *, seq_len=None, layer_type=None, qk=None) -> Golden
    write_golden(golden, path) / read_golden(path)     .npz (numpy) or .safetensors
    read_dump(path) -> {name: tensor}                  .npz, .safetensors or .pt / .pth / .bin
    conform(config, dump, ...) -> Conformance          .lines(): one line per position band

Golden values (formula 1): posenc.hf.from_config's RoPE, its inverse frequencies w [R/2] from
posenc.functional.rope_inv_freq in float32 (the model's, as transformers computes them) taken
exactly into float64; angles p * w, cos / sin times the attention factor and the rotation of
q / k all in float64. cos / sin are stored per rotary pair [T, R/2]. The per-value error
budget, derived term by term in docs/hf/golden.md ("The budget"):

    budget(p, i) = af * r * (eps_s + 2 eps_c + p * w_i * (eps_f * (3 + |ln w_i|) + 2 eps_c) / 2)

eps_s / eps_c the stored / compute dtype's epsilon, eps_f = max(eps_c, 2^-23), af the attention
factor, r = 1 for a cache; rotated q / k: doubled, r = |(a, b)|, channels past R w = 0, af = 1.
"""

from __future__ import annotations

import dataclasses
import json
import os

import torch

from posenc import __version__
from posenc import functional as PF
from posenc.checks import check_int
from posenc.cliargs import file_suffix
from posenc.encodings.rotary import RoPE
from posenc.hf.config import from_config
from posenc.hf.patch import spread

FORMULA_VERSION = 1
MAX_POSITION = 2**31  # positions below this (float64 angles p * w exact to ~2^-22 rad)
MAX_VALUES = 2**26  # T * R (and T * H * Dh for q / k) at most: ~0.5 GiB of float64
BAND_EDGES = (0, 2048, 8192, 32768, 131072, 524288, 2097152, 8388608, 33554432, 134217728,
              536870912)  # fmt: skip  # [0, 2k), then powers of 4
DTYPES = {name: getattr(torch, name) for name in ("float64", "float32", "float16", "bfloat16")}
DUMP_SUFFIXES = (".npz", ".safetensors", ".pt", ".pth", ".bin")
ROWS = 4096  # positions per chunk in conform
FREQ_EPS = torch.finfo(torch.float32).eps  # the precision of the golden (the model's) frequencies


# ------------------------------------------------------------------------------ inputs


def parse_positions(spec: str, flag: str = "--positions") -> torch.Tensor:
    """'A:B' (B exclusive), 'A:B:S' (step S), 'N', comma separated, in the order given ->
    int64 [T]; ValueError naming the flag for anything else, past 2^31 or over MAX_VALUES."""
    if not isinstance(spec, str) or not spec.strip():
        raise ValueError(f"{flag} must be like 0:4096, 0,1,2,131071 or 0:1000000:997; got {spec!r}")
    parts, count = [], 0
    for item in spec.split(","):
        item = item.strip()
        try:
            nums = [int(s) for s in item.split(":")]
        except ValueError:
            nums = []
        if not 1 <= len(nums) <= 3 or (len(nums) == 1 and ":" in item):
            raise ValueError(
                f"{flag}: {item!r} is not N, A:B or A:B:S with integers "
                "(e.g. 0:4096, 0,1,2,131071, 0:1000000:997)"
            )
        if len(nums) == 1:
            nums = [nums[0], nums[0] + 1, 1]
        start, stop, step = (nums + [1])[:3]
        if start < 0 or stop <= start or step < 1:
            raise ValueError(f"{flag}: {item!r} needs 0 <= A < B and a step S >= 1")
        if stop > MAX_POSITION:
            raise ValueError(f"{flag}: {item!r} reaches past the largest position 2^31 - 1")
        count += -(-(stop - start) // step)
        if count > MAX_VALUES:
            raise ValueError(f"{flag}: {spec!r} holds over {MAX_VALUES} positions; give fewer")
        parts.append(torch.arange(start, stop, step, dtype=torch.int64))
    return torch.cat(parts)


def parse_bands(spec: str | None, flag: str = "--bands") -> tuple[int, ...]:
    """'0,2048,8192' -> band edges (strictly increasing ints >= 0; 0 is added in front);
    None -> BAND_EDGES. Band k is [edge k, edge k+1), the last one open."""
    if spec is None:
        return BAND_EDGES
    try:
        edges = [int(s) for s in spec.split(",")]
    except ValueError:
        raise ValueError(
            f"{flag} must be increasing integers like 0,2048,8192; got {spec!r}"
        ) from None
    if any(e < 0 for e in edges) or any(b <= a for a, b in zip(edges, edges[1:])):
        raise ValueError(f"{flag} must be strictly increasing integers >= 0; got {spec!r}")
    return tuple(edges if edges[0] == 0 else [0, *edges])


def read_config(path) -> tuple[object, str]:
    """(config, how it was read) of a config.json or a model folder holding one: transformers'
    AutoConfig where transformers is installed and knows the model_type (its defaults and
    standardized rope keys), else the plain dict (from_config reads both)."""
    path = os.fspath(path)
    if os.path.isdir(path):
        path = os.path.join(path, "config.json")
        if not os.path.isfile(path):
            raise ValueError(f"CONFIG {os.path.dirname(path)} is a folder without config.json")
    elif not os.path.isfile(path):
        raise ValueError(f"CONFIG {path}: no such file or folder")
    try:
        with open(path, encoding="utf-8") as f:
            cfg = json.load(f)
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as err:
        raise ValueError(f"CONFIG {path} is not a readable JSON config ({err})") from None
    if not isinstance(cfg, dict):
        raise ValueError(f"CONFIG {path} holds a JSON {type(cfg).__name__}, not an object")
    try:
        import transformers  # optional: its defaults and rope standardization
    except ImportError:
        return cfg, "json"
    version = f"transformers {transformers.__version__}"
    try:
        return transformers.AutoConfig.for_model(**cfg), version
    except Exception as err:  # noqa: BLE001 - no model_type, an unknown one, a config it refuses
        if cfg.get("model_type") not in transformers.CONFIG_MAPPING:
            return cfg, "json (transformers did not read it)"
        reason = " ".join(str(err).split()) or type(err).__name__  # its reason, on one line
        raise ValueError(
            f"CONFIG {path}: {version} refuses this {cfg['model_type']} config: {reason[:400]}"
        ) from None


def _rope(config, layer_type: str | None) -> RoPE:
    enc = from_config(config, layer_type)
    if not isinstance(enc, RoPE):
        raise ValueError(
            f"the config's encoding is {type(enc).__name__} (family {enc.family!r}): golden and "
            "conform cover 1-D RoPE only (not mrope nor NoPE layers); pick a layer with "
            "--layer-type where the config has several"
        )
    return enc


# ------------------------------------------------------------------------------ golden


@dataclasses.dataclass
class Golden:
    """float64 reference values; cos / sin include the attention factor."""

    positions: torch.Tensor  # [T] int64
    inv_freq: torch.Tensor  # [R/2] float64
    cos: torch.Tensor  # [T, R/2] float64
    sin: torch.Tensor  # [T, R/2] float64
    meta: dict
    qk: dict[str, torch.Tensor] = dataclasses.field(default_factory=dict)  # q, k, q_rot, k_rot

    @property
    def attention_factor(self) -> float:
        return float(self.meta["attention_factor"])

    @property
    def layout(self) -> str:
        return self.meta["layout"]


def rope_reference(
    config, positions: torch.Tensor, *, seq_len: int | None = None, layer_type: str | None = None
) -> tuple[torch.Tensor, dict]:
    """(inv_freq [R/2] float64, metadata) of the config's RoPE (see the module docstring)."""
    enc = _rope(config, layer_type)
    seq_len = int(positions.max()) + 1 if seq_len is None else check_int("seq_len", seq_len, low=1)
    r = enc.rotary_dim()
    inv_freq, factor = PF.rope_inv_freq(r, enc.base, enc.scaling, seq_len)
    meta = {
        "format": "posenc golden",
        "formula_version": FORMULA_VERSION,
        "posenc_version": __version__,
        "rope_parameters": getattr(enc, "hf_rope_parameters", None),
        "scaling": {**enc.scaling, "rope_type": enc.rope_type, "rope_theta": enc.base},
        "layer_type": layer_type,
        "layout": enc.layout,
        "head_dim": enc.head_dim,
        "rotary_dim": r,
        "attention_factor": factor,
        "seq_len": seq_len,
        "seq_len_read": enc.per_call,
        "dtype": "float64",
        "inv_freq": "posenc.functional.rope_inv_freq (float32, as transformers), exact in float64",
        "cos_sin": "cos(p * inv_freq) * attention_factor per rotary pair [T, R/2]; half layout: "
        "cat(c, c), interleaved: repeat_interleave(c, 2)",
    }
    return inv_freq.double(), meta


def cos_sin(
    positions: torch.Tensor, inv_freq: torch.Tensor, factor: float
) -> tuple[torch.Tensor, torch.Tensor]:
    """positions [T], inv_freq [R/2] float64 -> cos, sin [T, R/2] float64, times factor."""
    angles = positions.double()[:, None] * inv_freq.double()  # [T, R/2]
    return angles.cos() * factor, angles.sin() * factor


def rotate(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, layout: str) -> torch.Tensor:
    """x [T, H, Dh] float64 rotated by cos, sin [T, R/2]; channels past R pass through."""
    c, s = cos[:, None], sin[:, None]  # [T, 1, R/2]
    return PF.apply_rope(x.double(), cos=c, sin=s, layout=layout, engine="reference")


def golden(
    config,
    positions: torch.Tensor,
    *,
    seq_len: int | None = None,
    layer_type: str | None = None,
    qk: dict[str, torch.Tensor] | None = None,
) -> Golden:
    """The float64 cos / sin of the config's RoPE at `positions` [T] (int64), and where `qk`
    gives inputs q, k [T, H, Dh], them rotated (q_rot, k_rot) in the config's layout."""
    positions = _check_positions(positions)
    inv_freq, meta = rope_reference(config, positions, seq_len=seq_len, layer_type=layer_type)
    cos, sin = cos_sin(positions, inv_freq, meta["attention_factor"])
    out = Golden(positions, inv_freq, cos, sin, meta)
    for name in [n for n in ("q", "k") if n in (qk or {})]:
        out.qk[name] = x = _check_qk(name, qk[name], len(positions), meta["head_dim"])
        out.qk[f"{name}_rot"] = rotate(x, cos, sin, meta["layout"])
    return out


def random_qk(positions: torch.Tensor, head_dim: int, heads: int, seed: int) -> dict:
    """Standard normal float64 q, k [T, heads, Dh] from a seeded generator."""
    check_int("heads", heads, low=1)
    if len(positions) * heads * head_dim > MAX_VALUES:
        raise ValueError(
            f"q / k of {len(positions)} positions x {heads} heads x {head_dim} "
            f"values is over {MAX_VALUES}; give fewer positions or heads"
        )
    gen = torch.Generator().manual_seed(check_int("seed", seed, low=0))
    shape = (len(positions), heads, head_dim)
    return {n: torch.randn(shape, generator=gen, dtype=torch.float64) for n in ("q", "k")}


def _check_positions(positions) -> torch.Tensor:
    if not isinstance(positions, torch.Tensor) or positions.dim() != 1:
        got = getattr(positions, "shape", positions)
        raise ValueError(f"positions must be a 1-D tensor [T], got {got}")
    if positions.is_floating_point() or positions.is_complex() or positions.dtype == torch.bool:
        raise TypeError(f"positions must be integers, got {positions.dtype}")
    positions = positions.long()
    if positions.numel() == 0:
        raise ValueError("positions must hold at least one position")
    if int(positions.min()) < 0 or int(positions.max()) >= MAX_POSITION:
        raise ValueError(
            f"positions must be in 0..2^31 - 1, got {int(positions.min())}..{int(positions.max())}"
        )
    return positions


def _check_qk(name: str, x, t: int, head_dim: int) -> torch.Tensor:
    if not isinstance(x, torch.Tensor) or not x.is_floating_point():
        raise TypeError(f"{name} must be a floating-point tensor, got {getattr(x, 'dtype', x)!r}")
    if x.dim() == 2:
        x = x[:, None]  # [T, Dh] -> [T, 1, Dh]
    if x.dim() != 3 or x.shape[0] != t or x.shape[-1] != head_dim:
        raise ValueError(
            f"{name} must be [T, H, Dh] = [{t}, H, {head_dim}] (or [T, Dh]), got {tuple(x.shape)}"
        )
    return x.double()


# ------------------------------------------------------------------------------ files


def write_golden(g: Golden, path) -> None:
    """Write g to `path`: .npz (numpy) or .safetensors (the safetensors package)."""
    tensors = {"positions": g.positions, "inv_freq": g.inv_freq, "cos": g.cos, "sin": g.sin}
    tensors.update(g.qk)
    meta = json.dumps(g.meta)
    if file_suffix(path, (".npz", ".safetensors"), "--out") == ".safetensors":
        save_file = _optional("safetensors.torch", ".safetensors").save_file
        save_file({k: v.contiguous() for k, v in tensors.items()}, path, metadata={"posenc": meta})
        return
    np = _optional("numpy", ".npz")
    with open(path, "wb") as f:
        np.savez(f, metadata=np.array(meta), **{k: v.numpy() for k, v in tensors.items()})


def read_golden(path) -> Golden:
    """A file write_golden wrote; ValueError naming it for anything else."""
    file_suffix(path, (".npz", ".safetensors"), "--golden")
    tensors, meta = _read_tensors(path, "--golden")
    need = ("positions", "inv_freq", "cos", "sin")
    if meta is None or any(k not in tensors for k in need):
        raise ValueError(f"--golden {path} is not a posenc golden file (written by posenc golden)")
    if meta.get("formula_version") != FORMULA_VERSION:
        raise ValueError(
            f"--golden {path} has formula version {meta.get('formula_version')}; "
            f"this posenc reads {FORMULA_VERSION}: write it again"
        )
    t = {k: v.double() for k, v in tensors.items()}
    qk = {k: t[k] for k in ("q", "k", "q_rot", "k_rot") if k in t}
    return Golden(tensors["positions"].long(), t["inv_freq"], t["cos"], t["sin"], meta, qk)


def read_dump(path) -> dict[str, torch.Tensor]:
    """The tensors of an engine's dump: .npz, .safetensors (dtypes kept, bfloat16 too) or a
    torch file (weights only) of a dict of tensors or a (cos, sin) pair."""
    return _read_tensors(path, "DUMP")[0]


def _optional(module: str, suffix: str):
    try:
        return __import__(module, fromlist=["_"])
    except ImportError:
        raise ValueError(
            f"{suffix} files need the {module.split('.')[0]} package "
            f"(pip install {module.split('.')[0]})"
        ) from None


def _read_tensors(path, what: str) -> tuple[dict[str, torch.Tensor], dict | None]:
    path = os.fspath(path)
    suffix = file_suffix(path, DUMP_SUFFIXES, what)
    if not os.path.isfile(path):
        raise ValueError(f"{what} {path}: no such file")
    meta = None
    try:
        if suffix == ".npz":
            np = _optional("numpy", ".npz")
            with np.load(path, allow_pickle=False) as npz:
                arrays = {k: npz[k] for k in npz.files}
            if "metadata" in arrays and arrays["metadata"].dtype.kind == "U":
                meta = json.loads(str(arrays.pop("metadata")))
            tensors = {k: torch.from_numpy(v.copy()) for k, v in arrays.items()}
        elif suffix == ".safetensors":
            safe_open = _optional("safetensors", ".safetensors").safe_open
            with safe_open(path, framework="pt") as f:
                tensors = {k: f.get_tensor(k) for k in f.keys()}  # noqa: SIM118 - safe_open has no __iter__
                meta = (f.metadata() or {}).get("posenc")
            meta = json.loads(meta) if meta else None
        else:
            tensors = torch.load(path, map_location="cpu", weights_only=True)
            if isinstance(tensors, list | tuple) and len(tensors) == 2:
                tensors = {"cos": tensors[0], "sin": tensors[1]}  # a rotary module's (cos, sin)
            if not isinstance(tensors, dict):
                raise ValueError(
                    f"{what} {path} holds a {type(tensors).__name__}; save a dict "
                    "{'cos': ..., 'sin': ...} (or q_rot / k_rot) or a (cos, sin) pair"
                )
    except ValueError as err:
        if str(err).startswith(what):
            raise
        raise ValueError(f"{what} {path} is not a readable {suffix} file ({err})") from None
    except Exception as err:  # noqa: BLE001 - truncated, corrupt, another format
        raise ValueError(
            f"{what} {path} is not a readable {suffix} file ({type(err).__name__})"
        ) from None
    bad = [k for k, v in tensors.items() if not isinstance(v, torch.Tensor)]
    if bad:
        raise ValueError(f"{what} {path}: {bad[0]!r} is not a tensor")
    return tensors, meta


# ------------------------------------------------------------------------------ conform


def budget(
    positions: torch.Tensor, inv_freq: torch.Tensor, store: torch.dtype, compute: torch.dtype
) -> torch.Tensor:
    """[T] positions, [P] inverse frequencies (float64) -> [T, P] the budget with af = r = 1
    (the module docstring's rule)."""
    eps_s, eps_c = torch.finfo(store).eps, torch.finfo(compute).eps
    eps_f = max(eps_c, FREQ_EPS)  # the golden frequencies are float32's: no engine is closer
    w = inv_freq.double()
    ln = torch.where(w > 0, w, 1.0).log().abs()
    slope = w * (eps_f * (3 + ln) + 2 * eps_c) / 2  # [P]
    return (eps_s + 2 * eps_c) + positions.double()[:, None] * slope


@dataclasses.dataclass
class Band:
    lo: int
    hi: int | None  # None: open
    count: int
    max_err: float
    budget_at_max: float  # the budget of the value with the largest error
    worst: float  # the largest err / budget in the band

    @property
    def ok(self) -> bool:
        return self.worst <= 1.0

    def label(self) -> str:
        hi = "inf" if self.hi is None else _short(self.hi)
        return f"[{_short(self.lo)}, {hi})"


@dataclasses.dataclass
class Conformance:
    bands: list[Band]
    header: list[str]
    notes: list[str]

    @property
    def ok(self) -> bool:
        return all(b.ok for b in self.bands)

    def lines(self) -> list[str]:
        rows = [f"{'band':<16} {'positions':>9}  {'max|err|':>9}  {'budget there':>12}  err/budget"]
        rows += [
            f"{b.label():<16} {b.count:>9}  {b.max_err:>9.2e}  {b.budget_at_max:>12.2e}  "
            f"{b.worst:>10.3g}  {'ok' if b.ok else 'OVER'}"
            for b in self.bands
        ]
        over = [b for b in self.bands if not b.ok]
        end = f"within budget in all {len(self.bands)} bands"
        if over:
            end = f"over budget in {len(over)} of {len(self.bands)} bands, from {over[0].label()}"
        return [*self.header, *rows, end, *self.notes]


def _short(n: int) -> str:
    """2048 -> 2k, 2097152 -> 2M."""
    if n and n % 2**20 == 0:
        return f"{n >> 20}M"
    return f"{n >> 10}k" if n and n % 1024 == 0 else str(n)


def _dump_kind(tensors: dict, path) -> dict[str, torch.Tensor]:
    """{'cos': .., 'sin': ..} or {'q_rot': .., 'k_rot': ..} (one or both) of a dump."""
    cos, sin = (tensors.get(k, tensors.get(f"{k}_cached")) for k in ("cos", "sin"))
    if cos is None and sin is None and "cos_sin_cache" in tensors:  # vLLM: cat(cos, sin)
        cos, sin = tensors["cos_sin_cache"].chunk(2, dim=-1)
    if cos is not None and sin is not None:
        return {"cos": cos, "sin": sin}
    rotated = {k: tensors[k] for k in ("q_rot", "k_rot") if k in tensors}
    if rotated:
        return rotated
    raise ValueError(
        f"DUMP {path} holds {sorted(tensors) or 'nothing'}; conform reads cos and "
        "sin (or cos_cached / sin_cached, vLLM's cos_sin_cache), or q_rot / k_rot "
        "with their inputs q / k"
    )


def _squeeze(x: torch.Tensor, dims: int) -> torch.Tensor:
    while x.dim() > dims and x.shape[0] == 1:
        x = x[0]
    return x


def _pair_index(layout: str, r: int) -> torch.Tensor:
    """The rotary pair of each channel of a [.., R] cache (R/2 wide for 'pairs')."""
    j = torch.arange(r if layout != "pairs" else r // 2)
    return {"half": j % (r // 2), "interleaved": j // 2, "pairs": j}[layout]


class _Rows:
    """Per position: the largest error, the budget of that value, the largest err / budget."""

    def __init__(self, t: int) -> None:
        self.err = torch.zeros(t, dtype=torch.float64)
        self.at = torch.zeros(t, dtype=torch.float64)
        self.worst = torch.zeros(t, dtype=torch.float64)

    def add(self, rows: slice, got: torch.Tensor, want: torch.Tensor, bud: torch.Tensor):
        """got, want, bud [c, N] for the positions `rows`; NaN or inf in got is over any budget."""
        err = (got.double() - want).abs().flatten(1)
        err = torch.where(err.isfinite(), err, torch.inf)
        bud = bud.flatten(1)
        top, col = err.max(-1)
        ratio = (err / bud.clamp_min(1e-300)).max(-1).values
        better = top > self.err[rows]
        self.at[rows] = torch.where(better, bud.gather(-1, col[:, None])[:, 0], self.at[rows])
        self.err[rows] = torch.maximum(self.err[rows], top)
        self.worst[rows] = torch.maximum(self.worst[rows], ratio)

    def bands(self, positions: torch.Tensor, edges: tuple[int, ...]) -> list[Band]:
        out = []
        for k, lo in enumerate(edges):
            hi = edges[k + 1] if k + 1 < len(edges) else None
            mask = (positions >= lo) & (positions < hi if hi is not None else True)
            if not mask.any():
                continue
            err = self.err[mask]
            i = int(err.argmax())
            at, worst = float(self.at[mask][i]), float(self.worst[mask].max())
            out.append(Band(lo, hi, int(mask.sum()), float(err[i]), at, worst))
        return out


def conform(
    config,
    dump: dict[str, torch.Tensor],
    *,
    path: str = "DUMP",
    golden_file: Golden | None = None,
    positions: torch.Tensor | None = None,
    dtype: torch.dtype | None = None,
    compute_dtype: torch.dtype | None = None,
    layout: str | None = None,
    attention_factor: str = "included",
    bands: tuple[int, ...] = BAND_EDGES,
    seq_len: int | None = None,
    layer_type: str | None = None,
) -> Conformance:
    """Judge an engine's dump (read_dump) against the golden values of `config` (computed, or
    golden_file's), band by band, each value against its budget. The dump: cos / sin [T, R/2]
    or [T, R] (half / interleaved: `layout`, else detected), or q_rot / k_rot [T, H, Dh] with
    inputs q / k in the dump or golden_file (docs/hf/golden.md says every form and default).
    """
    if attention_factor not in ("included", "excluded"):
        raise ValueError(f"attention_factor must be included or excluded, got {attention_factor!r}")
    if layout not in (None, "half", "interleaved", "pairs"):
        raise ValueError(f"--layout must be half, interleaved or pairs, got {layout!r}")
    parts = _dump_kind(dump, path)
    first = next(iter(parts.values()))
    if not first.is_floating_point() or any(v.dtype != first.dtype for v in parts.values()):
        raise ValueError(
            f"DUMP {path}: {', '.join(parts)} must be floating point, of one dtype; "
            f"got {', '.join(str(v.dtype) for v in parts.values())}"
        )
    store = dtype or first.dtype
    compute = compute_dtype or (torch.float32 if torch.finfo(store).bits == 16 else store)
    qk_mode = "cos" not in parts
    inputs = _inputs(dump, golden_file, path) if qk_mode else {}
    if qk_mode:
        t = next(iter(inputs.values())).shape[0]
    else:
        t = _squeeze(first, 2).shape[0] if first.dim() else 0
    if t == 0:
        raise ValueError(f"DUMP {path} holds 0 positions ({', '.join(parts)} of shape "
                         f"{list(first.shape)}): nothing to judge")  # fmt: skip
    pos = _dump_positions(dump, positions, golden_file, t, path)
    if golden_file is not None:
        ref_freq, meta = golden_file.inv_freq, golden_file.meta
        seq_len = meta["seq_len"] if seq_len is None else seq_len
        mine = rope_reference(config, pos, seq_len=seq_len, layer_type=layer_type)[1]
        for key in ("scaling", "layout", "head_dim", "rotary_dim", "seq_len"):
            if meta.get(key) != mine.get(key) and (key != "seq_len" or meta.get("seq_len_read")):
                raise ValueError(
                    f"--golden was written for {key} {meta.get(key)}, the config "
                    f"gives {mine.get(key)}: write it again from this config"
                )
    else:
        ref_freq, meta = rope_reference(config, pos, seq_len=seq_len, layer_type=layer_type)
    af = meta["attention_factor"] if attention_factor == "included" else 1.0
    r = meta["rotary_dim"]
    what = "rotated q / k" if qk_mode else "cos / sin cache"
    names = [str(d).removeprefix("torch.") for d in (store, compute)]
    header = [
        f"posenc conform: {path}: {what} {list(first.shape)}, budget of {names[0]} stored, "
        f"{names[1]} computed; attention factor {meta['attention_factor']:g} "
        f"{attention_factor}",
        f"golden: {'file' if golden_file is not None else 'on the fly'}, rope_type "
        f"{meta['scaling']['rope_type']}, R={r}, seq_len {meta['seq_len']}, posenc "
        f"{meta['posenc_version']}, formula {meta['formula_version']}",
    ]
    if torch.finfo(compute).eps < FREQ_EPS:
        header[0] += " (frequencies within float32's rounding: the golden ones are float32)"
    if qk_mode:
        for name in parts:
            if name[0] not in inputs:
                raise ValueError(f"DUMP {path} holds {name} but no input {name[0]} to rotate")
        got = {k: _qk_shape(v, inputs[k[0]].shape, path, k) for k, v in parts.items()}
        # q / k pair channels as the model does: the config's layout, not detected
        layouts, how = [layout or meta["layout"]], "given" if layout else "the config's"
    else:
        got = {k: _squeeze(v, 2) for k, v in parts.items()}
        width = got["cos"].shape[-1] if got["cos"].dim() == 2 else None
        fits = got["cos"].shape == got["sin"].shape and width in (r, r // 2)
        if not fits:
            raise ValueError(
                f"DUMP {path}: cos / sin of shapes {list(parts['cos'].shape)}, "
                f"{list(parts['sin'].shape)} fit neither [T, R] = [{t}, {r}] (half "
                f"or interleaved) nor [T, R/2] = [{t}, {r // 2}] (per pair), R the "
                "config's rotary dim"
            )
        # a cache's layout is how it is stored: detected (the one that fits better)
        layouts, how = (["half", "interleaved"], "detected") if width == r else (["pairs"], "")
        if layout is not None and layout != "pairs" and width == r:
            layouts, how = [layout], "given"
        elif layout is not None and layout not in layouts:
            raise ValueError(f"--layout {layout}: the cache is {width} wide, R = {r}")

    def judge(lay: str, factor: float) -> _Rows:
        return _judge(got, inputs, pos, ref_freq, factor, lay, r, store, compute, golden_file)

    results = {lay: judge(lay, af) for lay in layouts}
    used = min(results, key=lambda lay: float(results[lay].worst.max()))
    header[0] += f"; layout {used}" + (f" ({how})" if how else " (one column per pair)")
    out = Conformance(results[used].bands(pos, bands), header, [])
    if not out.ok:  # say what would fit: the other layout of q / k, the other attention factor
        other_af = 1.0 if attention_factor == "included" else meta["attention_factor"]
        other = "interleaved" if used == "half" else "half"
        tries = [(other, af, f"in the {other} layout")] if qk_mode else []
        if other_af != af:
            flip = "excluded" if attention_factor == "included" else "included"
            tries.append((used, other_af, f"with the attention factor {flip}"))
        for lay, factor, words in tries:
            if lay != "pairs" and float(judge(lay, factor).worst.max()) <= 1.0:
                out.notes.append(f"note: the dump is within budget {words}")
    return out


def _dump_positions(dump, positions, golden_file, t: int, path) -> torch.Tensor:
    if "positions" in dump:
        pos, where = _squeeze(dump["positions"], 1), f"DUMP {path}'s positions"
    elif positions is not None:
        pos, where = positions, "--positions"
    elif golden_file is not None:
        pos, where = golden_file.positions, "--golden's positions"
    else:
        return torch.arange(t)
    pos = _check_positions(pos)
    if len(pos) != t:
        raise ValueError(f"{where} hold {len(pos)} positions, the dump {t}")
    if golden_file is not None and not torch.equal(pos, golden_file.positions):
        raise ValueError(
            f"{where} differ from --golden's positions: write the golden file at "
            "the dump's positions"
        )
    return pos


def _inputs(dump, golden_file, path) -> dict[str, torch.Tensor]:
    for source in (dump, golden_file.qk if golden_file is not None else {}):
        if "q" in source or "k" in source:
            return {k: _squeeze(v, 3).double() for k, v in source.items() if k in ("q", "k")}
    raise ValueError(
        f"DUMP {path} holds rotated q / k but no inputs: give --golden FILE written "
        "with --q-k (its q, k are the inputs) or put q and k in the dump"
    )


def _qk_shape(x: torch.Tensor, want: tuple, path, name: str) -> torch.Tensor:
    """A dump's q_rot / k_rot as [T, H, Dh]: that, [T, H * Dh] or [(1,) H, T, Dh]."""
    t, h, dh = want
    x = _squeeze(x, 3)
    if tuple(x.shape) == (t, h, dh):
        return x
    if tuple(x.shape) == (h, t, dh):
        return x.transpose(0, 1)
    if tuple(x.shape) in ((t, h * dh), (t, dh)) and x.numel() == t * h * dh:
        return x.reshape(t, h, dh)
    raise ValueError(
        f"DUMP {path}: {name} of shape {list(x.shape)} fits neither [T, H, Dh] = "
        f"{[t, h, dh]}, [T, H * Dh] nor [H, T, Dh] of its input"
    )


def _judge(got, inputs, pos, freq, af, layout, r, store, compute, golden_file) -> _Rows:
    """Per position, the dump's largest errors against the golden values and their budgets:
    `got` a cos / sin cache, or q_rot / k_rot that rotate `inputs` (q, k [T, H, Dh])."""
    rows, idx = _Rows(len(pos)), _pair_index(layout, r)  # idx [R]: the pair of each channel
    for lo in range(0, len(pos), ROWS):
        sl = slice(lo, lo + ROWS)
        if golden_file is None:
            ref = dict(zip(("cos", "sin"), cos_sin(pos[sl], freq, af)))
        else:  # stored with the attention factor
            scale = af / golden_file.attention_factor
            ref = {"cos": golden_file.cos[sl] * scale, "sin": golden_file.sin[sl] * scale}
        cache = budget(pos[sl], freq[idx], store, compute) * af if "cos" in got else None
        for name, out in got.items():
            if name in ref:
                rows.add(sl, out[sl], spread(ref[name], layout), cache)
                continue
            xs = inputs[name[0]][sl]  # [c, H, Dh]
            a = xs[..., : r // 2] if layout == "half" else xs[..., 0:r:2]
            b = xs[..., r // 2 : r] if layout == "half" else xs[..., 1:r:2]
            bud = torch.empty_like(xs)
            pair = budget(pos[sl], freq, store, compute)[:, None]  # [c, 1, R/2]
            bud[..., :r] = 2 * af * (torch.hypot(a, b) * pair)[..., idx]  # |(a, b)| [c, H, R/2]
            rest = budget(pos[sl], torch.zeros(1), store, compute)[:, None]  # w = 0, af = 1
            bud[..., r:] = 2 * xs[..., r:].abs() * rest
            rows.add(sl, out[sl], rotate(xs, ref["cos"], ref["sin"], layout), bud)
    return rows
