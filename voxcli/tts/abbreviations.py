"""The ONE abbreviation table: where a "." is not a sentence end, and what to say instead.

Why one table: the chunker (where may a chunk end?) and the normalizer (what
does espeak read?) used to keep two lists that disagreed: "Gov. Smith arrived"
was cut after "Gov." and "Gov." was never expanded. Both now ask this module,
with the same three facts (the token, the word before it, the next character),
so a period the chunker does not cut at is one the normalizer expands without
a period, and a period it cuts at ("etc. Then", "Elm Dr. Then") is kept.
"""
from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import Final


class Kind(Enum):
    TITLE = "title"
    """Precedes a name ("Gov. Smith"): never ends a sentence."""
    INSIDE = "inside"
    """Latin and friends inside a sentence ("e.g.", "vs."): never ends a sentence."""
    ENDABLE = "endable"
    """May end a sentence ("etc.", "Jr.", "p.m."): it does when the next word is capitalized."""
    BEFORE_NUMBER = "before-number"
    """An abbreviation only before a number ("No. 5", "p. 12"); elsewhere an ordinary word."""


@dataclass(frozen=True)
class Abbreviation:
    written: str
    """As written, without the final period ("Gov", "e.g", "p.m")."""
    spoken: str
    """What the normalizer gives espeak instead."""
    kind: Kind
    always: bool = False
    """A title expanded before any word, not only before a capitalized name ("Mr. and Mrs.")."""
    place: str | None = None
    """Reading after a street name ("Elm St." is Street, "St. Louis" is Saint)."""


def _t(written: str, spoken: str, **kw: object) -> Abbreviation:
    return Abbreviation(written, spoken, Kind.TITLE, **kw)  # type: ignore[arg-type]


TABLE: Final[tuple[Abbreviation, ...]] = (
    _t("Mr", "Mister", always=True), _t("Mrs", "Missus", always=True), _t("Ms", "Miz", always=True),
    _t("Prof", "Professor", always=True), _t("Dr", "Doctor", place="Drive"), _t("St", "Saint", place="Street"),
    _t("Gov", "Governor"), _t("Sen", "Senator"), _t("Rep", "Representative"), _t("Gen", "General"),
    _t("Col", "Colonel"), _t("Capt", "Captain"), _t("Lt", "Lieutenant"), _t("Sgt", "Sergeant"),
    _t("Rev", "Reverend"), _t("Hon", "Honorable"), _t("Fr", "Father"), _t("Mt", "Mount"), _t("Ft", "Fort"),
    _t("Pres", "President"), _t("Supt", "Superintendent"), _t("Maj", "Major"), _t("Adm", "Admiral"),
    *(Abbreviation(w, s, Kind.INSIDE) for w, s in (
        ("e.g", "for example"), ("i.e", "that is"), ("vs", "versus"), ("cf", "compare"),
        ("approx", "approximately"), ("ca", "circa"), ("viz", "namely"))),
    *(Abbreviation(w, s, Kind.ENDABLE) for w, s in (
        ("etc", "et cetera"), ("Jr", "Junior"), ("Sr", "Senior"), ("Inc", "Incorporated"), ("Ltd", "Limited"),
        ("Co", "Company"), ("Corp", "Corporation"), ("Dept", "Department"), ("Ave", "Avenue"),
        ("Blvd", "Boulevard"), ("Rd", "Road"), ("a.m", "AM"), ("p.m", "PM"), ("A.M", "AM"), ("P.M", "PM"),
        # Months: "Dec. 1" is no sentence end (a digit follows), "in Dec. Then" is.
        ("Jan", "January"), ("Feb", "February"), ("Mar", "March"), ("Apr", "April"), ("Jun", "June"),
        ("Jul", "July"), ("Aug", "August"), ("Sep", "September"), ("Sept", "September"), ("Oct", "October"),
        ("Nov", "November"), ("Dec", "December"))),
    *(Abbreviation(w, s, Kind.BEFORE_NUMBER) for w, s in (
        ("No", "number"), ("Nos", "numbers"), ("Nr", "number"), ("p", "page"), ("pp", "pages"),
        ("Fig", "figure"), ("Figs", "figures"), ("Vol", "volume"), ("Ch", "chapter"), ("Sec", "section"),
        ("Art", "article"), ("Op", "opus"), ("Eq", "equation"), ("Ex", "example"))),
)

_BY_LOWER: Final = {a.written.lower(): a for a in TABLE}


def find(token: str, following: str) -> Abbreviation | None:
    """The abbreviation `token` (written before a ".") stands for, given the next non-space text; else None."""
    a = _BY_LOWER.get(token.lower())
    if a is None or (a.kind is Kind.BEFORE_NUMBER and not following[:1].isdigit()):
        return None
    return a


def reads_as_place(a: Abbreviation, previous_word: str, following: str) -> bool:
    """"Elm Dr." / "on Elm St. in" are places; "Dr. Smith" / "St. Louis" are titles."""
    if a.place is None:
        return False
    after_name = bool(previous_word) and previous_word[:1].isupper() and not previous_word.endswith((".", "!", "?"))
    return after_name or not following[:1].isupper()


def ends_sentence(a: Abbreviation, previous_word: str, following: str) -> bool:
    """Whether the abbreviation's period also ends the sentence ("etc. Then", "Elm Dr. Then"; '' = end of text)."""
    if a.kind is Kind.ENDABLE or reads_as_place(a, previous_word, following):
        return not following or following[:1].isupper()
    return False
