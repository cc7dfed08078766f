"""`posenc explain NAME [--dim D] [--heads H] [--max-pos N] [--out DIR] [--checkpoint PATH]
[--arena DB] [--lang zh]`, `posenc explain --all --out DIR` and `posenc explain --claims` (the
README's table of the seeds' claims). `--lang zh` writes the pages (and the table) in Chinese;
the help is in Chinese with --lang zh or a zh_* locale."""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

from posenc.cliargs import (
    OneLineParser,
    check_writable,
    in_file,
    in_files,
    integer,
    out_dir,
)
from posenc.explain.i18n import LANGS, tr

DESCRIPTION = (
    "Draw and measure what a positional encoding does, and check the seed tutorials' claims. "
    "Writes DIR/index.html (figures as PNG files beside it; opens from disk, no network) and "
    "prints the measured properties."
)


def help_lang(argv: list[str]) -> str:
    """The help's language: --lang's if given, else zh under a zh_* locale, else en."""
    for i, a in enumerate(argv):
        value = a.split("=", 1)[1] if a.startswith("--lang=") else None
        if a == "--lang" and i + 1 < len(argv):
            value = argv[i + 1]
        if value in LANGS:
            return value
    env = next((os.environ[v] for v in ("LC_ALL", "LC_MESSAGES", "LANG") if os.environ.get(v)), "")
    return "zh" if env.startswith("zh") else "en"


def translated(p: argparse.ArgumentParser, lang: str) -> argparse.ArgumentParser:
    """`p` with its description, option help, section titles and usage prefix in `lang`."""
    p.description = tr(p.description, lang)
    for action in p._actions:
        if action.help:
            action.help = tr(action.help, lang)
    p._positionals.title, p._optionals.title = (tr(t, lang) for t in ("positional arguments",
                                                                       "options"))  # fmt: skip
    usage = tr("usage: ", lang)

    class Formatter(argparse.HelpFormatter):
        def add_usage(self, usage_, actions, groups, prefix=None):
            super().add_usage(usage_, actions, groups, usage)

    p.formatter_class = Formatter
    return p


def parser(lang: str = "en") -> argparse.ArgumentParser:
    """The options, their help in `lang` (the flags are the same in every language)."""
    p = OneLineParser(prog="posenc explain", description=DESCRIPTION)
    p.add_argument("name", nargs="?", help="encoding name (see `posenc list`)")
    p.add_argument("--all", action="store_true", help="every encoding, an index and a comparison")
    p.add_argument(
        "--dim",
        type=integer(4, even=True),
        default=64,
        help="model width for absolute encodings, head dim for the others (default 64)",
    )
    p.add_argument("--heads", type=integer(1, 64), default=4, help="attention heads (default 4)")
    p.add_argument(
        "--max-pos",
        type=integer(16, 2048),
        default=128,
        help="positions 0..N-1 to draw and measure; the table length of learned ones (default 128)",
    )
    p.add_argument(
        "--out", type=out_dir, help="output folder (default explain_NAME, or explain_all)"
    )
    p.add_argument(
        "--checkpoint",
        type=in_file,
        help="a TransformerLM checkpoint: draw the trained state too",
    )
    p.add_argument(
        "--arena",
        type=in_files,
        help="arena results databases, comma-separated: the claims that need trained models",
    )
    p.add_argument(
        "--claims",
        action="store_true",
        help="print the seeds' claims as a markdown table (the README's) and exit",
    )
    p.add_argument(
        "--lang",
        choices=LANGS,
        default="en",
        help="language of the pages, figures and --claims table: en or zh (default en)",
    )
    return p if lang == "en" else translated(p, lang)


def summary(pg) -> str:
    lines = [f"{pg.name} ({pg.cls.family}; {pg.cls.paper})"]
    lines += [f"  {m.line()}" for m in pg.measures]
    if pg.trained_measures:
        lines.append(f"  trained ({Path(pg.checkpoint).name}):")
        lines += [f"    {m.line()}" for m in pg.trained_measures]
    return "\n".join(lines)


def report_errors(claims) -> int:
    """1, with each error on stderr, if a check raised (an error is never a verdict); else 0."""
    from posenc.verdict import errors

    bad = errors(claims)
    for c in bad:
        print(f"posenc explain: {c.id} raised {c.error}", file=sys.stderr)
    if bad:
        print(f"posenc explain: {len(bad)} check(s) raised: a bug to fix", file=sys.stderr)
    return 1 if bad else 0


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    args = parser(help_lang(argv)).parse_args(argv)
    from posenc import explain as ex  # heavy imports (matplotlib) only when it runs

    start = time.perf_counter()
    if args.arena is not None:  # before anything runs or is written
        ex.claims_mod.check_databases(args.arena)
    if args.claims:
        claims = ex.claims_mod.check_all(dim=args.dim, max_pos=args.max_pos, arena=args.arena)
        print(ex.claims_mod.markdown_table(claims, args.lang))
        return report_errors(claims)
    if args.lang != "en":  # the figures' CJK font, before anything is drawn or written
        from posenc.explain.i18n.fonts import cjk_family

        try:
            cjk_family()
        except ModuleNotFoundError as err:
            raise ValueError(f"--lang {args.lang}: {err}") from None
    if args.all:
        if args.name or args.checkpoint:
            raise ValueError("--all draws every encoding: give no NAME and no --checkpoint")
        out = Path(check_writable(args.out or "explain_all"))  # created only to write
        from tqdm import tqdm

        print("explain: checking the tutorials' claims, then a page per encoding ...",
              file=sys.stderr, flush=True)  # fmt: skip
        bar = lambda names: tqdm(names, desc="explain", unit="page", file=sys.stderr)  # noqa: E731
        pages = ex.explain_all(out, dim=args.dim, heads=args.heads, max_pos=args.max_pos,
                               arena=args.arena, lang=args.lang, progress=bar)  # fmt: skip
        for pg in pages:
            print(summary(pg))
        print(
            f"wrote {out / 'index.html'} and {len(pages)} pages "
            f"in {time.perf_counter() - start:.1f} s"
        )
        return report_errors(pages[0].claims if pages else [])
    if not args.name:
        raise ValueError("give an encoding NAME (see `posenc list`) or --all")
    name = ex.registry_key(args.name)  # a bad name is refused before anything is written
    out = Path(check_writable(args.out or f"explain_{name}"))
    pg = ex.explain(
        name,
        out,
        dim=args.dim,
        heads=args.heads,
        max_pos=args.max_pos,
        checkpoint=args.checkpoint,
        arena=args.arena,
        lang=args.lang,
    )
    print(summary(pg))
    print(f"wrote {out / 'index.html'} in {time.perf_counter() - start:.1f} s")
    return report_errors(pg.claims)  # a check that raised is never silent
