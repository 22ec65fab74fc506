"""Dates and clock times as a reader says them.

"2026-12-01" -> "December first, twenty twenty-six"; "Dec. 1" arrives here as
"December 1" (the shared abbreviation table expands "Dec.") and becomes
"December first"; "10:30" -> "ten thirty", "10:05" -> "ten oh five",
"8:15 pm" -> "eight fifteen PM", "20:00" -> "twenty hundred".

Slashed dates are ambiguous: "1/12/2026" is January 12 in the US and
1 December in most other places. `DateOrder` says which; the default is the
US reading because the default voice is en-US. A slashed date that is only
valid in the other order ("25/12/2026") is read in that order.
"""
from __future__ import annotations

import re
from enum import Enum
from typing import Final

from voxcli.tts.numbers import cardinal, ordinal, year


class DateOrder(Enum):
    MDY = "mdy"
    """1/12/2026 is January twelfth (en-US)."""
    DMY = "dmy"
    """1/12/2026 is the first of December (en-GB, most of Europe)."""


DEFAULT_DATE_ORDER: Final = DateOrder.MDY

MONTHS: Final = ("January", "February", "March", "April", "May", "June", "July", "August", "September",
                 "October", "November", "December")
_SHORT: Final = {m[:3]: m for m in MONTHS} | {"Sept": "September"}
_MONTH: Final = "|".join(MONTHS) + "|" + "|".join(k for k in _SHORT if k != "May")

_ISO = re.compile(r"(?<![\w.-])(\d{4})-(\d{2})-(\d{2})(?![\w-]|\.\d)")
_SLASHED = re.compile(r"(?<![\w./])(\d{1,2})[/.](\d{1,2})[/.](\d{4}|\d{2})(?![\w/]|\.\d)")
_MONTH_DAY = re.compile(rf"\b({_MONTH})\.? (\d{{1,2}})(?:st|nd|rd|th)?\b(?!:\d)(?:(,?) (\d{{4}})\b)?")
_DAY_MONTH = re.compile(rf"(?<![\w.,])(\d{{1,2}})(?:st|nd|rd|th)? (?:of )?({_MONTH})\b(?:,? (\d{{4}})\b)?")
_TIME = re.compile(r"(?<![\w.:])([01]?\d|2[0-3]):([0-5]\d)(?::([0-5]\d))?(?:\s?([AaPp])[Mm]\b)?(?![\w:]|\.\d)")
_DOTTED_TIME = re.compile(r"(?<![\w.:])(1[0-2]|0?[1-9])\.([0-5]\d)\s?(?=[AaPp]\.?[Mm]\b)")  # "8.15 pm" (British)
_HOUR_AMPM = re.compile(r"(?<![\w.:])(1[0-2]|0?[1-9])\s?([AaPp])[Mm]\b")


def rewrite(text: str, order: DateOrder = DEFAULT_DATE_ORDER) -> str:
    """Dates first (an ISO date has no colon, a time has no dash), then clock times."""
    text = _ISO.sub(_iso, text)
    text = _SLASHED.sub(lambda m: _slashed(m, order), text)
    text = _MONTH_DAY.sub(_month_day, text)
    text = _DAY_MONTH.sub(_day_month, text)
    text = _DOTTED_TIME.sub(r"\1:\2 ", text)
    text = _TIME.sub(_time, text)
    return _HOUR_AMPM.sub(lambda m: f"{cardinal(m.group(1))} {m.group(2).upper()}M", text)


def say_date(y: int | None, month: int, day: int, order: DateOrder = DEFAULT_DATE_ORDER) -> str:
    """(2026, 12, 1) -> "December first, twenty twenty-six" (MDY) / "the first of December, twenty twenty-six"."""
    words = (f"{MONTHS[month - 1]} {ordinal(day)}" if order is DateOrder.MDY
             else f"the {ordinal(day)} of {MONTHS[month - 1]}")
    return f"{words}, {year(y)}" if y is not None else words


def say_time(hour: int, minute: int, second: int | None = None, ampm: str = "") -> str:
    """10:05 -> "ten oh five"; 10:00 -> "ten o'clock"; 20:00 -> "twenty hundred"; 8:15 pm -> "eight fifteen PM"."""
    h = cardinal(hour)
    if minute == 0 and not second:
        if ampm:
            words = h
        elif hour == 0:
            words = "midnight"
        else:
            words = f"{h} hundred" if hour > 12 else f"{h} o'clock"
    else:
        words = f"{'zero' if hour == 0 else h} {'oh ' if minute < 10 else ''}{cardinal(minute)}"
        words = words.replace("oh zero", "hundred") if minute == 0 else words
    if second:
        words += f" and {cardinal(second)} second{'s' if second > 1 else ''}"
    return f"{words} {ampm}".strip()


def _valid(month: int, day: int) -> bool:
    return 1 <= month <= 12 and 1 <= day <= 31


def _iso(m: re.Match[str]) -> str:
    y, month, day = int(m.group(1)), int(m.group(2)), int(m.group(3))
    return say_date(y, month, day) if _valid(month, day) else m.group(0)


def _slashed(m: re.Match[str], order: DateOrder) -> str:
    a, b, y = int(m.group(1)), int(m.group(2)), m.group(3)
    full = int(y) if len(y) == 4 else (2000 + int(y) if int(y) < 70 else 1900 + int(y))
    first = (a, b) if order is DateOrder.MDY else (b, a)  # (month, day)
    if _valid(*first):
        return say_date(full, *first, order=order)
    if _valid(first[1], first[0]):  # "25/12/2026" in MDY: only the other order is a date
        other = DateOrder.DMY if order is DateOrder.MDY else DateOrder.MDY
        return say_date(full, first[1], first[0], order=other)
    return m.group(0)


def _month_number(name: str) -> int:
    return MONTHS.index(_SHORT.get(name, name)) + 1


def _month_day(m: re.Match[str]) -> str:
    month, day = _month_number(m.group(1)), int(m.group(2))
    if not _valid(month, day):
        return m.group(0)
    y = int(m.group(4)) if m.group(4) else None
    return say_date(y, month, day)


def _day_month(m: re.Match[str]) -> str:
    day, month = int(m.group(1)), _month_number(m.group(2))
    if not _valid(month, day):
        return m.group(0)
    y = int(m.group(3)) if m.group(3) else None
    words = say_date(y, month, day, DateOrder.DMY)
    return words[4:] if m.string[:m.start()].lower().endswith("the ") else words  # "the 3rd of March"


def _time(m: re.Match[str]) -> str:
    second = int(m.group(3)) if m.group(3) else None
    ampm = f"{m.group(4).upper()}M" if m.group(4) else ""
    return say_time(int(m.group(1)), int(m.group(2)), second, ampm)
