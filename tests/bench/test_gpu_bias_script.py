"""benchmarks/gpu_bias.py: the GPU table's wiring, checked on CPU (--dry-run), and its answer
where there is no GPU."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "gpu_bias.py"


def run(*args):
    env = dict(os.environ, PYTHONPATH=str(SCRIPT.parents[1] / "src"))
    return subprocess.run(
        [sys.executable, str(SCRIPT), *args], capture_output=True, text=True, env=env, timeout=600
    )


def test_dry_run_writes_the_table_and_resumes(tmp_path):
    args = ("--out", str(tmp_path), "--dry-run", "--T", "32", "--cases", "fire_past")
    proc = run(*args, "--modes", "fwd")
    assert proc.returncode == 0, proc.stderr[-2000:]
    rows = [json.loads(line) for line in (tmp_path / "gpu_bias.jsonl").read_text().splitlines()]
    assert {(r["case"], r["path"]) for r in rows} == {
        ("-", "limit"), ("fire_past", "flex"), ("fire_past", "sdpa_bias"),
    }  # fmt: skip
    assert all(r["ms"] > 0 for r in rows)
    table = (tmp_path / "gpu_bias.md").read_text()
    assert "| fire_past | float32 | fwd | 32 |" in table and "(1.00x)" in table
    again = run(*args, "--modes", "fwd")  # resumes: nothing measured twice
    lines = (tmp_path / "gpu_bias.jsonl").read_text().splitlines()
    assert again.returncode == 0 and len(lines) == 3


@pytest.mark.skipif(torch.cuda.is_available(), reason="a GPU is here")
def test_without_a_gpu_it_says_so_in_one_line(tmp_path):
    proc = run("--out", str(tmp_path))
    assert proc.returncode == 2 and "no CUDA device" in proc.stdout
    assert not proc.stderr


def test_bad_arguments_exit_2(tmp_path):
    proc = run("--out", str(tmp_path), "--cases", "rope")
    assert proc.returncode == 2 and "--cases" in proc.stderr
