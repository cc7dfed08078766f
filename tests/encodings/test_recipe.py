"""CONTRIBUTING.md's recipe holds for every family: its worked example of each family (absolute,
rotary, bias, content), read from CONTRIBUTING.md and appended to its family module alone in a
copy of the package, is picked up by the registry, the contract test, the model, the arena,
`posenc explain` and `randomized`, with every capability it declares and no other edit."""

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
CONTRIBUTING = TESTS.parent / "CONTRIBUTING.md"

# family -> (registry name, what it declares, the standard keywords its constructor takes)
FAMILIES = {
    "absolute": ("wave", {"embed"}, {"dim", "max_len"}),
    "rotary": ("small_base_rope", {"rotate", "angles"}, {"dim", "heads", "head_dim", "max_len"}),
    "bias": ("linear_bias", {"bias", "score_mod", "distance"}, {"heads", "max_len"}),
    "content": ("gated_logits", {"transform_logits"}, {"heads", "max_len"}),
}


def examples() -> dict[str, tuple[str, str]]:
    """CONTRIBUTING.md's worked examples: family module -> (registry name, code)."""
    blocks = re.findall(r"```python\n(# appended to src/posenc/encodings/(\w+)\.py\n.*?)```",
                        CONTRIBUTING.read_text(), flags=re.S)  # fmt: skip
    out = {}
    for code, module in blocks:
        name = re.search(r'ENCODINGS\["(\w+)"\]', code).group(1)
        out[module] = (name, code)
    return out


# Run in the copy: every consumer picks the new encoding up; then its contract and wrapper tests.
SCRIPT = textwrap.dedent(
    """
    import sys, warnings, pytest, torch, posenc
    from posenc.arena.config import ArenaConfig
    from posenc.arena.runner import run
    from posenc.arena.store import Store
    from posenc.arena.tasks import build_task
    from posenc.base import MODEL_KWARGS, takes
    from posenc.encodings.wrappers import WRAPPABLE
    from posenc.explain.cli import main as explain
    src, tmp, family, name, provides, kwargs, tests = sys.argv[1:]
    provides, kwargs = set(provides.split(",")), set(kwargs.split(","))
    assert posenc.__file__.startswith(src), posenc.__file__
    cls = posenc.ENCODINGS[name]
    assert cls.family == family and name in WRAPPABLE and cls.provides == provides
    assert takes(cls) & set(MODEL_KWARGS) == kwargs  # only the standard keywords it uses
    shape = dict(dim=16, heads=2, kv_heads=1, head_dim=8, max_len=64, train_len=8)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the model's whole shape: build drops what it does not use
        enc = posenc.build(name, **shape)
        wrapped = posenc.build("randomized", encoding=name, **shape)
    assert enc.provides == provides and enc.max_len == 64
    assert wrapped.provides == provides | {"sample_positions"}
    if family == "rotary":  # rotate, derived from _angles, is RoPE's with the same base
        torch.manual_seed(0)
        q, k, pos = torch.randn(2, 2, 5, 8), torch.randn(2, 1, 5, 8), torch.arange(3, 8)
        rope = posenc.build("rope", head_dim=8, base=500.0)
        for got, want in zip(enc.rotate(q, k, pos, pos), rope.rotate(q, k, pos, pos)):
            torch.testing.assert_close(got, want)
    model = posenc.TransformerLM(vocab_size=7, dim=16, depth=1, heads=2, kv_heads=1,
                                 encoding=name, max_len=64)
    model(torch.randint(0, 7, (1, 5))).sum().backward()
    cfg = ArenaConfig(tasks=["copy"], encodings=[name], seeds=1, steps=2, train_len=2, dim=8,
                      depth=1, heads=2, eval_samples=4, db=tmp + "/a.sqlite", out=tmp + "/arena")
    with Store(cfg.db) as store:
        assert run(cfg, {"copy": build_task("copy")}, store) > 0
    assert explain([name, "--out", tmp + "/explain"]) == 0
    print("picked up")
    # the registry-wide tests, on this name alone: the contract (declaration vs hooks, shapes,
    # dtypes, backends, max_len, compile) and randomized(x) on every backend x runs on
    files = [tests + "/encodings/test_contract.py", tests + "/encodings/test_wrappers.py"]
    sys.exit(pytest.main(["-q", "-p", "no:cacheprovider", "-k", name + " and not inductor",
                          *files]))
    """
)


def test_contributing_has_one_worked_example_per_family():
    found = examples()
    assert {m: name for m, (name, _) in found.items()} == {f: n for f, (n, *_) in FAMILIES.items()}
    for name, *_ in FAMILIES.values():
        assert name not in posenc.ENCODINGS  # throw-away: not in the package


@pytest.mark.slow
@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_an_encoding_added_to_its_family_module_is_picked_up_everywhere(family, tmp_path):
    name, provides, kwargs = FAMILIES[family]
    src = tmp_path / "src"
    shutil.copytree(Path(posenc.__file__).parent, src / "posenc",
                    ignore=shutil.ignore_patterns("__pycache__"))  # fmt: skip
    module = src / "posenc" / "encodings" / f"{family}.py"
    text = module.read_text()
    assert name not in text
    module.write_text(text + "\n\n" + examples()[family][1])  # its module, and nothing else
    env = dict(os.environ, PYTHONPATH=str(src), OMP_NUM_THREADS="1")
    args = [str(src), str(tmp_path), family, name, ",".join(sorted(provides)),
            ",".join(sorted(kwargs)), str(TESTS)]  # fmt: skip
    proc = subprocess.run([sys.executable, "-c", SCRIPT, *args], env=env, cwd=TESTS.parent,
                          capture_output=True, text=True, timeout=600)  # fmt: skip
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0 and "picked up" in proc.stdout, out[-3000:]
    assert name in (tmp_path / "explain" / "index.html").read_text()
    passed = re.search(r"(\d+) passed", proc.stdout)
    assert passed and int(passed.group(1)) >= 10, out[-2000:]  # its contract tests ran
