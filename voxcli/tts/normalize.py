"""Text normalization before espeak-ng: make text say what a reader would say.

espeak-ng reads "Dr." as a sentence end ("Dr. Smith" becomes two
utterances), "$3.50" as "dollar three point five zero", "10:00" as "ten zero
zero", "1984" as "nineteen hundred eighty four", and stops a sentence at
"e.g., I". It also spells markup and drops emoji silently or oddly. This
layer rewrites those spans into plain words espeak reads right, and strips
what cannot be spoken (control characters, markup, emoji). Everything else
(ordinals, percentages, decimals, large numbers) espeak already reads well
and is left alone. Pure functions, no model: tested in isolation.
"""
from __future__ import annotations

import re
import unicodedata
from typing import Final

# Titles precede a name, so their period never ends a sentence.
_TITLES: Final = {
    "Mr": "Mister", "Mrs": "Missus", "Ms": "Miz", "Prof": "Professor", "Gen": "General",
    "Capt": "Captain", "Lt": "Lieutenant", "Col": "Colonel", "Sgt": "Sergeant", "Gov": "Governor",
    "Sen": "Senator", "Rep": "Representative", "Rev": "Reverend", "Mt": "Mount", "Fr": "Father",
}
# Abbreviations that can end a sentence: keep a period when the next word starts a sentence.
_ENDABLE: Final = {
    "etc.": "et cetera", "e.g.": "for example", "i.e.": "that is", "vs.": "versus", "Jr.": "Junior",
    "Sr.": "Senior", "Inc.": "Incorporated", "Ltd.": "Limited", "Co.": "Company", "approx.": "approximately",
    "a.m.": "AM", "p.m.": "PM", "A.M.": "AM", "P.M.": "PM",
}
_CURRENCIES: Final = {"$": ("dollar", "dollars", "cent", "cents"), "€": ("euro", "euros", "cent", "cents"),
                      "£": ("pound", "pounds", "penny", "pence")}
_SCALES: Final = "thousand|million|billion|trillion"
_QUOTES: Final = str.maketrans({"\u2018": "'", "\u2019": "'", "\u201a": "'", "\u201b": "'", "\u2032": "'",
                                "\u201c": '"', "\u201d": '"', "\u201e": '"', "\u2033": '"',
                                "\u00ab": '"', "\u00bb": '"', "\u00a0": " ", "\u2009": " ", "\u202f": " "})
# Symbols espeak reads well and that are not emoji.
_KEEP_SYMBOLS: Final = frozenset("°©®™")

_ANSI_ESCAPE = re.compile(r"\x1b(?:\[[0-?]*[ -/]*[@-~]|\][^\x07\x1b]*(?:\x07|\x1b\\)?|[@-Z\\-_])")
_HTML_TAG = re.compile(r"</?[A-Za-z][^<>]{0,200}>")
_MD_LINK = re.compile(r"!?\[([^\]\n]*)\]\([^)\s]*\)")
_MD_CODE = re.compile(r"`+")
_MD_EMPHASIS = re.compile(r"(\*{1,3}|_{2,3})(?=\S)(.+?)(?<=\S)\1")
_MD_HEADER = re.compile(r"^[ \t]*#{1,6}[ \t]+", re.MULTILINE)
_MD_BULLET = re.compile(r"^[ \t]*[-*+][ \t]+", re.MULTILINE)
_PRICE = re.compile(
    rf"([$€£])\s?(\d{{1,3}}(?:,\d{{3}})+|\d+)(?:\.(\d{{1,2}}))?(\s?(?:{_SCALES})\b)?(?!\.?\d)")
_TIME = re.compile(r"\b([01]?\d|2[0-3]):([0-5]\d)\b(?!:\d)")
_YEAR = re.compile(r"(?<![\d$€£.,:/-])\b(1[1-9]\d\d)(s?)\b(?![.,:/]?\d|%)")
# Mr./Mrs./Ms./Prof. are always titles; the others only before a capitalized word.
_TITLE = re.compile(r"\b(?:(Mrs|Mr|Ms|Prof)\.|(" + "|".join(_TITLES) + r")\.(?=\s+[A-Z]))")
_DR = re.compile(r"\b(Dr|St)\.(?=\s|$)")
_ENDABLE_RE = re.compile(
    r"(?<![\w.])(" + "|".join(re.escape(k) for k in sorted(_ENDABLE, key=len, reverse=True)) + r")(,?)(?=(\s+\S|\s*$))")
_SPACES = re.compile(r"[ \t]+")


def normalize_text(text: str) -> str:
    """Rewrite `text` so espeak-ng reads it as a person would; never raises."""
    text = strip_unspeakable(text)
    text = strip_markup(text)
    text = _YEAR.sub(_year, text)  # before prices: their output has bare numbers
    text = _PRICE.sub(_price, text)
    text = _TIME.sub(_time, text)
    text = _TITLE.sub(lambda m: _TITLES[m.group(1) or m.group(2)], text)
    text = _DR.sub(_dr_or_st, text)
    text = _ENDABLE_RE.sub(_endable, text)
    return _SPACES.sub(" ", text).strip()


def strip_unspeakable(text: str) -> str:
    """Drop control/format characters and emoji; fold typographic quotes and spaces to ASCII."""
    out = []
    for ch in _ANSI_ESCAPE.sub("", text).translate(_QUOTES):  # terminal colours from piped tools
        if ch in "\n\t":
            out.append(ch)
            continue
        cat = unicodedata.category(ch)
        if cat == "Cc":
            out.append(" ")
        elif cat in ("Cf", "Cs", "Co", "Cn", "Mn") and not _is_combining_letter_mark(ch, cat):
            continue  # zero-width joiners, variation selectors, bidi marks, surrogates
        elif cat in ("So", "Sk") and ch not in _KEEP_SYMBOLS:
            out.append(" ")  # emoji and pictographs
        else:
            out.append(ch)
    return "".join(out)


def _is_combining_letter_mark(ch: str, cat: str) -> bool:
    # accents (é as e + U+0301) are speech; variation selectors and emoji modifiers are not
    return cat == "Mn" and not (0xFE00 <= ord(ch) <= 0xFE0F or 0x1F3FB <= ord(ch) <= 0x1F3FF)


def strip_markup(text: str) -> str:
    """Remove HTML tags and Markdown syntax, keeping the words."""
    text = _HTML_TAG.sub(" ", text)
    text = _MD_LINK.sub(r"\1", text)
    text = _MD_HEADER.sub("", text)
    text = _MD_BULLET.sub("", text)
    text = _MD_EMPHASIS.sub(r"\2", text)
    return _MD_CODE.sub("", text)


def _price(m: re.Match[str]) -> str:
    one, many, cent, cents = _CURRENCIES[m.group(1)]
    whole = m.group(2).replace(",", "")
    fraction = m.group(3)
    scale = (m.group(4) or "").strip()
    if scale:  # "$1.5 million" -> "1.5 million dollars"
        number = whole + (f".{fraction}" if fraction else "")
        return f"{number} {scale} {many}"
    parts = []
    if int(whole) or not fraction:
        parts.append(f"{whole} {one if int(whole) == 1 else many}")
    if fraction:
        value = int(fraction.ljust(2, "0"))
        if value:
            parts.append(f"{value} {cent if value == 1 else cents}")
    return " and ".join(parts)


def _time(m: re.Match[str]) -> str:
    hour, minute = int(m.group(1)), int(m.group(2))
    if minute == 0:
        return f"{hour} o'clock"
    if minute < 10:
        return f"{hour} oh {minute}"
    return f"{hour} {minute}"


def _year(m: re.Match[str]) -> str:
    """1984 -> "19 84", 1905 -> "19 oh 5", 1900 -> "19 hundred", 1990s -> "19 90s"."""
    year, plural = m.group(1), m.group(2)
    head, tail = year[:2], int(year[2:])
    if tail == 0:
        return f"{head} hundred{plural}"
    if tail < 10:
        return f"{head} oh {tail}{plural}"
    return f"{head} {tail}{plural}"


def _dr_or_st(m: re.Match[str]) -> str:
    """"Dr. Smith" -> Doctor, "Elm Dr." -> Drive; "St. Louis" -> Saint, "Elm St." -> Street."""
    before = m.string[:m.start()].split()
    after = m.string[m.end():].lstrip()
    place_before = bool(before) and before[-1][:1].isupper() and not before[-1].endswith((".", "!", "?"))
    if after[:1].isupper() and not place_before:
        return "Doctor" if m.group(1) == "Dr" else "Saint"
    place = "Drive" if m.group(1) == "Dr" else "Street"
    return place + ("." if not after or after[:1].isupper() else "")


def _endable(m: re.Match[str]) -> str:
    """Expand; keep one period when the next word starts a new sentence (or the text ends)."""
    words = _ENDABLE[m.group(1)]
    comma = m.group(2)
    after = m.string[m.end():].lstrip()
    if comma:
        return words + comma
    if not after or (after[:1].isupper() and m.group(1) not in ("e.g.", "i.e.", "vs.")):
        return words + "."
    return words
