"""Every public position builder of posenc.functional.mrope and .video on inputs of any dtype,
shape and range (hypothesis): a result of the documented shape, or a TypeError / ValueError
naming the parameter, never a torch internal error, an IndexError or a MemoryError."""

from __future__ import annotations

import inspect

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from posenc.functional import mrope as M
from posenc.functional import video as V

BUILDERS = {
    "mrope_positions": M.mrope_positions,
    "omni_positions": M.omni_positions,
    "diagonal_positions": V.diagonal_positions,
    "vrope_positions": V.vrope_positions,
}
DTYPES = [torch.bool, torch.uint8, torch.int8, torch.int32, torch.int64, torch.float16,
          torch.float32, torch.float64, torch.complex64]  # fmt: skip
ODD = [None, "abc", 5, 2.5, True, float("nan"), float("inf"), -1, 0, 10**30, [], [None]]


SHAPES = st.sampled_from([(), (0,), (4,), (6,), (2, 6), (2, 3, 2)])


def tensors(shapes=SHAPES, values=None):
    """A tensor of any dtype, shape and small values (bool and complex too)."""
    values = st.integers(-2, 4) if values is None else values
    return st.builds(
        lambda dtype, shape, vals: (
            torch.tensor(vals[: max(1, len(vals))])
            .repeat(64)[: torch.Size(shape).numel()]
            .reshape(shape)
            .to(dtype)
        ),
        st.sampled_from(DTYPES),
        shapes,
        st.lists(values, min_size=1, max_size=8),
    )


def grids():
    rows = st.lists(st.lists(st.integers(-1, 5), min_size=2, max_size=4), max_size=3)
    return st.one_of(
        st.none(),
        rows,
        rows.map(lambda r: torch.tensor(r) if r and len({len(x) for x in r}) == 1 else r),
        tensors(shapes=st.sampled_from([(1, 3), (2, 3), (3,), (0, 3)]), values=st.integers(0, 4)),
        st.sampled_from(ODD),
    )


def names_in(fn) -> set[str]:
    return set(inspect.signature(fn).parameters) | {"token_types", "positions"}


def says_a_parameter(err: Exception, fn) -> bool:
    return any(name in str(err) for name in names_in(fn))


@settings(max_examples=300, deadline=None)
@given(
    name=st.sampled_from(sorted(BUILDERS)),
    token_types=st.one_of(tensors(), st.sampled_from(ODD)),
    image=grids(),
    video=grids(),
    merge=st.sampled_from([1, 2, 1, 2, 0, -1, 2.0, True, "2", None]),
    mask=st.one_of(st.none(), tensors(values=st.integers(0, 1)), tensors()),
)
def test_position_builders_refuse_what_they_cannot_build_in_words(
    name, token_types, image, video, merge, mask
):
    fn = BUILDERS[name]
    try:
        out = fn(token_types, image, video, spatial_merge_size=merge, attention_mask=mask)
    except (TypeError, ValueError) as err:
        assert says_a_parameter(err, fn), f"{type(err).__name__}: {err}"
        return
    # built: the rows of token_types, (t, h, w) each, and only for integer token types
    assert isinstance(token_types, torch.Tensor) and token_types.dtype not in (
        torch.bool, torch.complex64, torch.float16, torch.float32, torch.float64,
    )  # fmt: skip
    assert out.shape == (*token_types.shape, 3)


@pytest.mark.parametrize("name", sorted(BUILDERS))
@pytest.mark.parametrize("dtype", [torch.bool, torch.float32, torch.complex64])
def test_token_types_of_a_non_integer_dtype_are_refused(name, dtype):
    """Boolean token types used to raise torch's "Unsupported input type encountered for
    isin(): Bool"; float ones a clear error: every builder names token_types for all three."""
    with pytest.raises(ValueError, match=f"token_types must be .* integer tensor.*{dtype}"):
        BUILDERS[name](torch.zeros(4, dtype=dtype))


@settings(max_examples=200, deadline=None)
@given(
    keyword=st.sampled_from(
        [
            ("mrope_positions", "tokens_per_second"),
            ("mrope_positions", "second_per_grid_ts"),
            ("mrope_positions", "padding"),
            ("mrope_positions", "temporal_merge_size"),
            ("mrope_positions", "advance"),
            ("mrope_positions", "split_frames"),
            ("omni_positions", "position_id_per_seconds"),
            ("omni_positions", "second_per_grids"),
            ("omni_positions", "seconds_per_chunk"),
            ("omni_positions", "model_type"),
            ("diagonal_positions", "temporal_scale"),
            ("diagonal_positions", "generator"),
        ]
    ),  # fmt: skip
    value=st.one_of(
        st.sampled_from(ODD),
        st.floats(allow_nan=True, allow_infinity=True),
        st.integers(-(2**70), 2**70),
        st.lists(st.one_of(st.floats(), st.none(), st.booleans()), max_size=2),
    ),
)
def test_keywords_out_of_range_are_refused_by_name(keyword, value):
    """A video of one frame and one text token on either side, with one keyword out of its
    domain: a result, or an error naming that keyword (or the grids it must match)."""
    name, key = keyword
    types = torch.tensor([0, 2, 0])
    video = torch.tensor([[1, 2, 2]])
    kw = {key: value}
    if key == "second_per_grid_ts":
        kw["tokens_per_second"] = 2
    try:
        out = BUILDERS[name](types, None, video, **kw)
    except (TypeError, ValueError) as err:
        assert key in str(err) or "video_grid_thw" in str(err), f"{type(err).__name__}: {err}"
        return
    assert out.shape == (3, 3) and bool(torch.isfinite(out.double()).all())


@pytest.mark.parametrize(
    ("call", "words"),
    [
        (lambda: M.mrope_default_section("8"), "half must be an int"),
        (lambda: M.mrope_default_section(10**12), "half must be <="),
        (lambda: M.mrope_axes([10**12, 0, 0]), "mrope_section must hold <="),
        (lambda: M.mrope_axes([1, 1]), "mrope_section must have 3"),
        (lambda: M.mrope_axes([1.5, 1, 1]), r"mrope_section\[t\]"),
        (lambda: M.mrope_axes(None, hw_pairs=True), "mrope_section must be a list"),
        (lambda: M.mrope_axes([1, 1, 1], "yes"), "interleaved must be a bool"),
        (lambda: V.videorope_axes("abc"), "mrope_section must be a list"),
        (lambda: V.vrope_axes(2.0), "half must be an int"),
        (lambda: V.vrope_axes(10**12), "half must be <="),
        (lambda: V.vrope_streams(torch.zeros(())), r"positions must be a real tensor \[\.\.\., 3"),
        (lambda: V.vrope_streams(torch.zeros(4, 3, dtype=torch.bool)), "positions must be a real"),
        (lambda: M.mrope_angles([[0, 0, 0]], torch.ones(4), [0, 1, 2, 0]), "positions must be"),
        (lambda: M.mrope_angles(torch.zeros(4, 3), torch.ones(3), [0, 1, 2, 0]), "axes must be a"),
        (lambda: M.mrope_angles(torch.zeros(4, 3), torch.ones(4), [0, 1, 3, 0]), "axes must be <"),
        (lambda: M.mrope_angles(torch.zeros(4, 3), torch.ones(4), [0, -1, 2, 0]), r"axes\[j\]"),
        (lambda: M.mrope_angles(torch.zeros(4, 3), torch.ones(2, 2), [0, 1, 2, 0]), "inv_freq"),
        (
            lambda: M.mrope_angles(
                torch.zeros(4, 3, dtype=torch.complex64), torch.ones(4), [0, 1, 2, 0]
            ),
            "positions must be a real",
        ),  # fmt: skip
        (
            lambda: M.mrope_angles(torch.full((4, 3), float("nan")), torch.ones(4), [0, 1, 2, 0]),
            "finite",
        ),
        (
            lambda: M.mrope_angles(torch.zeros(4, 3), torch.ones(4), [0, 1, 2, 0], torch.int64),
            "dtype must be",
        ),
        (
            lambda: M.mrope_positions(torch.tensor([0, 0]), attention_mask=torch.full((2,), 0.5)),
            "attention_mask must be a bool or integer",
        ),
        (
            lambda: M.mrope_positions(torch.tensor([0, 0]), attention_mask=torch.tensor([2, 1])),
            "attention_mask must be a bool or integer tensor of 0",
        ),
    ],
)
def test_the_helpers_name_what_they_refuse(call, words):
    with pytest.raises((TypeError, ValueError), match=words):
        call()
