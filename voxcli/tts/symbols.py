"""Symbols and Roman numerals in names: "&" -> "and", "Henry VIII" -> "Henry the Eighth".

Runs after numbers are words, so "1 + 1 = 2" arrives as "one + one = two".
"<" and ">" are left alone (espeak skips them; a reader rarely says them).

Roman numerals are only read after a capitalized word and only from II to
XXXIX (a lone "I" is the pronoun, "X" in "Malcolm X" is a name, "MIX" and
"CD" are words): after a monarch's or a pope's name they are ordinals
("Louis XIV" -> "Louis the Fourteenth"), after a word that counts parts they
are cardinals ("World War II" -> "World War Two", "Chapter IV" -> "Chapter Four").
"""
from __future__ import annotations

import re
from typing import Final

from voxcli.tts.numbers import cardinal, ordinal

#: Words after which a Roman numeral is a number, not a regnal ordinal.
COUNTED: Final = frozenset(
    "War Chapter Part Volume Act Book Phase Type Level Class Title Section Season Episode Stage Grade "
    "Article Appendix Bowl Mark Schedule Rocky Apollo Gemini Vatican Fantasy Wars Edition Tier Division".split())
_ROMAN_VALUES: Final = {"I": 1, "V": 5, "X": 10}

_ROMAN = re.compile(r"\b([A-Z][a-z]+) (X{0,3}(?:IX|IV|V?I{0,3}))\b(?!['’]?\w)")
_SYMBOLS: Final = ((re.compile(r"\s*&\s*"), " and "), (re.compile(r"\s*\+\s*"), " plus "),
                   (re.compile(r"\s*=\s*"), " equals "), (re.compile(r"\s*×\s*"), " times "),
                   (re.compile(r"\s*÷\s*"), " divided by "), (re.compile(r"\s*%"), " percent"),
                   (re.compile(r"\s*@\s*"), " at "), (re.compile(r"~\s*(?=\w)"), "about "),
                   (re.compile(r"~"), " "))  # "~5": about five; a lone "~" is not said


_SPACE_BEFORE_PUNCT = re.compile(r"\b(and|plus|equals|times|by|percent|at) +(?=[,;:!?.](?:\s|$))")  # "C++," -> "C plus plus,"


def roman_value(numeral: str) -> int:
    """"XIV" -> 14 (subtractive pairs only as in IV, IX)."""
    total = 0
    for i, ch in enumerate(numeral):
        value = _ROMAN_VALUES[ch]
        nxt = _ROMAN_VALUES[numeral[i + 1]] if i + 1 < len(numeral) else 0
        total += -value if value < nxt else value
    return total


def rewrite(text: str) -> str:
    text = _ROMAN.sub(_roman, text)
    for pattern, words in _SYMBOLS:
        text = pattern.sub(words, text)
    return _SPACE_BEFORE_PUNCT.sub(r"\1", text)


def _roman(m: re.Match[str]) -> str:
    name, numeral = m.group(1), m.group(2)
    if len(numeral) < 2:
        return m.group(0)
    n = roman_value(numeral)
    if name in COUNTED:
        return f"{name} {cardinal(n).title()}"
    return f"{name} the {ordinal(n).title()}"
