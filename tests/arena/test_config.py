"""posenc.arena.config: labels with encoding keywords, and which backbone takes which label."""

from __future__ import annotations

import pytest

from posenc.arena.config import encoding_of, on_backbones, takes, validate_encodings


@pytest.mark.parametrize(
    "label, want",
    [
        ("alibi", ("alibi", {})),
        ("learned(max_len=64)", ("learned", {"max_len": 64})),
        ("sinusoidal(fusion=concat, learned_scale=true)",
         ("sinusoidal", {"fusion": "concat", "learned_scale": True})),
        ("sinusoidal(base=100.5)", ("sinusoidal", {"base": 100.5})),
        ("randomized:rope", ("randomized", {"encoding": "rope"})),
    ],
)  # fmt: skip
def test_label_keywords(label, want):
    assert encoding_of(label) == want
    validate_encodings([label])


@pytest.mark.parametrize(
    "label, match",
    [
        ("learned(max_len)", "key=value"),
        ("learned(foo=1)", "takes no keyword foo"),
        ("sinusoidal(fusion=sideways)", "fusion must be one of add, concat"),
        ("learned(max_len=0)", "max_len"),
        ("hf-llama:alibi", "hf-llama backbone takes rope, nope"),
        ("lstm:rope", "lstm backbone has no attention"),
        ("lstm:sinusoidal_2d", "1-D absolute"),
    ],
)
def test_bad_labels_name_the_label(label, match):
    with pytest.raises(ValueError, match=match) as err:
        validate_encodings([label])
    assert repr(label) in str(err.value) or "key=value" in str(err.value)


def test_backbones_take_what_they_can_run():
    assert takes("posenc", "alibi") is None and takes("lstm", "learned") is None
    labels = ["nope", "rope", "learned(max_len=64)", "alibi"]
    assert on_backbones(labels, ("lstm", "hf-llama")) == [
        "lstm:nope", "lstm:learned(max_len=64)", "hf-llama:nope", "hf-llama:rope",
    ]  # fmt: skip
