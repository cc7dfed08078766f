"""CONTRIBUTING.md's recipe holds: a throw-away encoding added to its family module alone (in a
copy of the package) is picked up by the registry, the contract test, the model, the arena and
`posenc explain`, with no other edit."""

import os
import re
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import posenc

TESTS = Path(__file__).resolve().parents[1]

NEW_ENCODING = textwrap.dedent(
    '''


    class LinearBias(PositionBias):
        """b_h(i, j) = -slope / (h + 1) * |i - j|: ALiBi with harmonic slopes."""

        paper = "(example)"
        summary = "linear distance penalty, slope / (h + 1) for head h"

        def __init__(self, *, dim=None, heads=None, head_dim=None, max_len=None, train_len=None,
                     slope=0.5):
            super().__init__(heads)
            self.max_len = check_max_len(max_len)
            self.slope = check_float("slope", slope, gt=0)

        def _value(self, qp, kp, h, params):
            return -self.slope / (h + 1) * (qp - kp).abs().float()


    ENCODINGS["linear_bias"] = LinearBias
    '''
)

SCRIPT = textwrap.dedent(
    """
    import sys, torch, posenc
    from posenc.arena.config import ArenaConfig
    from posenc.arena.runner import run
    from posenc.arena.store import Store
    from posenc.arena.tasks import build_task
    from posenc.explain.cli import main as explain
    assert posenc.__file__.startswith(sys.argv[1]), posenc.__file__
    enc = posenc.build("linear_bias", heads=2)
    assert enc.family == "bias" and enc.has_bias and enc.provides == {"bias", "score_mod"}
    wrapped = posenc.build("randomized", encoding="linear_bias", heads=2)
    assert wrapped.provides == enc.provides | {"sample_positions"}
    model = posenc.TransformerLM(vocab_size=7, dim=8, depth=1, heads=2, encoding="linear_bias")
    assert model(torch.randint(0, 7, (1, 5))).shape == (1, 5, 7)
    cfg = ArenaConfig(tasks=["copy"], encodings=["linear_bias"], seeds=1, steps=2, train_len=2,
                      dim=8, depth=1, heads=2, eval_samples=4, db=sys.argv[2] + "/a.sqlite",
                      out=sys.argv[2] + "/arena")
    with Store(cfg.db) as store:
        assert run(cfg, {"copy": build_task("copy")}, store) > 0
    assert explain(["linear_bias", "--out", sys.argv[2] + "/explain"]) == 0
    print("picked up")
    """
)


@pytest.mark.slow
def test_an_encoding_added_to_its_family_module_is_picked_up_everywhere(tmp_path):
    src = tmp_path / "src"
    shutil.copytree(Path(posenc.__file__).parent, src / "posenc")
    family = src / "posenc" / "encodings" / "bias.py"
    text = family.read_text()
    assert "linear_bias" not in text
    family.write_text(
        text.replace(
            "import torch\n",
            "import torch\n\nfrom posenc.checks import check_float, check_max_len\n",
            1,
        )
        + NEW_ENCODING
    )
    env = dict(os.environ, PYTHONPATH=str(src), OMP_NUM_THREADS="1")
    proc = subprocess.run([sys.executable, "-c", SCRIPT, str(src), str(tmp_path)], env=env,
                          capture_output=True, text=True, timeout=300)  # fmt: skip
    assert proc.returncode == 0 and "picked up" in proc.stdout, proc.stderr[-3000:]
    assert "linear_bias" in (tmp_path / "explain" / "index.html").read_text()
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-k",
         "linear_bias and not inductor", str(TESTS / "encodings" / "test_contract.py")],
        env=env, capture_output=True, text=True, timeout=300, cwd=TESTS.parent,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-3000:]
    passed = re.search(r"(\d+) passed", proc.stdout)
    assert passed and int(passed.group(1)) >= 5, proc.stdout[-2000:]  # its contract tests ran
