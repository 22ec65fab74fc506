"""Numbers as words: the one place that spells them (num2words underneath), and the rules for bare numbers.

Why words and not digits for espeak: espeak's own number rules read "1984"
as "nineteen hundred eighty four", "3.50" as "three point five zero" and a
phone number as one huge cardinal; and digits hide what was actually said
(tests, ASR scoring, word timings). num2words does the spelling; this module
only picks the reading (cardinal, ordinal, year, digit by digit) and puts it
in US form: num2words' British "and" and its commas (which espeak would
pause at) are dropped, "one hundred and five" -> "one hundred five".

`rewrite()` runs after the rules that give numbers a meaning (money, dates,
times, units, phone numbers): what is still a number here is read from its
own shape and the word before it.
"""
from __future__ import annotations

import re
from typing import Final

#: Words after which a number 2000-2099 is a year ("in 2024"); 1100-1999 always reads as a year.
YEAR_CONTEXT: Final = frozenset(
    "in since by from until till through before after of year circa around during early late mid "
    "spring summer fall autumn winter january february march april may june july august september "
    "october november december".split())
DIGIT_RUN: Final = 10
"""Integers with this many digits or more (without thousands separators) are read digit by digit."""

_NOT_NOUNS: Final = frozenset("of for and or per in on at to a an the each is are was were".split())
_NEXT_WORD = re.compile(r"\s+([a-z]+)\b")

_DECADE = re.compile(r"(?<![\w.,])(?:(1[1-9]|20)|')?([1-9]|0)0s\b")
_RANGE = re.compile(r"(?<![\w.,-])(\d{1,4}|\d{1,3}(?:,\d{3})+)(?:-|–|\s–\s)(\d{1,4}|\d{1,3}(?:,\d{3})+)(?![\w.,-]?\d)")
_VERSION = re.compile(r"(?<![\w.])(v(?=\d))?(\d+(?:\.\d+)+)\b(?!\.\d)")
_FRACTION = re.compile(r"(?<![\w./])(\d{1,3})/(\d{1,3})(?![\w/]|\.\d)")
_ORDINAL = re.compile(r"(?<![\w.])(\d{1,3}(?:,\d{3})+|\d+)(st|nd|rd|th)\b", re.IGNORECASE)
_NUMBER = re.compile(r"(?<![\w.,])([-−])?(?:(\d{1,3}(?:,\d{3})+|\d+)(?:\.(\d+))?|\.(\d+))(?![\d.]\d|,\d|\d|(?!s\b)[A-Za-z])")
_GLUED = re.compile(r"\d+")
_RATIO = re.compile(r"(?<![\w.:])(\d{1,3}):(\d{1,3})(?![\w:]|\.\d)")  # what is left after clock times: "16:9"
_EMERGENCY = re.compile(r"(?<![\w.,$])(911)(?!\w|[.,]\d)")  # said digit by digit (the default voice is en-US)
_HOUSE = re.compile(r"(?<![\w.,])([1-9]\d{2,3})(?= (?:[A-Z][a-z]+ )+(?:Street|Avenue|Road|Drive|Boulevard|Lane|Way|Court|Place)\b)")


def num2words(n: int, **kw: str) -> str:
    """num2words' English words, imported on first use: the package imports every language (~14 ms)."""
    from num2words import num2words as spell

    return spell(n, lang="en", **kw)


def _us(words: str) -> str:
    return words.replace(",", "").replace(" and ", " ")


def cardinal(n: int | str) -> str:
    """1250 -> "one thousand two hundred fifty", -3 -> "minus three"; past 10**15, digit by digit."""
    s = str(n).replace(",", "")
    if len(s.lstrip("-")) > 15:  # num2words' scale words run out (and nobody says "octodecillion")
        return ("minus " if s.startswith("-") else "") + digits(s)
    return _us(num2words(int(s)))


def ordinal(n: int | str) -> str:
    """21 -> "twenty-first"."""
    s = str(n).replace(",", "")
    return f"number {digits(s)}" if len(s) > 15 else _us(num2words(int(s), to="ordinal"))


def digits(s: str) -> str:
    """"0958" -> "zero nine five eight"."""
    return " ".join(cardinal(d) for d in s if d.isdigit())


def decimal(whole: str, fraction: str | None, negative: bool = False) -> str:
    """("3", "14") -> "three point one four"; ("", "5") -> "point five"; long integers digit by digit."""
    whole = whole.replace(",", "")
    if not whole:
        words = f"point {digits(fraction or '')}"
    else:
        big = len(whole) >= DIGIT_RUN or (len(whole) > 1 and whole.startswith("0"))
        words = digits(whole) if big else cardinal(whole)
        if fraction:
            words += f" point {digits(fraction)}"
    return f"minus {words}" if negative else words


def year(n: int) -> str:
    """1984 -> "nineteen eighty-four", 1905 -> "nineteen oh five", 2005 -> "two thousand five"."""
    return _us(num2words(n, to="year")).replace("oh-", "oh ")


def house_number(n: str) -> str:
    """Street numbers in pairs: "221" -> "two twenty-one", "305" -> "three oh five", "1600" -> "sixteen hundred"."""
    if len(n) == 4:
        return year(int(n))
    head, tail = cardinal(n[0]), int(n[1:])
    return f"{head} hundred" if tail == 0 else f"{head} {'oh ' if tail < 10 else ''}{cardinal(tail)}"


def plural(words: str) -> str:
    """"nineteen ninety" -> "nineteen nineties", "two thousand" -> "two thousands"."""
    return words[:-1] + "ies" if words.endswith("y") else words + "s"


def number(text: str, negative: bool = False) -> str:
    """A numeral as written ("1,250", "3.5", "007") -> words."""
    whole, _, fraction = text.partition(".")
    return decimal(whole, fraction or None, negative)


def is_year(n: int, previous_word: str) -> bool:
    """A four-digit number without separators is a year when 1100-1999, or 2000-2099 after "in", "since"..."""
    return 1100 <= n <= 1999 or (2000 <= n <= 2099 and previous_word.lower().strip("(,") in YEAR_CONTEXT)


def attributive(m: re.Match[str]) -> bool:
    """A quantity used as an adjective ("a 16 GB card", "a $5 fee") takes the singular unit: "a sixteen gigabyte card"."""
    before = m.string[:m.start()].split()
    after = _NEXT_WORD.match(m.string, m.end())
    return bool(before and after) and before[-1].lower() in ("a", "an") and after.group(1) not in _NOT_NOUNS


def rewrite(text: str) -> str:
    """Decades, ranges, versions, fractions, ordinals, years, decimals, negatives, then any digits left."""
    text = _DECADE.sub(_decade, text)
    text = _RANGE.sub(_range, text)
    text = _VERSION.sub(_version, text)
    text = _FRACTION.sub(_fraction, text)
    text = _RATIO.sub(lambda m: f"{cardinal(m.group(1))} to {cardinal(m.group(2))}", text)
    text = _EMERGENCY.sub(lambda m: digits(m.group(1)), text)
    text = _ORDINAL.sub(lambda m: ordinal(m.group(1)), text)
    text = _HOUSE.sub(lambda m: house_number(m.group(1)), text)
    text = _NUMBER.sub(_number, text)
    return _GLUED.sub(lambda m: f" {number(m.group(0))} ", text)  # "MP3", "3D", "H2O"


def _previous_word(m: re.Match[str]) -> str:
    before = m.string[:m.start()].split()
    return before[-1] if before else ""


def _decade(m: re.Match[str]) -> str:
    century, tens = m.group(1), int(m.group(2))
    if century:
        return plural(year(int(f"{century}{tens}0")))
    return plural(cardinal(tens * 10)) if tens else m.group(0)  # "'90s", "80s"; "00s" stays


def _range(m: re.Match[str]) -> str:
    a, b = m.group(1), m.group(2)
    if "," not in a + b and len(a) == 4 and 1100 <= int(a) <= 2099:
        if len(b) == 4 and int(b) > int(a):
            return f"{year(int(a))} to {year(int(b))}"
        if len(b) == 2:
            return f"{year(int(a))} to {cardinal(b) if int(b) >= 10 else 'oh ' + cardinal(b)}"
    return f"{cardinal(a)} to {cardinal(b)}"


def _version(m: re.Match[str]) -> str:
    """"2.0.1" -> "two point zero point one", "v3.5" -> "version three point five"; "3.5" is a decimal."""
    parts = m.group(2).split(".")
    if not m.group(1) and len(parts) < 3:
        return m.group(0)
    return ("version " if m.group(1) else "") + " point ".join(cardinal(p) for p in parts)


_SAID_AS: Final = {"24/7": "twenty-four seven", "50/50": "fifty-fifty", "9/11": "nine eleven"}


def _fraction(m: re.Match[str]) -> str:
    """"3/4" -> "three quarters", "8/10" -> "eight out of ten" (a score), "24/7" as said."""
    top, bottom = int(m.group(1)), int(m.group(2))
    if m.group(0) in _SAID_AS:
        return _SAID_AS[m.group(0)]
    if bottom in (10, 100) and top <= bottom:
        return f"{cardinal(top)} out of {cardinal(bottom)}"
    if not 0 < top < bottom <= 16:
        return f"{cardinal(top)} over {cardinal(bottom)}"
    name = {2: "half", 4: "quarter"}.get(bottom) or ordinal(bottom)
    if top > 1:
        name = "halves" if bottom == 2 else name + "s"
    return f"{cardinal(top) if top > 1 else 'one'} {name}"


def _number(m: re.Match[str]) -> str:
    sign, whole, fraction = m.group(1), m.group(2) or "", m.group(3) or m.group(4)
    if not sign and not fraction and len(whole) == 4 and is_year(int(whole), _previous_word(m)):
        return year(int(whole))
    return decimal(whole, fraction, negative=bool(sign))
