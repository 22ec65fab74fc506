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

from voxcli.tts import abbreviations
from voxcli.tts.abbreviations import Kind

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
_ABBREVIATION = re.compile(r"(?<![\w.])(" + "|".join(
    re.escape(a.written) for a in sorted(abbreviations.TABLE, key=lambda a: len(a.written), reverse=True)
) + r")\.(,?)(?=\s|$)")
_SPACES = re.compile(r"[ \t]+")


def normalize_text(text: str) -> str:
    """Rewrite `text` so espeak-ng reads it as a person would; never raises."""
    text = strip_unspeakable(text)
    text = strip_markup(text)
    text = _YEAR.sub(_year, text)  # before prices: their output has bare numbers
    text = _PRICE.sub(_price, text)
    text = _TIME.sub(_time, text)
    text = _ABBREVIATION.sub(_abbreviation, text)
    return _SPACES.sub(" ", text).strip()


def speakable(text: str) -> str:
    """The words to give the voice for one chunk, or "" when there is nothing to say (whitespace, emoji).

    This is the one pass over the text: markup and unspeakable characters are
    stripped here once, so the streamer hands the result to the voice with its
    own normalization off.
    """
    text = normalize_text(text)
    return text if any(ch.isalnum() for ch in text) else ""


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


def _say_pair(head: int | str, tail: int, zero: str, suffix: str = "") -> str:
    """Times and years are read the same way: "10 oh 5" / "19 oh 5", "10 30" / "19 84"; a zero tail is `zero`."""
    if tail == 0:
        return f"{head} {zero}{suffix}"
    if tail < 10:
        return f"{head} oh {tail}{suffix}"
    return f"{head} {tail}{suffix}"


def _time(m: re.Match[str]) -> str:
    return _say_pair(int(m.group(1)), int(m.group(2)), "o'clock")


def _year(m: re.Match[str]) -> str:
    """1984 -> "19 84", 1905 -> "19 oh 5", 1900 -> "19 hundred", 1990s -> "19 90s"."""
    year, plural = m.group(1), m.group(2)
    return _say_pair(year[:2], int(year[2:]), "hundred", plural)


def _abbreviation(m: re.Match[str]) -> str:
    """Expand from the shared table; keep one period exactly where the chunker cuts (a sentence end)."""
    after = m.string[m.end():].lstrip()
    before = m.string[:m.start()].split()
    previous = before[-1] if before else ""
    a = abbreviations.find(m.group(1), after)
    if a is None:
        return m.group(0)  # "No." not before a number is the word "no"
    if a.kind is Kind.TITLE and not (a.always or a.place) and not after[:1].isupper():
        return m.group(0)  # "Gen." / "Col." before a lowercase word may be something else
    word = a.place if a.place and abbreviations.reads_as_place(a, previous, after) else a.spoken
    if m.group(2):
        return word + m.group(2)
    return word + ("." if abbreviations.ends_sentence(a, previous, after) else "")
