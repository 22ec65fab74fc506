"""Prices as a reader says them: "$3.50" -> "three dollars and fifty cents", "£1.2m" -> "one point two million pounds".

Why not num2words' `to="currency"`: it says "three dollars, fifty cents" (the
comma is a pause in espeak) and knows no scale suffixes ("1.2m", "$5bn").
The amounts themselves are spelled by `voxcli.tts.numbers`.
"""
from __future__ import annotations

import re
from typing import Final

from voxcli.tts.numbers import attributive, cardinal, number

#: symbol -> (one, many, one hundredth, many hundredths)
CURRENCIES: Final = {
    "$": ("dollar", "dollars", "cent", "cents"), "€": ("euro", "euros", "cent", "cents"),
    "£": ("pound", "pounds", "penny", "pence"), "¥": ("yen", "yen", "sen", "sen"),
    "₹": ("rupee", "rupees", "paisa", "paise"),
}
SCALES: Final = {"k": "thousand", "K": "thousand", "m": "million", "M": "million", "mn": "million",
                 "bn": "billion", "b": "billion", "B": "billion", "tn": "trillion",
                 "thousand": "thousand", "million": "million", "billion": "billion", "trillion": "trillion"}
_SYMBOL: Final = "".join(re.escape(c) for c in CURRENCIES)
_AMOUNT: Final = r"(\d{1,3}(?:,\d{3})+|\d+)(?:\.(\d+))?"
_SCALE: Final = "|".join(sorted(SCALES, key=len, reverse=True))

_PREFIXED = re.compile(rf"(?<![\w.])([-−])?([{_SYMBOL}])\s?{_AMOUNT}(?:\s?({_SCALE})\b)?(?![\d])")
_SUFFIXED = re.compile(rf"(?<![\w.,]){_AMOUNT}\s?([{_SYMBOL}])(?![\w{_SYMBOL}])")  # "12 €", "12€"
_CENTS = re.compile(r"(?<![\w.,])(\d+)\s?¢")


def rewrite(text: str) -> str:
    text = _PREFIXED.sub(_prefixed, text)
    text = _SUFFIXED.sub(lambda m: say_amount(m.group(3), m.group(1), m.group(2), adjective=attributive(m)), text)
    return _CENTS.sub(lambda m: f"{cardinal(m.group(1))} cent{'' if m.group(1) == '1' else 's'}", text)


def say_amount(symbol: str, whole: str, fraction: str | None, scale: str = "", negative: bool = False,
               adjective: bool = False) -> str:
    """("$", "3", "50") -> "three dollars and fifty cents"; ("£", "1", "2", "million") -> "one point two million pounds".

    `adjective`: "a $5 fee" -> "a five dollar fee" (whole amounts only)."""
    one, many, cent, cents = CURRENCIES[symbol]
    if adjective and (scale or not (fraction or "").strip("0")):
        many, fraction = one, (fraction if scale else None)
    whole = whole.replace(",", "")
    sign = "minus " if negative else ""
    if scale:
        return f"{sign}{number(whole + (f'.{fraction}' if fraction else ''))} {scale} {many}"
    if fraction is not None and len(fraction) > 2:  # "$0.005": not cents, a decimal amount
        return f"{sign}{number(f'{whole}.{fraction}')} {many}"
    hundredths = int(fraction.ljust(2, "0")) if fraction else 0
    parts = []
    if int(whole) or not hundredths:
        parts.append(f"{cardinal(whole)} {one if int(whole) == 1 else many}")
    if hundredths:
        parts.append(f"{cardinal(hundredths)} {cent if hundredths == 1 else cents}")
    return sign + " and ".join(parts)


def _prefixed(m: re.Match[str]) -> str:
    scale = SCALES[m.group(5)] if m.group(5) else ""
    return say_amount(m.group(2), m.group(3), m.group(4), scale, negative=bool(m.group(1)), adjective=attributive(m))
