"""Section `cli`: how fast the `posenc` command answers, as ratios to `python -c "import torch"`
measured in the same run (each a fresh interpreter, median of repeats), and the modules that
`posenc list` spends its import time on (`python -X importtime`)."""

from __future__ import annotations

import statistics
import subprocess
import sys
import time

from posenc.bench.report import Report, Row

# what is timed -> (argv after the interpreter, the target: at most this many times import torch)
COMMANDS = {
    "import torch": (["-c", "import torch"], None),
    "posenc --help": (["-m", "posenc", "--help"], 0.1),
    "posenc arena --help": (["-m", "posenc", "arena", "--help"], None),
    "posenc list": (["-m", "posenc", "list"], 1.2),
}


def run_ms(argv: list[str]) -> float:
    start = time.perf_counter()
    subprocess.run([sys.executable, *argv], capture_output=True, check=True, timeout=300)
    return 1000 * (time.perf_counter() - start)


def top_imports(argv: list[str], n: int = 8) -> list[tuple[str, float]]:
    """The n modules with the largest cumulative import time (ms) of `python -X importtime ARGV`,
    outermost first where nested."""
    proc = subprocess.run([sys.executable, "-X", "importtime", *argv], capture_output=True,
                          text=True, timeout=300)  # fmt: skip
    found = []
    for line in proc.stderr.splitlines():
        if line.startswith("import time:") and "|" in line:
            _, cumulative, name = line[len("import time:") :].split("|")
            if cumulative.strip().isdigit():
                found.append((name.strip(), int(cumulative) / 1000))
    return sorted(found, key=lambda kv: -kv[1])[:n]


def bench_cli(rep: Report, repeats: int) -> dict:
    """Rows of section `cli`; returns {command: ms}."""
    ms = {}
    for name, (argv, _) in COMMANDS.items():
        if repeats > 1:
            run_ms(argv)  # warm the file cache
        ms[name] = statistics.median(run_ms(argv) for _ in range(repeats))
    base = ms["import torch"]
    for name, (_, target) in COMMANDS.items():
        ratio = ms[name] / base
        verdict = "PASS" if target is not None and ratio <= target else "FAIL"
        note = f"target <= {target:g}x import torch: {verdict}" if target is not None else ""
        rep.rows.append(Row("cli", name, "a fresh python", ms[name], None, None, note=note))
        if name != "import torch":
            rep.notes.append(f"cli: `{name}` takes {ratio:.2f}x the time of `import torch`")
    tops = top_imports(COMMANDS["posenc list"][0])
    rep.notes.append("cli: `python -X importtime -m posenc list`, largest cumulative: "
                     + ", ".join(f"{m} {t:.0f} ms" for m, t in tops))  # fmt: skip
    return ms
