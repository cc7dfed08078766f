"""The verdict engine: claims and published findings as data, verdicts computed from numbers.

One engine for `posenc explain`'s claims, the arena's and stretch's published findings and
bench's targets. A finding is data (its source, its wording once, its measurement, its rules);
a measurement returns named numbers and decide() turns them into the verdict, which nothing
else writes (a test scans the sources for the words).

    Source, Rule, Finding      the data
    Measured, Absent           what a measurement returns, or raises when its evidence is
                               absent by design (no database given, an optional package missing)
    MEASUREMENTS, finding()    the registry of measurement functions, and its decorator
    check(), decide()          the verdict; a measurement that raises gives ERROR with its message
    Claim                      a checked finding: the numbers, the rule, the verdict
    tables: numbers(), terminal_table(), markdown_table(), html_table()   renderers (re-exported)

Example:

    >>> from posenc.verdict import Measured, Rule, Source, finding, HOLDS, FAILS
    >>> @finding(id="demo-square", claim="Squares are not negative.",
    ...          source=Source(paper="folklore: x * x >= 0"),
    ...          rules=(Rule("smallest square", "<", 0, FAILS),), otherwise=HOLDS)
    ... def demo_square(xs):
    ...     return Measured(measured={"smallest square": min(x * x for x in xs)},
    ...                     method="x * x over xs", result=f"{len(xs)} values")
    >>> c = demo_square([-2, 0, 3])  # runs the measurement, then decide()
    >>> c.verdict, c.rule
    ('holds', 'does not hold if smallest square < 0; else holds')
    >>> print(terminal_table([c], columns=("claim", "verdict", "numbers")))
    claim                      verdict  numbers
    Squares are not negative.  holds    smallest square = 0
"""

from __future__ import annotations

import math
import operator
from collections.abc import Callable
from dataclasses import asdict, dataclass, field

from posenc.verdict.tables import (  # noqa: F401 - the renderers, re-exported
    html_rows,
    html_table,
    markdown,
    markdown_table,
    numbers,
    terminal_table,
    text_table,
    where,
)

# the verdicts: a seed claim's, a published finding's (the arena's, stretch's) ...
VERDICTS = ("holds", "does not hold", "holds with a caveat", "not measured here")
HOLDS, FAILS, CAVEAT, UNMEASURED = VERDICTS
FINDING_VERDICTS = ("reproduced", "not reproduced", "inconclusive", "not measured")
REPRODUCED, NOT_REPRODUCED, INCONCLUSIVE, NOT_MEASURED = FINDING_VERDICTS
ERROR = "error"  # ... and a measurement that raised: a bug to fix, never an honest verdict
ALL_VERDICTS = (*VERDICTS, *FINDING_VERDICTS, ERROR)
ABSENT = (UNMEASURED, NOT_MEASURED)  # evidence absent by design

OPS = {"<": operator.lt, "<=": operator.le, ">": operator.gt, ">=": operator.ge}


def _real(x) -> bool:
    """A real number (int or float, not bool), NaN excluded."""
    return isinstance(x, int | float) and not isinstance(x, bool) and not math.isnan(x)


def _check_verdict(what: str, verdict, allowed=tuple(v for v in ALL_VERDICTS if v != ERROR)):
    if verdict not in allowed:
        raise ValueError(f"{what} must be one of {', '.join(map(repr, allowed))}, got {verdict!r}")


@dataclass(frozen=True)
class Source:
    """Where a claim comes from: a seed file, its verbatim quote and the quote's line (1-based),
    or a paper and the figure it publishes."""

    seed: str = ""
    quote: str = ""
    line: int = 0
    paper: str = ""


@dataclass(frozen=True)
class Rule:
    """`verdict` when measured[quantity] <op> threshold (a number absent by design, None, never
    applies)."""

    quantity: str
    op: str
    threshold: float
    verdict: str

    def __post_init__(self):
        if not isinstance(self.quantity, str) or not self.quantity:
            raise ValueError(f"Rule quantity must be a non-empty name, got {self.quantity!r}")
        if self.op not in OPS:
            raise ValueError(f"Rule op must be one of {', '.join(OPS)}, got {self.op!r}")
        if not _real(self.threshold):
            raise TypeError(f"Rule threshold must be a real number (not NaN), got "
                            f"{self.threshold!r}")  # fmt: skip
        _check_verdict("Rule verdict", self.verdict)

    def applies(self, measured: dict) -> bool:
        """ValueError for a NaN or non-number measured: NaN is never a verdict."""
        value = measured[self.quantity]  # KeyError: a rule reads a number nobody measured
        if value is None:
            return False
        if not _real(value):
            raise ValueError(f"measured {self.quantity!r} is {value!r}, not a number: no "
                             "verdict can be read from it")  # fmt: skip
        return OPS[self.op](value, self.threshold)

    def __str__(self) -> str:
        return f"{self.verdict} if {self.quantity} {self.op} {self.threshold:g}"


def decide(rules, otherwise: str, measured: dict) -> str:
    """The verdict of the first rule that applies, else `otherwise`."""
    return next((r.verdict for r in rules if r.applies(measured)), otherwise)


def rule_text(rules, otherwise: str) -> str:
    """The rules as a sentence: "does not hold if err > 0.0005; else holds"."""
    return "; ".join(map(str, rules)) + f"; else {otherwise}" if rules else ""


@dataclass
class Table:
    header: list[str]
    rows: list[list[str]]
    caption: str = ""


@dataclass(frozen=True, kw_only=True)
class Finding:
    """A claim or published finding as data; `measure` names its function in MEASUREMENTS."""

    id: str  # html anchor, e.g. "claim-003-worked-example"
    claim: str  # what is claimed, in English, once
    source: Source
    measure: str
    rules: tuple[Rule, ...]
    otherwise: str  # the verdict when no rule applies
    about: tuple[str, ...] = ()  # encodings the claim concerns
    absent: str = UNMEASURED  # the verdict when the evidence is absent by design

    def __post_init__(self) -> None:
        if not self.rules or not all(isinstance(r, Rule) for r in self.rules):
            raise ValueError(f"finding {self.id!r} needs at least one Rule, got {self.rules!r}")
        _check_verdict(f"finding {self.id!r}: otherwise", self.otherwise)
        _check_verdict(f"finding {self.id!r}: absent", self.absent, ABSENT)

    @property
    def rule(self) -> str:
        return rule_text(self.rules, self.otherwise)


@dataclass(kw_only=True)
class Measured:
    """What a measurement returns: named numbers (None: absent by design here) and the text
    that explains them."""

    measured: dict[str, float | None]
    result: str = ""  # the numbers in a sentence
    method: str = ""  # what was computed
    note: str = ""
    tables: list[Table] = field(default_factory=list)
    code: str = ""  # quoted code the measurement ran
    timings: tuple[str, ...] = ()  # quantities that are timings: left out of generated tables


class Absent(LookupError):
    """The evidence is absent by design (no database given, a cell not trained, an optional
    package missing): the verdict is the finding's `absent`, with this message as the result."""

    def __init__(self, message: str, note: str = "", method: str = ""):
        super().__init__(message)
        self.note, self.method = note, method


@dataclass(kw_only=True)
class Claim:
    """A checked claim: its source, what was measured and the verdict computed from it."""

    id: str
    claim: str
    result: str
    verdict: str = ""  # computed from measured by rules where they are given
    seed: str = ""  # seed file name (posenc/explain/seeds/)
    quote: str = ""  # the seed's own words, original language
    line: int = 0  # the quote's line in the seed
    paper: str = ""  # the citation and its numbers, for a published finding
    about: tuple[str, ...] = ()
    method: str = ""
    note: str = ""
    tables: list[Table] = field(default_factory=list)
    code: str = ""
    measured: dict[str, float | None] = field(default_factory=dict)
    rules: tuple[Rule, ...] = ()
    otherwise: str = ""
    timings: tuple[str, ...] = ()
    error: str = ""  # the exception a measurement raised (verdict ERROR)

    def __post_init__(self) -> None:
        if self.rules:
            self.verdict = decide(self.rules, self.otherwise, self.measured)

    @property
    def rule(self) -> str:
        return rule_text(self.rules, self.otherwise)


# ----------------------------------------------------------------------------- the registry

MEASUREMENTS: dict[str, Callable[..., Measured]] = {}
FINDINGS: dict[str, Finding] = {}


def finding(*, id: str, claim: str, source: Source, rules, otherwise: str, about=(),
            absent: str = UNMEASURED, measure: str | None = None):  # fmt: skip
    """Decorator: declare a finding, its measurement the function below; the decorated name runs
    check() and returns the Claim (`.finding`: the data, `.measure`: the bare function)."""
    data = Finding(id=id, claim=claim, source=source, measure=measure or id, rules=tuple(rules),
                   otherwise=otherwise, about=tuple(about), absent=absent)  # fmt: skip

    def wrap(fn: Callable[..., Measured]):
        old = MEASUREMENTS.get(data.measure, fn)
        if (old.__module__, old.__qualname__) != (fn.__module__, fn.__qualname__):
            raise ValueError(f"measurement {data.measure!r} is registered twice")
        MEASUREMENTS[data.measure] = fn  # the same definition again (a reloaded module) replaces it
        FINDINGS[data.id] = data

        def run(*args, **kwargs) -> Claim:
            return check(data, *args, **kwargs)

        run.__name__, run.__qualname__, run.__doc__ = fn.__name__, fn.__qualname__, fn.__doc__
        run.__module__, run.finding, run.measure = fn.__module__, data, fn
        return run

    return wrap


def optional_missing(err: BaseException) -> bool:
    """An optional package outside posenc is not installed (not a bug in posenc)."""
    name = getattr(err, "name", None) or "posenc"
    return isinstance(err, ModuleNotFoundError) and name.split(".")[0] != "posenc"


def check(data: Finding, *args, **kwargs) -> Claim:
    """Run the finding's measurement and decide. Evidence absent by design gives `absent`;
    any other exception gives ERROR with its message (an error stays an error)."""
    said = dict(id=data.id, claim=data.claim, about=data.about, **asdict(data.source))
    try:
        m = MEASUREMENTS[data.measure](*args, **kwargs)
        if not isinstance(m, Measured):
            raise TypeError(f"measurement {data.measure} returned {type(m).__name__}, not Measured")
        verdict = decide(data.rules, data.otherwise, m.measured)  # a missing number raises here
    except Absent as gap:
        return Claim(**said, result=str(gap), verdict=data.absent, note=gap.note,
                     method=gap.method)  # fmt: skip
    except Exception as err:  # noqa: BLE001 - reported as ERROR, never as a verdict
        if optional_missing(err):
            return Claim(**said, result=f"needs the optional package {err.name}: {err}",
                         verdict=data.absent)  # fmt: skip
        message = f"{type(err).__name__}: {err}"
        return Claim(**said, result=message, verdict=ERROR, error=message)
    claim = Claim(**said, result=m.result, method=m.method, note=m.note, tables=m.tables,
                  code=m.code, measured=m.measured, rules=data.rules, otherwise=data.otherwise,
                  timings=m.timings)  # fmt: skip
    assert claim.verdict == verdict
    return claim


def errors(claims) -> list[Claim]:
    return [c for c in claims if c.verdict == ERROR]
