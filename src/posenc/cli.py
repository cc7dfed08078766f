"""The `posenc` command: list, show, explain, arena, stretch, bench, golden, conform. Each
subcommand is a module's `main(argv) -> int`, imported only when it runs; bad input prints one
line, no traceback (POSENC_DEBUG=1 shows it)."""

from __future__ import annotations

import importlib
import os
import sqlite3
import sys

# name -> (module with main(argv), one line of help)
COMMANDS: dict[str, tuple[str, str]] = {
    "list": ("posenc.cli", "list the encodings: name, family, one line, paper"),
    "show": ("posenc.cli", "print an encoding's table (or head 0's bias matrix) to 4 decimals"),
    "explain": ("posenc.explain.cli", "draw and measure what an encoding does (HTML page)"),
    "arena": ("posenc.arena.cli", "train small models per encoding, measure length generalization"),
    "stretch": ("posenc.stretch.cli", "a real model's context, stretched by each RoPE scaling"),
    "bench": ("posenc.bench", "speed and memory side by side with other libraries"),
    "golden": ("posenc.hf.cli", "write the float64 RoPE cos/sin of a transformers config"),
    "conform": ("posenc.hf.cli", "judge an engine's RoPE cache / rotated q,k against golden"),
}


BAD_INPUT = (ValueError, TypeError, FileNotFoundError, PermissionError, IsADirectoryError)
LAB_DEPENDENCIES = ("numpy", "matplotlib", "tqdm")  # pyproject's `lab` extra
# the encodings' families, torch-free for `posenc list --help` (tests/test_cli.py checks them
# against posenc.ENCODINGS)
FAMILIES = ("absolute", "bias", "content", "none", "relative", "rotary")


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] in ("-h", "--help"):
        print("usage: posenc COMMAND [options]\n\ncommands:")
        for name, (_, line) in COMMANDS.items():
            print(f"  {name:<9} {line}")
        print("\n`posenc COMMAND --help` for a command's options.")
        return 0
    if argv[0] in ("-V", "--version"):
        from posenc import __version__

        print(f"posenc {__version__}")
        return 0
    name, rest = argv[0], argv[1:]
    if name not in COMMANDS:
        import difflib  # not posenc.checks: an unknown command imports no torch

        close = difflib.get_close_matches(name, list(COMMANDS), n=3, cutoff=0.4)
        hint = f" (did you mean {', '.join(close)}?)" if close else ""
        print(f"posenc: error: unknown command {name!r}{hint}", file=sys.stderr)
        return 2
    try:
        module = importlib.import_module(COMMANDS[name][0])
        entry = getattr(module, f"main_{name}", None) or module.main
        return int(entry(rest) or 0)
    except SystemExit as exit_:  # argparse: --help (0), a flag refused as it was parsed (2)
        return int(exit_.code or 0)
    except ModuleNotFoundError as err:  # the lab's dependencies: pip install posenc[lab]
        if err.name not in LAB_DEPENDENCIES or os.environ.get("POSENC_DEBUG"):
            raise
        print(f"posenc {name}: error: needs {err.name}: pip install 'posenc[lab]'",
              file=sys.stderr)  # fmt: skip
        return 2
    except (*BAD_INPUT, sqlite3.Error) as err:  # one line, no traceback
        if os.environ.get("POSENC_DEBUG"):
            raise
        db = isinstance(err, sqlite3.Error)  # the results database changed under a run: exit 1
        print(f"posenc {name}: error: {'the results database: ' * db}{err}", file=sys.stderr)
        return 1 if db else 2
    except KeyboardInterrupt:
        print(f"posenc {name}: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # the reader went away (`posenc list | head`): stop quietly
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1


# ------------------------------------------------------------------------------ list / show


def parsers() -> dict:
    """Every command's argument parser, by the words that start it ("arena report" too):
    what the tests walk to check every flag of every command alike."""
    from posenc.arena.cli import parser as arena
    from posenc.arena.cli import report_parser
    from posenc.bench.cli import parser as bench
    from posenc.explain.cli import parser as explain
    from posenc.hf.cli import conform_parser, golden_parser
    from posenc.stretch.cli import parser as stretch
    from posenc.stretch.cli import report_parser as stretch_report
    from posenc.stretch.cli import settings_parser

    return {"list": list_parser(), "show": show_parser(), "explain": explain(),
            "arena": arena(), "arena report": report_parser(), "bench": bench(),
            "stretch": stretch(), "stretch report": stretch_report(),
            "stretch settings": settings_parser(),
            "golden": golden_parser(), "conform": conform_parser()}  # fmt: skip


def list_parser():
    from posenc.cliargs import OneLineParser

    parser = OneLineParser(prog="posenc list", description=COMMANDS["list"][1])
    parser.add_argument("--family", choices=FAMILIES, help="only this family")
    return parser


def main_list(argv: list[str]) -> int:
    args = list_parser().parse_args(argv)  # --help answers before torch is imported
    import posenc

    rows = [
        (name, cls.family, cls.summary, cls.paper)
        for name, cls in sorted(posenc.ENCODINGS.items(), key=lambda kv: (kv[1].family, kv[0]))
        if args.family is None or cls.family == args.family
    ]
    widths = [max(len(r[i]) for r in rows + [("name", "family", "", "")]) for i in range(2)]
    print(f"{'name':<{widths[0]}}  {'family':<{widths[1]}}  summary  [paper]")
    for name, family, summary, paper in rows:
        print(f"{name:<{widths[0]}}  {family:<{widths[1]}}  {summary}  [{paper}]")
    return 0


def parse_span(text: str) -> tuple[int, int]:
    """'A:B' -> (A, B) with 0 <= A < B (B exclusive); 'N' -> (0, N)."""
    try:
        if ":" in text:
            a, b = (int(s) for s in text.split(":", 1))
        else:
            a, b = 0, int(text)
    except ValueError:
        raise ValueError(f"--positions must look like A:B with integers, got {text!r}") from None
    if a < 0 or b <= a:
        raise ValueError(f"--positions A:B needs 0 <= A < B, got {text!r}")
    return a, b


def show_parser():
    from posenc.cliargs import OneLineParser, checked, integer

    parser = OneLineParser(prog="posenc show", description=COMMANDS["show"][1])
    parser.add_argument("name", help="encoding name (see `posenc list`)")
    parser.add_argument("--dim", type=integer(1), default=8, help="model width / head dim (8)")
    parser.add_argument("--positions", default="0:8", help="A:B, end exclusive (default 0:8)",
                        type=checked(parse_span, ("3:1", "a:b", "-1:4"), "A:B"))  # fmt: skip
    parser.add_argument("--heads", type=integer(1), default=1, help="attention heads (default 1)")
    parser.add_argument("--head", type=integer(0), default=0, help="which head's bias to print")
    return parser


def main_show(argv: list[str]) -> int:
    args = show_parser().parse_args(argv)  # --help answers before torch is imported
    import torch

    import posenc

    a, b = parse_span(args.positions)
    cls = posenc.resolve(args.name)
    check_show_size(cls, a, b, args)
    torch.manual_seed(0)
    enc = posenc.build(  # b >= 1: parse_span has checked 0 <= a < b
        args.name, dim=args.dim, heads=args.heads, head_dim=args.dim, max_len=b, train_len=b
    ).eval()
    if "embed" in enc.provides:
        check_show_size(cls, a, b, args, enc.embed_dim(args.dim))
    pos = torch.arange(a, b)
    torch.set_printoptions(precision=4, sci_mode=False, linewidth=160)
    with torch.no_grad():
        table, what = show_table(enc, pos, args)
    print(f"{cls.__name__} ({cls.family}; {cls.paper}) - {what}")
    if table is None:
        print("(no positional signal: this encoding adds nothing)")
        return 0
    label_w = max(len(str(b - 1)), 3)
    for row_pos, row in zip(pos.tolist(), table.tolist()):
        print(f"{row_pos:>{label_w}}  " + " ".join(f"{v:8.4f}" for v in row))
    return 0


SHOW_LIMIT = 10**7  # numbers `posenc show` builds at most (a terminal's worth is far fewer)


def check_show_size(cls, a: int, b: int, args, width: int | None = None) -> None:
    """ValueError naming the flags unless what `posenc show` builds stays under SHOW_LIMIT
    numbers: before building, a learned table of b rows (the max_len it is built with) and a
    bias matrix H x T x T; once built (`width`), an absolute table T x embed_dim(D)."""
    T, D, H = b - a, args.dim, args.heads
    size = max(b * D, T * (width or 0), H * T * T if "embed" not in cls.provides else 0)
    if size > SHOW_LIMIT:
        raise ValueError(
            f"--positions {a}:{b} with --dim {D} --heads {H}: the table would hold ~{size:.2g} "
            f"numbers, over posenc show's limit of {SHOW_LIMIT:.0e}; give a shorter --positions"
        )


def show_table(enc, pos, args):
    """The matrix `posenc show` prints, and a line saying what it is."""
    import torch

    T, D, H = len(pos), args.dim, args.heads
    if enc.position_dims > 1:
        pos = torch.stack([pos] * enc.position_dims, dim=-1)
    if "embed" in enc.provides:
        x = torch.zeros(1, T, D, dtype=torch.float64)  # float64: cos(0.01) = 0.99995 -> 1.0000
        table = enc.embed(x, pos)[0]  # [T, embed_dim(D)]: concatenating encodings are wider
        W = table.shape[-1]
        what = f"rows: positions, columns: the {W} dims"
        if W != D:
            what += f" ({D} token dims, zero here, then {W - D} concatenated)"
        return table, what
    if "angles" in enc.provides:
        angles = enc.angles(pos)  # [T, R/2]
        return angles, "rotation angle (radians) of each rotary pair; rows: positions"
    if (enc.family == "content" or enc.has_bias) and not 0 <= args.head < H:
        raise ValueError(f"--head must be in 0..{H - 1}, got {args.head}")
    if enc.family == "content":  # FoX's gates, DAPE's MLP, stick-breaking's stick: pictured
        # by their score with the content held fixed (a choice of picture: the family's)
        from posenc import analysis

        mats = analysis.scores(enc, pos, pos, dim=D, heads=H)
        what = f"head {args.head}: {analysis.score_label(enc)}, the content held fixed"
        return mats[min(args.head, mats.shape[0] - 1)], what + "; rows: query i, columns: key j"
    if enc.has_bias:
        q = torch.zeros(1, H, T, D)
        bias = enc.bias(q, q, pos, pos)
        if bias is None:
            return None, "no bias"
        what = f"head {args.head}'s bias; rows: query position i, columns: key position j"
        if enc.content_dependent:
            what += " (zero content: the position-only part)"
        return bias[0, args.head], what
    return None, "no positions"


if __name__ == "__main__":
    raise SystemExit(main())
