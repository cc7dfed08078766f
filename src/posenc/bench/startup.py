"""Section `cli`: how fast the `posenc` command answers, as ratios to `python -c "import torch"`
measured in the same run (each a fresh interpreter, median of repeats): `posenc --help`, every
command's `--help` (the slowest one's row) and `posenc list`; and what they import (`python -X
importtime`): the modules `posenc list` spends its time on, and any torch a --help imported."""

from __future__ import annotations

import statistics
import subprocess
import sys
import time

from posenc.bench.report import Report, Row
from posenc.cli import parsers

# what is timed -> argv after the interpreter (bench.targets judges the ratios to import torch)
COMMANDS = {
    "import torch": ["-c", "import torch"],
    "posenc --help": ["-m", "posenc", "--help"],
    "posenc COMMAND --help": None,  # each command's (HELPS): the slowest
    "posenc list": ["-m", "posenc", "list"],
}
HELPS = {f"posenc {w} --help": ["-m", "posenc", *w.split(), "--help"] for w in parsers()}
HEAVY = ("torch", "triton", "sympy")  # what no --help imports


def run_ms(argv: list[str]) -> float:
    start = time.perf_counter()
    subprocess.run([sys.executable, *argv], capture_output=True, check=True, timeout=300)
    return 1000 * (time.perf_counter() - start)


def median_ms(argv: list[str], repeats: int) -> float:
    if repeats > 1:
        run_ms(argv)  # warm the file cache
    return statistics.median(run_ms(argv) for _ in range(repeats))


def imports(argv: list[str]) -> list[tuple[str, float]]:
    """(module, cumulative import ms) for each module `python -X importtime ARGV` imports."""
    proc = subprocess.run([sys.executable, "-X", "importtime", *argv], capture_output=True,
                          text=True, timeout=300)  # fmt: skip
    found = []
    for line in proc.stderr.splitlines():
        if line.startswith("import time:") and "|" in line:
            _, cumulative, name = line[len("import time:") :].split("|")
            if cumulative.strip().isdigit():
                found.append((name.strip(), int(cumulative) / 1000))
    return found


def bench_cli(rep: Report, repeats: int) -> dict:
    """Rows of section `cli`; returns {command: ms}."""
    helps = {name: median_ms(argv, repeats) for name, argv in HELPS.items()}
    slowest = max(helps, key=helps.get)
    ms = {name: helps[slowest] if argv is None else median_ms(argv, repeats)
          for name, argv in COMMANDS.items()}  # fmt: skip
    for name, argv in COMMANDS.items():
        note = f"slowest of {len(helps)}: `{slowest}`" if argv is None else ""
        rep.rows.append(Row("cli", name, "a fresh python", ms[name], None, None, note=note))
        if name != "import torch":
            ratio = ms[name] / ms["import torch"]
            rep.notes.append(f"cli: `{name}` takes {ratio:.2f}x the time of `import torch`")
    tops = sorted(imports(COMMANDS["posenc list"]), key=lambda kv: -kv[1])[:8]  # outermost 1st
    rep.notes.append("cli: `python -X importtime -m posenc list`, largest cumulative: "
                     + ", ".join(f"{m} {t:.0f} ms" for m, t in tops))  # fmt: skip
    bad = []
    for name, argv in {"posenc --help": COMMANDS["posenc --help"], **HELPS}.items():
        heavy = sorted({m.split(".")[0] for m, _ in imports(argv)} & set(HEAVY))
        bad += [f"`{name}` imports {', '.join(heavy)}"] if heavy else []
    none = "none imports " + ", ".join(HEAVY)
    rep.notes.append(f"cli: `python -X importtime -m posenc ... --help`, {len(HELPS) + 1} "
                     f"commands: {'; '.join(bad) or none}")  # fmt: skip
    return ms
