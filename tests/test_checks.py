"""posenc.checks: the validators, and the one vocabulary: an old parameter name is refused,
naming it."""

import pytest
import torch

import posenc
from posenc.checks import check_float, check_int, grid_positions, lookup
from posenc.functional import alibi_slopes, deberta_bucket


def test_validators_name_the_parameter_and_the_range():
    assert check_int("n", 3, low=1) == 3
    with pytest.raises(TypeError, match="n must be an int, got bool"):
        check_int("n", True)
    with pytest.raises(ValueError, match="n must be >= 1, got 0"):
        check_int("n", 0, low=1)
    with pytest.raises(ValueError, match="n must be an even int >= 2, got 3"):
        check_int("n", 3, low=2, even=True)
    assert check_float("x", 2) == 2.0
    for bad in (float("nan"), float("inf"), 0.0):
        with pytest.raises(ValueError, match="x must be a finite number > 0"):
            check_float("x", bad, gt=0)
    with pytest.raises(ValueError, match="did you mean 'rope'"):
        lookup("encoding", "ropee", posenc.ENCODINGS)
    assert grid_positions(torch.arange(3), 2).tolist() == [[0, 0], [1, 1], [2, 2]]


OLD_NAMES = [
    ("num_heads", lambda: alibi_slopes(num_heads=6)),
    ("bucket_size", lambda: deberta_bucket(torch.arange(-40, 40), bucket_size=8, max_distance=20)),
    ("max_relative_position", lambda: posenc.build("shaw", head_dim=8, max_relative_position=3)),
    ("position_buckets", lambda: posenc.build("deberta", dim=16, heads=2, position_buckets=8)),
    ("npos_max", lambda: posenc.build("cope", head_dim=8, npos_max=5)),
    ("base_kwargs", lambda: posenc.build("randomized", encoding="alibi", base_kwargs={}, heads=2)),
    ("max_positions", lambda: posenc.build("randomized", max_positions=64, heads=2)),
    ("q_positions", lambda: posenc.attention(*[torch.randn(1, 2, 4, 8)] * 3,
                                             q_positions=torch.arange(4))),
]  # fmt: skip


@pytest.mark.parametrize("old, call", OLD_NAMES, ids=[o for o, _ in OLD_NAMES])
def test_old_parameter_names_are_refused_naming_them(old, call):
    """One vocabulary, no aliases: an old name is a TypeError naming it (CHANGELOG.md)."""
    with pytest.raises(TypeError, match=old):
        call()


@pytest.mark.parametrize("name", ["sinusoidal", "sinusoidal_2d", "sinusoidal_3d"])
def test_the_embedding_scale_is_the_encodings_fact_also_under_a_wrapper(name):
    """sqrt(D) for the sinusoids (Vaswani 3.4), read from the encoding: `randomized` over
    sinusoidal used to lose it (the model kept a list of names)."""
    model = posenc.TransformerLM(vocab_size=5, dim=16, depth=1, heads=2, encoding=name)
    assert model.embed_scale == 4.0 and model.tok_emb.weight.std() > 0.1
    if name == "sinusoidal":
        wrapped = posenc.TransformerLM(
            vocab_size=5,
            dim=16,
            depth=1,
            heads=2,
            encoding="randomized",
            encoding_kwargs={"encoding": name},
        )
        assert wrapped.embed_scale == 4.0  # fmt: skip
    plain = posenc.TransformerLM(vocab_size=5, dim=16, depth=1, heads=2, encoding="rope")
    assert plain.embed_scale == 1.0


def test_import_posenc_imports_no_compiler_stack():
    """checks.outside_graph applies torch.compiler.disable only once compiling: `import
    posenc` leaves torch._dynamo (and triton, sympy, which it loads) unimported (issue 38)."""
    import subprocess
    import sys
    from pathlib import Path

    src = Path(__file__).resolve().parents[1] / "src"
    heavy = ("torch._dynamo", "triton", "sympy")
    code = f"import sys, posenc; print([m for m in {heavy!r} if m in sys.modules])"
    env = {"PYTHONPATH": str(src), "PATH": "/usr/bin:/bin"}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"
