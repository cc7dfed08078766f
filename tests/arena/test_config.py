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


LABEL_FORMS = [
    "alibi", "learned(max_len=1024)", "randomized:rope", "randomized:rope(base=500)",
    "randomized:alibi(bidirectional=false)", "randomized:learned(max_len=1024)",
    "randomized:sinusoidal(fusion=concat)", "rope+ntk", "alibi+drope", "rnope-swa",
    "hf-llama:rope", "lstm:sinusoidal",
]  # fmt: skip


@pytest.mark.parametrize("label", LABEL_FORMS)
def test_every_label_form_validates_and_builds_as_a_worker_builds_it(label):
    """What validate_encodings passes, a worker can build: the keywords of randomized:NAME(kw)
    go to NAME (its encoding_kwargs), not to the wrapper."""
    pytest.importorskip("transformers") if label.startswith("hf-llama") else None
    from posenc.arena.backbones import build_model
    from posenc.arena.config import ArenaConfig, split_label, task_config
    from posenc.arena.tasks import build_task

    validate_encodings([label])
    task = build_task("copy")
    tc = task_config(ArenaConfig(tasks=["copy"], encodings=[label]), "copy")
    from posenc.arena.cells import model_kwargs

    kwargs = model_kwargs(task, split_label(label)[0], tc)
    model = build_model(kwargs)
    if label.startswith("randomized:") and "(" in label:
        inner = model.encoding.inner
        key, value = label[label.index("(") + 1 : -1].split("=")
        want = {"false": False, "concat": "concat"}.get(value)
        got = getattr(inner, key, None)
        assert got == (want if want is not None else type(got)(value)), (key, got)


@pytest.mark.parametrize(
    "label, match",
    [
        ("randomized:rope(foo=1)", "rope takes no keyword foo"),
        ("randomized:rope(base=-1)", "base"),
        ("randomized:learned(max_len=0)", "max_len"),
        ("randomized:sinusoidal(fusion=sideways)", "fusion"),
        ("randomized:xpos", None),  # builds: one-directional xPos is fine in a decoder
    ],
)
def test_bad_randomized_labels_fail_at_validation(label, match):
    if match is None:
        validate_encodings([label])
        return
    with pytest.raises(ValueError, match=match) as err:
        validate_encodings([label])
    assert repr(label) in str(err.value)


def test_a_label_the_worker_cannot_build_fails_before_the_run_naming_it():
    """check_builds (posenc arena's flag checks) builds each label as a worker does, with the
    task's lengths: randomized's sample_len (4 x the longest evaluation) past the max_len the
    label gives fails there, naming the label, not in the worker; the forms above pass."""
    from posenc.arena.cells import check_builds
    from posenc.arena.config import ArenaConfig, task_config
    from posenc.arena.tasks import build_task

    task = build_task("copy")
    bad = "randomized:rope(max_len=64)"
    validate_encodings([bad])  # a valid label alone: the task's lengths make it fail
    with pytest.raises(
        ValueError, match=r"'randomized:rope\(max_len=64\)'.*sample_len=\d+ > max_len=64"
    ):
        check_builds(task, task_config(ArenaConfig(tasks=["copy"], encodings=[bad]), "copy"))
    good = [label for label in LABEL_FORMS if not label.startswith("hf-llama")]
    check_builds(task, task_config(ArenaConfig(tasks=["copy"], encodings=good), "copy"))
