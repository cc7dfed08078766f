"""The explain pages in another language: message catalogs as data, English the fallback.

A catalog (posenc/explain/i18n/<lang>.py, MESSAGES) maps an English text, as the pages show it,
to its translation; a key is the text with each number replaced by {0}, {1}, ... in order
("max |difference| = {0}"), and the translation puts the same numbers back ({0} may move): the
numbers come from the one measured text, never from the catalog. `tr` translates a text, `fmt`
a page's own message with named fields, `rule_text` / `numbers` a verdict's rule and numbers;
MISSING records the keys a language lacks (tests keep it empty); GLOSSARY holds the tutorials'
own terms (glossary.py), which the catalogs follow; fonts.cjk_family() the figures' CJK font.
"""

from __future__ import annotations

import importlib
import itertools
import re
from functools import cache

from posenc.verdict import rule_text as english_rule_text

LANGS = ("en", "zh")
MISSING: dict[str, set[str]] = {}  # lang -> keys not found (recorded, English shown)

# a number not inside a name (L2, rope_2d, seed000): 3, 0.25, 1.5e-05, 4,096, -2, x1.33, ω_31
NUM = re.compile(
    r"(?:(?<=\.\.)|(?<=(?<![A-Za-z])x)|(?<=[α-ω]_)|(?<![A-Za-z_\d.\-]))"
    r"-?\d+(?:,\d{3})*(?:\.\d+)?(?:e[-+]?\d+)?"
)
SLOT = re.compile(r"\{(\d+)\}")


def check_lang(lang: str) -> str:
    if lang not in LANGS:
        raise ValueError(f"--lang must be one of {', '.join(LANGS)}, got {lang!r}")
    return lang


@cache
def catalog(lang: str) -> dict[str, str]:
    """The MESSAGES of `lang` (empty for English: the texts are English)."""
    if check_lang(lang) == "en":
        return {}
    return importlib.import_module(f"posenc.explain.i18n.{lang}").MESSAGES


def key(text: str) -> tuple[str, list[str]]:
    """(the text with its numbers as {0}, {1}, ..., the numbers)."""
    slots = itertools.count()
    return NUM.sub(lambda _: "{" + str(next(slots)) + "}", text), NUM.findall(text)


def tr(text: str, lang: str = "en") -> str:
    """`text` in `lang`: its own entry, else its numbers-as-slots entry; else English (and the
    key is recorded in MISSING)."""
    if lang == "en" or not text or not text.strip():
        return text
    messages = catalog(lang)
    if text in messages:
        return messages[text]
    k, nums = key(text)
    if k in messages:
        return SLOT.sub(lambda m: nums[int(m.group(1))], messages[k])
    if re.search(r"[A-Za-z]{2}", text):  # only numbers and symbols: nothing to translate
        MISSING.setdefault(lang, set()).add(k)
    return text


def fmt(message: str, lang: str = "en", **fields) -> str:
    """A message with named fields ("seed {seed}, line {line}") in `lang`, filled in."""
    if lang != "en" and message not in catalog(lang):
        MISSING.setdefault(lang, set()).add(message)
    return (message if lang == "en" else catalog(lang).get(message, message)).format(**fields)


OPS = {"<": "<", "<=": "≤", ">": ">", ">=": "≥"}


def rule_text(rules, otherwise: str, lang: str) -> str:
    """posenc.verdict.rule_text in `lang`, from the same Rule objects."""
    if lang == "en" or not rules:
        return english_rule_text(rules, otherwise)
    parts = [fmt("{verdict} if {quantity} {op} {threshold}", lang, verdict=tr(r.verdict, lang),
                 quantity=tr(r.quantity, lang), op=OPS[r.op], threshold=f"{r.threshold:g}")
             for r in rules]  # fmt: skip
    return fmt("{rules}; else {otherwise}", lang, rules=fmt("; ", lang).join(parts),
               otherwise=tr(otherwise, lang))  # fmt: skip


def numbers(c, lang: str = "en", digits: int = 3) -> str:
    """posenc.verdict.numbers in `lang`: "name = value; ..." of the numbers the verdict reads."""
    parts = []
    for k, v in c.measured.items():
        if k in c.timings:
            parts.append(fmt("{name}: a timing (on the page)", lang, name=tr(k, lang)))
        else:
            value = tr("absent", lang) if v is None else f"{v:.{digits}g}"
            parts.append(f"{tr(k, lang)} = {value}")
    return fmt("; ", lang).join(parts) or tr(c.result, lang)


def where_text(seed: str, line: int, lang: str) -> str:
    return fmt("seed {seed}, line {line}" if line else "seed {seed}", lang, seed=seed, line=line)


from posenc.explain.i18n.glossary import GLOSSARY  # noqa: E402

__all__ = ["GLOSSARY", "LANGS", "MISSING", "catalog", "check_lang", "fmt", "key", "numbers",
           "rule_text", "tr", "where_text"]  # fmt: skip
