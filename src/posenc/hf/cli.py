"""`posenc golden CONFIG --positions 0:131072` and `posenc conform CONFIG DUMP`: the float64
reference of a config's RoPE written to a file, and an engine's dump judged against it by
position band (posenc.hf.golden); conform exits 0 within budget, 1 over it, 2 for bad input."""

from __future__ import annotations

import os

from posenc.cliargs import OneLineParser, check_out_file, checked, file_suffix, in_file, integer

DTYPES = ("float64", "float32", "float16", "bfloat16")  # posenc.hf.golden.DTYPES' names


def _golden():
    """posenc.hf.golden (torch), imported once a flag's value is checked or the command runs."""
    from posenc.hf import golden

    return golden


# the flags' values, checked as they are parsed (posenc.cliargs): before anything is read or written
POSITIONS = checked(
    lambda t: _golden().parse_positions(t),
    ("5:3", "a:b", "-4", "0:4,2147483648", "0:4:0"),
    "positions",
)
BANDS = checked(lambda t: _golden().parse_bands(t), ("5,3", "a", "-1,4"), "band edges")


def _out(text: str) -> str:
    """--out: a .npz / .safetensors file that can be written and, if it exists, is one."""
    suffix = file_suffix(text, (".npz", ".safetensors"), "--out")
    check_out_file(text, "--out", suffix[1:])
    return suffix


def _seed_or_file(text: str) -> str:
    if not text.strip().isdigit() and not os.path.isfile(text):
        raise ValueError(f"must be a seed (an int >= 0) or a file with q and k, got {text!r}")
    return text


def _layer_type(text: str) -> str:
    if not text.replace("_", "").replace("-", "").isalnum():
        raise ValueError(f"must be a layer type name (full_attention, ...) or nope, got {text!r}")
    return text


def _golden_file(text: str) -> str:
    in_file(text)
    return file_suffix(text, (".npz", ".safetensors"), "--golden")


HELP = {
    "golden": "write the float64 RoPE cos/sin (and rotated q/k) of a transformers config",
    "conform": "judge an engine's RoPE cache or rotated q/k against the float64 golden values",
}


def _parser(command: str) -> OneLineParser:
    parser = OneLineParser(prog=f"posenc {command}", description=HELP[command])
    parser.add_argument("config", help="a transformers config.json, or a model folder with one")
    return parser


def golden_parser() -> OneLineParser:
    parser = _parser("golden")
    parser.add_argument(
        "--positions",
        required=True,
        type=POSITIONS,
        help="A:B (end exclusive), A:B:S, N, comma separated: 0:4096, 0,1,2,131071, 0:1000000:997",
    )
    parser.add_argument(
        "--out",
        default="golden.npz",
        type=checked(
            _out, ("g.txt", "AFILE/g.npz", "missing_x1/g.npz", ".", "AFILE.npz"), "a .npz file"
        ),
        help="the file: .npz (numpy) or .safetensors (default golden.npz)",
    )
    parser.add_argument(
        "--q-k",
        dest="qk",
        metavar="SEED|FILE",
        type=checked(_seed_or_file, ("x.pt", "-1", "1.5"), "a seed or a file"),
        help="also rotate q, k [T, H, Dh]: standard normal from this seed, or "
        "read from a .npz / .safetensors / .pt file holding q and k",
    )
    parser.add_argument(
        "--heads", type=integer(1), default=1, help="heads of seeded q, k (default 1)"
    )
    add_common(parser)
    return parser


def conform_parser() -> OneLineParser:
    parser = _parser("conform")
    parser.add_argument(
        "dump",
        help="the engine's cos/sin cache or q_rot/k_rot: .npz, "
        ".safetensors or .pt (a dict of tensors, or a (cos, sin) pair)",
    )
    parser.add_argument(
        "--golden",
        type=checked(_golden_file, ("missing_x1.npz", "AFILE", "."), "a golden file"),
        help="read the golden values from this posenc golden file (default: computed on the fly)",
    )
    parser.add_argument(
        "--dtype", choices=DTYPES, help="the dtype the dump was stored in (default: its tensors')"
    )
    parser.add_argument(
        "--compute-dtype",
        choices=DTYPES,
        help="the dtype the engine computed the angles in (default float32 for "
        "16-bit dumps, else the stored dtype)",
    )
    parser.add_argument(
        "--positions",
        type=POSITIONS,
        help="the dump's positions, as for golden (default: its "
        "'positions' tensor, else --golden's, else 0..T-1)",
    )
    parser.add_argument(
        "--bands",
        type=BANDS,
        help="band edges, increasing: 0,2048,8192 (default: 2k, then powers of 4)",
    )
    parser.add_argument(
        "--layout",
        choices=("half", "interleaved", "pairs"),
        help="the dump's layout (default: detected for a cache, the config's for q/k)",
    )
    parser.add_argument(
        "--attention-factor",
        choices=("included", "excluded"),
        default="included",
        help="whether the dump's cos/sin carry the "
        "attention factor (yarn, longrope; default included, as transformers)",
    )
    add_common(parser)
    return parser


def add_common(parser: OneLineParser) -> None:
    parser.add_argument(
        "--seq-len",
        type=integer(1),
        help="the sequence length dynamic, dynamic_yarn "
        "and longrope compute for (default: the largest position + 1)",
    )
    parser.add_argument(
        "--layer-type",
        type=checked(_layer_type, ("nope_type1", "a b"), "a layer type"),  # checked on the config
        help="the layer type of a config with rope parameters "
        "per layer type (Gemma 3: full_attention), or nope",
    )


def main_golden(argv: list[str]) -> int:
    args = golden_parser().parse_args(argv)
    G = _golden()
    positions = G.parse_positions(args.positions)
    config, reader = G.read_config(args.config)
    head_dim = _rope(config, args.layer_type).head_dim
    qk = None if args.qk is None else _qk_inputs(args.qk, positions, head_dim, args.heads)
    g = G.golden(config, positions, seq_len=args.seq_len, layer_type=args.layer_type, qk=qk)
    g.meta["config"] = os.path.basename(os.path.abspath(args.config))
    g.meta["config_reader"] = reader
    G.write_golden(g, args.out)
    m = g.meta
    extra = f", q/k {list(g.qk['q'].shape)}" if g.qk else ""
    print(
        f"posenc golden: wrote {args.out}: cos/sin [{len(positions)}, {m['rotary_dim'] // 2}] "
        f"float64 at positions {int(positions.min())}..{int(positions.max())}{extra}; "
        f"rope_type {m['scaling']['rope_type']}, layout {m['layout']}, R={m['rotary_dim']}, "
        f"attention factor {m['attention_factor']:g}, seq_len {m['seq_len']} "
        f"(config read by {reader})"
    )
    return 0


def _rope(config, layer_type: str | None):
    """The config's RoPE (--layer-type checked against the config), before anything is
    computed or written."""
    try:
        return _golden()._rope(config, layer_type)
    except (ValueError, TypeError) as err:
        if layer_type is None:
            raise
        raise ValueError(f"--layer-type {layer_type}: {err}") from None


def _qk_inputs(value: str, positions, head_dim: int, heads: int) -> dict:
    """--q-k: a seed (an int >= 0) or a file holding q and k (checked by _seed_or_file)."""
    G = _golden()
    if value.strip().isdigit():
        return G.random_qk(positions, head_dim, heads, int(value))
    tensors = G.read_dump(value)
    if "q" not in tensors or "k" not in tensors:
        raise ValueError(f"--q-k {value} holds {sorted(tensors)}; it needs q and k [T, H, Dh]")
    return {"q": tensors["q"], "k": tensors["k"]}


def main_conform(argv: list[str]) -> int:
    args = conform_parser().parse_args(argv)
    G = _golden()
    kw = {k: getattr(args, k) for k in ("layout", "attention_factor", "seq_len", "layer_type")}
    kw |= {k: G.DTYPES[v] for k in ("dtype", "compute_dtype") if (v := getattr(args, k))}
    kw["positions"] = G.parse_positions(args.positions) if args.positions else None
    kw["bands"] = G.parse_bands(args.bands)
    kw["golden_file"] = G.read_golden(args.golden) if args.golden else None
    dump = G.read_dump(args.dump)
    config, _ = G.read_config(args.config)
    if args.layer_type is not None:
        _rope(config, args.layer_type)
    result = G.conform(config, dump, path=args.dump, **kw)
    print("\n".join(result.lines()))
    return 0 if result.ok else 1
