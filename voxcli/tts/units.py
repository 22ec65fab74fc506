"""Quantities with units and percentages: "5 km" -> "five kilometers", "20°C" -> "twenty degrees Celsius".

Only after a number: a lone "m" or "g" is a letter, "5 m" is five meters.
Symbols are matched case-sensitively ("MB" megabytes, "mb" left alone) and
the unit is singular only for exactly "1" ("1 kg", but "1.5 kg" is plural,
as a reader says it). A range keeps one unit: "5-10 km" -> "five to ten kilometers".
"""
from __future__ import annotations

import re
from typing import Final

from voxcli.tts.numbers import attributive, number

#: written -> (singular, plural)
UNITS: Final[dict[str, tuple[str, str]]] = {
    "%": ("percent", "percent"), "°C": ("degree Celsius", "degrees Celsius"),
    "°F": ("degree Fahrenheit", "degrees Fahrenheit"), "°": ("degree", "degrees"),
    "km": ("kilometer", "kilometers"), "m": ("meter", "meters"), "cm": ("centimeter", "centimeters"),
    "mm": ("millimeter", "millimeters"), "mi": ("mile", "miles"), "ft": ("foot", "feet"),
    "kg": ("kilogram", "kilograms"), "g": ("gram", "grams"), "mg": ("milligram", "milligrams"),
    "lb": ("pound", "pounds"), "lbs": ("pound", "pounds"), "oz": ("ounce", "ounces"),
    "L": ("liter", "liters"), "l": ("liter", "liters"), "ml": ("milliliter", "milliliters"),
    "mL": ("milliliter", "milliliters"),
    "km/h": ("kilometer per hour", "kilometers per hour"), "kph": ("kilometer per hour", "kilometers per hour"),
    "mph": ("mile per hour", "miles per hour"), "m/s": ("meter per second", "meters per second"),
    "KB": ("kilobyte", "kilobytes"), "kB": ("kilobyte", "kilobytes"), "MB": ("megabyte", "megabytes"),
    "GB": ("gigabyte", "gigabytes"), "TB": ("terabyte", "terabytes"),
    "kbps": ("kilobit per second", "kilobits per second"), "Mbps": ("megabit per second", "megabits per second"),
    "Gbps": ("gigabit per second", "gigabits per second"),
    "Hz": ("hertz", "hertz"), "kHz": ("kilohertz", "kilohertz"), "MHz": ("megahertz", "megahertz"),
    "GHz": ("gigahertz", "gigahertz"), "W": ("watt", "watts"), "kW": ("kilowatt", "kilowatts"),
    "kWh": ("kilowatt hour", "kilowatt hours"), "V": ("volt", "volts"), "mAh": ("milliamp hour", "milliamp hours"),
    "ms": ("millisecond", "milliseconds"), "sec": ("second", "seconds"), "min": ("minute", "minutes"),
    "h": ("hour", "hours"), "hr": ("hour", "hours"), "hrs": ("hour", "hours"),
}
_NUM: Final = r"\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+(?:\.\d+)?|\.\d+"
_UNIT: Final = "|".join(re.escape(u) for u in sorted(UNITS, key=len, reverse=True))
_QUANTITY = re.compile(
    rf"(?<![\w.,])([-−])?({_NUM})(?:(?:-|–| to )([-−])?({_NUM}))?\s?({_UNIT})(?![\w/°])")


_FEET_INCHES = re.compile(r"(?<![\w.])(\d)['’](\d{1,2})(?:\"|”|'')")  # 5'10" -> five feet ten inches


def rewrite(text: str) -> str:
    text = _FEET_INCHES.sub(lambda m: f"{number(m.group(1))} {'foot' if m.group(1) == '1' else 'feet'} "
                                      f"{number(m.group(2))} inch{'' if m.group(2) == '1' else 'es'}", text)
    return _QUANTITY.sub(_quantity, text)


def _quantity(m: re.Match[str]) -> str:
    unit = m.group(5)
    singular, plural_ = UNITS[unit]
    first = number(m.group(2), negative=bool(m.group(1)))
    if m.group(4):
        words = f"{first} to {number(m.group(4), negative=bool(m.group(3)))} {plural_}"
    else:
        one = (m.group(2) == "1" and not m.group(1)) or attributive(m)
        words = f"{first} {singular if one else plural_}"
    return words

