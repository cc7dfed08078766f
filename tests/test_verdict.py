"""The verdict engine (posenc.verdict): decide, errors kept apart from absent evidence, the
renderers, and that no verdict is written anywhere else in posenc."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from posenc import verdict as V

SRC = Path(V.__file__).resolve().parents[1]  # src/posenc


RULES = (V.Rule("x", "<", 0.5, V.FAILS),)


def declare(fn, rules=RULES, **kw):
    """A throw-away finding over `fn`, registered under a fresh name."""
    name = f"test-{fn.__name__}-{len(V.MEASUREMENTS)}"
    return V.finding(id=name, claim="a claim", source=V.Source(paper="a paper: 1.0"),
                     rules=rules, otherwise=V.HOLDS, **kw)(fn)  # fmt: skip


def test_decide_takes_the_first_rule_that_applies():
    rules = (V.Rule("x", "<", 0, V.FAILS), V.Rule("x", "<", 1, V.CAVEAT))
    assert [V.decide(rules, V.HOLDS, {"x": x}) for x in (-1, 0.5, 2)] == [
        V.FAILS, V.CAVEAT, V.HOLDS,
    ]  # fmt: skip
    assert V.decide(rules, V.HOLDS, {"x": None}) == V.HOLDS  # absent by design: no rule applies
    with pytest.raises(KeyError):  # a rule reading a number nobody measured is a bug
        V.decide(rules, V.HOLDS, {"y": 1.0})
    with pytest.raises(ValueError, match="op"):
        V.Rule("x", "==", 1, V.FAILS)


def test_check_computes_the_verdict_and_states_the_rule():
    def measure(x):
        return V.Measured(measured={"x": x}, result=f"x = {x}", method="given")

    run = declare(measure)
    assert run.finding.measure in V.MEASUREMENTS and run.measure is measure
    held, failed = run(0.9), run(0.1)
    assert (held.verdict, failed.verdict) == (V.HOLDS, V.FAILS)
    assert failed.rule == "does not hold if x < 0.5; else holds"
    assert failed.paper == "a paper: 1.0" and failed.measured == {"x": 0.1}


def test_absent_evidence_is_not_measured_and_errors_stay_errors():
    def absent():
        raise V.Absent("no database given", note="run the arena first")

    def broken():
        return {"x": 1.0}["y"]  # a bug in a check: KeyError

    def optional():
        import no_such_optional_package  # noqa: F401

    def reads_nothing():
        return V.Measured(measured={"z": 1.0})  # the rule reads "x": a bug

    def internal():
        import posenc.no_such_module  # noqa: F401 - a missing posenc module is a bug

    c = declare(absent)()
    assert c.verdict == V.UNMEASURED and c.result == "no database given" and c.note
    assert declare(absent, absent=V.NOT_MEASURED)().verdict == V.NOT_MEASURED
    assert declare(optional)().verdict == V.UNMEASURED
    for fn, kind in ((broken, "KeyError"), (reads_nothing, "KeyError"),
                     (internal, "ModuleNotFoundError")):  # fmt: skip
        c = declare(fn)()
        assert c.verdict == V.ERROR and c.error.startswith(kind) and c.result == c.error
        assert V.errors([c]) == [c]


@pytest.mark.parametrize("bad", [float("nan"), "0.1", True, [0.1]])
@pytest.mark.parametrize("op", ["<", "<=", ">", ">="])
def test_a_measured_value_that_is_not_a_number_is_never_a_verdict(bad, op):
    """NaN compares false with every threshold: it used to fall through to `otherwise`
    ("holds"). It is an error with its reason, the finding's verdict never."""

    def measure():
        return V.Measured(measured={"x": bad})

    c = declare(measure, rules=(V.Rule("x", op, 0.5, V.FAILS),))()
    assert c.verdict == V.ERROR and "'x'" in c.error and "not a number" in c.error
    with pytest.raises(ValueError, match="'x'"):
        V.decide((V.Rule("x", op, 0.5, V.FAILS),), V.HOLDS, {"x": bad})


@pytest.mark.parametrize(
    ("args", "error", "words"),
    [
        (("x", "<", 0.5, "holds maybe"), ValueError, "verdict"),
        (("x", "<", 0.5, V.ERROR), ValueError, "verdict"),  # an error is never a rule's verdict
        (("x", "<", float("nan"), V.FAILS), TypeError, "threshold"),
        (("x", "<", "0.5", V.FAILS), TypeError, "threshold"),
        (("x", "<", True, V.FAILS), TypeError, "threshold"),
        (("", "<", 0.5, V.FAILS), ValueError, "quantity"),
    ],
)
def test_a_rule_refuses_what_it_cannot_decide_with(args, error, words):
    with pytest.raises(error, match=words):
        V.Rule(*args)


def test_a_finding_without_rules_is_refused_where_it_is_declared():
    def measure():
        return V.Measured(measured={"x": 1.0})

    for rules in ((), [], ("x < 0.5",)):
        with pytest.raises(ValueError, match="needs at least one Rule"):
            declare(measure, rules=rules)
    with pytest.raises(ValueError, match="otherwise"):
        V.finding(id="t-bad-otherwise", claim="c", source=V.Source(paper="p"), rules=RULES,
                  otherwise="fine")(measure)  # fmt: skip
    with pytest.raises(ValueError, match="absent"):
        declare(measure, absent=V.HOLDS)


def test_a_measurement_is_registered_once():
    def twice():
        return V.Measured(measured={"x": 1.0})

    declare(twice, measure="test-twice")
    with pytest.raises(ValueError, match="registered twice"):
        declare(lambda: None, measure="test-twice")


def test_renderers_show_the_numbers_and_the_rule_and_leave_timings_out():
    def measure(t):
        return V.Measured(measured={"x": 0.25, "seconds": t}, timings=("seconds",))

    a, b = declare(measure)(0.01), declare(measure)(3.0)
    assert V.markdown_table([a]) == V.markdown_table([b])  # timings are not in the text
    assert "x = 0.25" in V.numbers(a) and "0.01" not in V.numbers(a)
    text = V.terminal_table([a], width=80)
    assert "does not hold" in text and "else holds" in text
    assert all(len(line) <= 100 for line in text.splitlines())
    assert "<td>does not hold</td>" in V.html_table([a])
    assert V.markdown(["a|b"], [["c"]]) == "| a\\|b |\n|---|\n| c |"


def verdict_literals(path: Path, root: Path = SRC) -> list[str]:
    """String constants in `path` equal to a verdict (docstrings and f-string parts included)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return [
        f"{path.relative_to(root)}:{node.lineno}: {node.value!r}"
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant) and node.value in V.ALL_VERDICTS
    ]


CLIENTS = ("explain", "arena", "stretch")  # the packages that declare claims and findings


def clients() -> list[Path]:
    """Every module of explain, arena, stretch, and any other module that uses the engine."""
    paths = [p for p in sorted(SRC.rglob("*.py")) if p != SRC / "verdict" / "__init__.py"]
    return [p for p in paths if p.relative_to(SRC).parts[0] in CLIENTS
            or "posenc.verdict" in p.read_text(encoding="utf-8")]  # fmt: skip


def test_no_verdict_is_written_outside_the_engine():
    """Every verdict comes from posenc.verdict.decide (or Absent / an error): no module that
    declares or shows claims and findings spells one, so none can write its verdict down."""
    paths = clients()
    assert len(paths) > 30 and SRC / "arena" / "findings_lm.py" in paths
    found = [hit for p in paths for hit in verdict_literals(p)]
    assert not found, "\n".join(found)


def test_the_scan_sees_a_written_verdict(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text('verdict = "reproduced" if ok else "not reproduced"\n')
    assert len(verdict_literals(bad, tmp_path)) == 2


def test_neither_explain_nor_arena_reaches_the_other_for_verdicts():
    """arena never imports explain; explain reads arena databases only (store, tasks)."""
    for path in (SRC / "arena").rglob("*.py"):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        mods = [n.module or "" for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)]
        mods += [a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names]
        assert not [m for m in mods if m.startswith("posenc.explain")], path


def test_the_module_docstring_example_runs():
    import doctest

    for _ in range(2):  # twice: declaring the same finding again replaces it
        result = doctest.testmod(V)
        assert result.failed == 0 and result.attempted >= 4
