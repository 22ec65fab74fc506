"""Addresses people read out: URLs, e-mails, @handles, #hashtags and phone numbers.

Read as a person reads them aloud, not character by character: the scheme
and "www." are dropped, the query string is dropped, "." is "dot", "/" is
"slash"; "jane.doe@example.com" -> "jane dot doe at example dot com". Phone
numbers are digit by digit in their groups, with a comma (a short pause)
between groups. These run first, before any rule reads the dots and digits
inside them as decimals, dates or sentence ends.
"""
from __future__ import annotations

import re
from typing import Final

from voxcli.tts.numbers import cardinal, digits

TLDS: Final = "com|org|net|edu|gov|io|dev|ai|app|co|uk|us|de|fr|nl|eu|info|me|tv|ly|sh|ca|au|in"
_TRAIL: Final = ".,;:!?)]}'\""

_URL = re.compile(r"\b(?:https?://|ftp://|www\.)[A-Za-z0-9][^\s<>\"]*", re.IGNORECASE)
_DOMAIN = re.compile(rf"(?<![\w./-])(?:[a-z0-9-]+\.)+(?:{TLDS})\b(?:/[^\s<>\"]*)?", re.IGNORECASE)
_EMAIL = re.compile(r"(?<![\w.+-])([\w.+-]+)@((?:[\w-]+\.)+[A-Za-z]{2,})\b")
_HANDLE = re.compile(r"(?<![\w@])@([A-Za-z_]\w{0,29})\b")
_HASHTAG = re.compile(r"(?<![\w&#])#([A-Za-z]\w*)")
_NUMBER_SIGN = re.compile(r"(?<![\w&#])#\s?(\d+)\b")
_SHARP = re.compile(r"\b([A-G])#(?!\w)")
_CAMEL = re.compile(r"(?<=[a-z])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])|_+")
_PHONE = re.compile(
    r"(?<![\w+])(?:(\+\d{1,3})[\s.-]?)?(?:\((\d{3})\)\s?|(\d{3})[\s.-])(\d{3})[\s.-](\d{4})(?![\w-]|\.\d)"
    r"|(?<![\w+])(\+\d{1,3})((?:[\s-]\d{1,4}){2,5})(?![\w-]|\.\d)"
    r"|(?<![\w+.,-])([2-9]\d{2})-(\d{4})(?![\w-]|\.\d)")  # local "555-1234" (a range starts 1xx or is shorter)
_SPOKEN: Final = {".": " dot ", "/": " slash ", "-": " dash ", "_": " underscore ", "+": " plus ",
                  "@": " at ", ":": " colon ", "~": " tilde ", "=": " equals ", "&": " and "}


def rewrite(text: str) -> str:
    text = _EMAIL.sub(lambda m: f"{_spell(m.group(1))} at {_spell(m.group(2))}", text)
    text = _URL.sub(_url, text)
    text = _DOMAIN.sub(_url, text)
    text = _PHONE.sub(_phone, text)
    text = _HANDLE.sub(lambda m: f"at {_words(m.group(1))}", text)
    text = _NUMBER_SIGN.sub(lambda m: f"number {cardinal(m.group(1))}", text)
    text = _SHARP.sub(r"\1 sharp", text)
    return _HASHTAG.sub(lambda m: f"hashtag {_words(m.group(1))}", text)


def _spell(part: str) -> str:
    """Separators as words, digits as digits ("jane.doe2" -> "jane dot doe two")."""
    out = "".join(_SPOKEN.get(ch, ch) for ch in part)
    out = re.sub(r"\d+", lambda m: f" {digits(m.group(0)) if len(m.group(0)) > 2 else cardinal(m.group(0))} ", out)
    return " ".join(out.split())


def _url(m: re.Match[str]) -> str:
    raw = m.group(0)
    stripped = raw.rstrip(_TRAIL)  # "see example.com." keeps its sentence end
    tail = raw[len(stripped):]
    url = re.sub(r"^(?:https?|ftp)://", "", stripped, flags=re.IGNORECASE)
    url = re.sub(r"^www\.", "", url, flags=re.IGNORECASE)
    url = re.split(r"[?#]", url, maxsplit=1)[0].rstrip("/")
    return _spell(url) + tail


def _words(name: str) -> str:
    """"StreamingTTS" -> "Streaming TTS", "snake_case" -> "snake case"."""
    return " ".join(_CAMEL.sub(" ", name).split())


def _phone(m: re.Match[str]) -> str:
    if m.group(6):  # international: "+44 20 7946 0958"
        groups = [m.group(6)] + m.group(7).replace("-", " ").split()
    elif m.group(8):
        groups = [m.group(8), m.group(9)]
    else:
        groups = [g for g in (m.group(1), m.group(2) or m.group(3), m.group(4), m.group(5)) if g]
    return ", ".join(("plus " if g.startswith("+") else "") + digits(g) for g in groups)
