"""posenc.hf.patch on every RoPE model type of the installed transformers (posenc.hf.coverage).

Default run: one model type per thing patch must identify (each output form, partial rotary,
per layer type, NoPE layers, MLA decoupled rope heads, GPT-J's table, proportional heads),
each at parity: logits within 1e-4 after patch(), and with YaRN and dynamic NTK equal to the
model transformers rebuilds with them. The full sweep holds the issue's target: parity on
>= 90% of the types that build, none wrong; `python -m posenc.hf.coverage --write
docs/hf/coverage.md` writes its table, which the sweep test keeps in step.
Never silently wrong: a rotary module whose numbers differ from its config is refused.
"""

import pytest
import torch
from support.readme import REPO, generated_block

transformers = pytest.importorskip("transformers")

from posenc.hf import coverage, patch  # noqa: E402
from posenc.hf.patch import PosencRotaryEmbedding  # noqa: E402

REPRESENTATIVE = {
    "llama": "half",
    "cohere": "interleaved",  # repeat_interleave cos / sin
    "gpt_oss": "pairs",  # cos, sin [B, T, R/2]
    "gptj": "pairs_sc",  # sin, cos from a table of max positions; rotary_dim
    "deepseek_v2": "complex",  # freqs_cis
    "deepseek_v3": "half",  # MLA rope heads (qk_rope_head_dim), rope_interleave
    "glm": "half",  # partial rotary
    "gemma3_text": "half",  # rope per layer type
    "smollm3": "half",  # NoPE layers
    "gemma4_text": "half",  # per-layer-type head dims, proportional rope
}


@pytest.fixture(scope="module")
def known():
    return coverage.model_types()


@pytest.mark.parametrize("model_type", list(REPRESENTATIVE))
def test_representative_types_at_parity(model_type, known):
    row = coverage.check(model_type, known[model_type])
    assert row["status"] == "parity", row
    for key in ("plain", "yarn", "dynamic"):
        assert row[key] == "-" or row[key] <= coverage.TOL, row


@pytest.mark.parametrize("model_type", list(REPRESENTATIVE))
def test_form_identified(model_type, known):
    model, _ = coverage.tiny(model_type, known[model_type])
    patch(model)
    forms = {m.form for _, m in model.named_modules() if isinstance(m, PosencRotaryEmbedding)}
    assert forms == {REPRESENTATIVE[model_type]}


def test_keys_the_attention_reads_are_left_to_it(known):
    """Ministral 3's rope_parameters hold llama_4_scaling_beta, a query scale its attention
    applies itself: patch() takes the rotary module (logits at parity) and leaves the key to the
    attention; a new scaling, which would leave that scale at the old context, is refused."""
    model, _ = coverage.tiny("ministral3", known["ministral3"])
    ids = torch.randint(3, 100, (1, 12), generator=torch.Generator().manual_seed(0))
    far = torch.arange(20_000, 20_012)[None]  # past its original context: the scale is on
    with torch.no_grad():
        want = [model(ids).logits, model(ids, position_ids=far).logits]
        patch(model)
        got = [model(ids).logits, model(ids, position_ids=far).logits]
    for a, b in zip(got, want):
        torch.testing.assert_close(a, b, atol=coverage.TOL, rtol=0)
    fresh, _ = coverage.tiny("ministral3", known["ministral3"])
    with pytest.raises(ValueError, match="llama_4_scaling_beta.*rebuild the model"):
        patch(fresh, scaling={"rope_type": "yarn", "factor": 2.0})
    assert not any(isinstance(m, PosencRotaryEmbedding) for m in fresh.modules())


def test_a_scaling_patch_is_asked_for_is_taken_as_given(known):
    """Phi3Config renames a loaded 'yarn' to 'longrope' (old Phi-3 checkpoints); a YaRN asked
    of patch() stays YaRN and equals transformers' Phi-3 rebuilt with it."""
    row = coverage.check("phi3", known["phi3"])
    assert row["status"] == "parity" and row["yarn"] <= coverage.TOL, row


def test_full_sweep_target():
    """Every RoPE model type (~130 tiny models, ~40 s here): parity on >= 90% of those that
    build, none wrong, and docs/hf/coverage.md says what this transformers gives (its version)."""
    rows = coverage.sweep()
    s = coverage.summary(rows)
    assert s["wrong"] == 0, [r for r in rows if r["status"] == "wrong"]
    assert s["parity"] >= 0.9 * s["built"], s
    doc = (REPO / "docs/hf/coverage.md").read_text(encoding="utf-8")
    if f"(transformers {transformers.__version__}," in doc:  # the table is of this version
        documented = dict(
            line.split(" | ")[:2] for line in doc.splitlines() if line.startswith("| ")
        )
        got = {f"| {r['model_type']}": r["status"] for r in rows}
        assert {k: v for k, v in documented.items() if k in got} == got
        assert generated_block("hf-coverage") == coverage.readme_block(rows)


def _tiny_llama():
    model, _ = coverage.tiny("llama", "LlamaForCausalLM")
    return model


@pytest.mark.parametrize(
    "tamper, message",
    [
        (lambda r: r.inv_freq.mul_(1.001), "differs from posenc's default rope"),
        (lambda r: setattr(r, "attention_scaling", 1.1), "differs from posenc's default rope"),
        (lambda r: r.inv_freq[-1:].mul_(0.5), "differs from posenc's default rope"),
    ],
)
def test_a_module_that_differs_from_its_config_is_refused_untouched(tamper, message):
    model = _tiny_llama()
    tamper(model.model.rotary_emb)
    own = model.model.rotary_emb
    with pytest.raises(ValueError, match=message) as info:
        patch(model)
    assert "\n" not in str(info.value) and "not patched" in str(info.value)
    assert model.model.rotary_emb is own


def test_a_module_of_another_interface_is_refused():
    model = _tiny_llama()

    class Odd(torch.nn.Module):  # a rotary module with another signature
        def forward(self, x, seq_len):
            return x

    Odd.__name__ = "OddRotaryEmbedding"
    model.model.rotary_emb = Odd()
    with pytest.raises(ValueError, match="its output .* has the shape of no form"):
        patch(model)


def test_patched_twice_is_refused():
    model = patch(_tiny_llama())
    with pytest.raises(ValueError, match="already patched"):
        patch(model)


def test_dynamic_grown_state_does_not_block_patch():
    """A dynamic NTK model already run past its length is confirmed on its fresh state."""
    model, kwargs = coverage.tiny("llama", "LlamaForCausalLM")
    config = coverage._config("llama", kwargs, coverage.DYNAMIC)
    model = coverage._build("llama", "LlamaForCausalLM", config)
    with torch.no_grad():
        model(torch.randint(3, 100, (1, 8)), position_ids=torch.arange(200, 208)[None])
    assert model.model.rotary_emb.max_seq_len_cached > 64
    patch(model)


@pytest.mark.parametrize("model_type", ["qwen3_5_text", "qwen3"])
def test_other_sizes_never_crash_after_a_patch(model_type, known):
    """Another set of tiny sizes (coverage.OTHER_VARIANTS; `python -m posenc.hf.coverage
    --sizes other` sweeps every type): Qwen3.5 with a head of 16 and a quarter rotary, whose
    module's default mrope_section cannot fit its 2 rotary pairs, is refused with that reason
    where it used to patch and then crash in its attention; Qwen3 stays at parity."""
    row = coverage.check(model_type, known[model_type], coverage.OTHER_VARIANTS)
    if model_type == "qwen3_5_text":
        assert row["status"] == "refused" and "default mrope_section" in row["reason"], row
    else:
        assert row["status"] == "parity", row
