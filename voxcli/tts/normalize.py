"""Text normalization before espeak-ng: the words a reader would say, in plain letters.

espeak-ng reads "Dr." as a sentence end ("Dr. Smith" becomes two
utterances), "$3.50" as "dollar three point five zero", "10:00" as "ten zero
zero", "1984" as "nineteen hundred eighty four", a phone number as one huge
number and a URL letter by letter. This module is the one normalization
path (the streamer calls `speakable` once per chunk, the voice's own pass is
off): it strips what cannot be spoken (control characters, markup, emoji),
then hands the text through small rule modules, in an order where each rule
sees the characters it needs before a later one turns them into words:

1. `contacts`: URLs, e-mails, phone numbers, @handles, #hashtags (their dots and digits are not numbers);
2. the shared abbreviation table (`abbreviations`, also used by the chunker): "Dr.", "No. 5", "Dec. 1";
3. `dates`: dates and clock times; 4. `money`; 5. `units` and percentages;
6. `numbers`: years, ranges, ordinals, decimals, negatives, any digits left;
7. `symbols`: "&", "+", "=", and Roman numerals in names.

Every number leaves as words (num2words spells them, `voxcli.tts.numbers`),
so the output is exactly what is spoken. Pure functions, no model.
"""
from __future__ import annotations

import re
import unicodedata
from typing import Final

from voxcli.tts import abbreviations, contacts, dates, money, numbers, symbols, units
from voxcli.tts.abbreviations import Kind
from voxcli.tts.alignment import SpokenWord, align
from voxcli.tts.dates import DEFAULT_DATE_ORDER, DateOrder

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
_MD_LINE_START = re.compile(r"^[ \t]*(?:(?:#{1,6}|[-*+])[ \t]+)+", re.MULTILINE)  # headers, bullets, "- - item"
_ABBREVIATION = re.compile(r"(?<![\w.])(" + "|".join(
    re.escape(a.written) for a in sorted(abbreviations.TABLE, key=lambda a: len(a.written), reverse=True)
) + r")\.(,?)(?=\s|$)")
_SPACES = re.compile(r"[ \t]+")


def normalize_text(text: str, date_order: DateOrder = DEFAULT_DATE_ORDER) -> str:
    """Rewrite `text` into the words a person would say; never raises.

    `date_order`: how to read "1/12/2026" (`DateOrder.MDY`, the default: January twelfth;
    `DateOrder.DMY`: the first of December).
    """
    text = strip_markup(strip_unspeakable(text))
    text = contacts.rewrite(text)
    text = _ABBREVIATION.sub(_abbreviation, text)  # before numbers: "No. 5" and "Dec. 1" need the digit
    text = dates.rewrite(text, date_order)
    text = money.rewrite(text)
    text = units.rewrite(text)
    text = numbers.rewrite(text)
    text = symbols.rewrite(text)
    return _SPACES.sub(" ", text).strip()


def speakable(text: str, date_order: DateOrder = DEFAULT_DATE_ORDER) -> str:
    """The words to give the voice for one chunk, or "" when there is nothing to say (whitespace, emoji).

    This is the one pass over the text: markup and unspeakable characters are
    stripped here once, so the streamer hands the result to the voice with its
    own normalization off.
    """
    text = normalize_text(text, date_order)
    return text if any(ch.isalnum() for ch in text) else ""


def spoken_words(text: str, date_order: DateOrder = DEFAULT_DATE_ORDER) -> list[SpokenWord]:
    """The words `speakable(text)` gives the voice, each with the span of `text` it was read from
    ("$3.50" -> three, dollars, and, fifty, cents, all pointing at "$3.50"): for word timings and subtitles."""
    return align(text, speakable(text, date_order))


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
    text = _MD_LINE_START.sub("", text)
    text = _MD_EMPHASIS.sub(r"\2", text)
    return _MD_CODE.sub("", text)


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
