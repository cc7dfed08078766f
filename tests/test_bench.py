"""`posenc bench` runs and prints its table (timings are never asserted)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from posenc import bench
from posenc.cli import main as cli_main


def test_smoke_prints_table_targets_and_json(tmp_path, capsys):
    out = tmp_path / "bench.json"
    assert cli_main(["bench", "--smoke", "--json", str(out)]) == 0
    text = capsys.readouterr().out
    for needle in ("rope fwd", "rope fwd+bwd", "sin table", "bias attn", "train", "targets:"):
        assert needle in text
    data = json.loads(out.read_text())
    impls = {r["impl"] for r in data["rows"]}
    assert {"posenc", "posenc in-place", "posenc out=", "transformers"} <= impls
    assert all(t["status"] in ("PASS", "FAIL", "N/A") for t in data["targets"])
    assert data["machine"]["threads"] == 2


def test_bad_arguments():
    assert cli_main(["bench", "--sections", "rope,warp"]) == 2
    with pytest.raises(ValueError, match="--threads"):
        bench.main(["--threads", "0"])


@pytest.mark.slow
def test_quick_runs_under_two_minutes():
    """The issue's command itself (marked slow: about 1-2 minutes of CPU)."""
    proc = subprocess.run(
        [sys.executable, "-m", "posenc", "bench", "--quick"],
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "targets:" in proc.stdout and "posenc in-place" in proc.stdout
