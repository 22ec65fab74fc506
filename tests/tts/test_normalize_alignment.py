"""Spoken words map back to the written characters they were read from (for word timings and subtitles)."""
from __future__ import annotations

import re

import pytest

from tests.tts.test_normalize_table import CASES
from voxcli.tts.alignment import align
from voxcli.tts.normalize import normalize_text, spoken_words


def _read_from(text: str) -> list[tuple[str, str]]:
    return [(w.text, text[w.char_start:w.char_end]) for w in align(text, normalize_text(text))]


def test_a_price_maps_to_its_characters() -> None:
    assert _read_from("It costs $3.50 today.") == [
        ("It", "It"), ("costs", "costs"), ("three", "$3.50"), ("dollars", "$3.50"), ("and", "$3.50"),
        ("fifty", "$3.50"), ("cents", "$3.50"), ("today.", "today.")]


def test_titles_times_dates_and_markup_map_to_their_characters() -> None:
    got = dict(_read_from("**Dr.** Smith left on 2026-12-01 at 10:30 with Henry VIII."))
    assert got["Doctor"] == "**Dr.**" and got["December"] == got["twenty-six"] == "2026-12-01"
    assert got["ten"] == "10:30" and got["Eighth."] == "VIII."


@pytest.mark.parametrize("text", [t for _, t, _ in CASES])
def test_every_spoken_word_has_an_ordered_span_of_the_written_text(text: str) -> None:
    spoken = normalize_text(text)
    words = align(text, spoken)
    assert [w.text for w in words] == spoken.split()
    assert all(0 <= w.char_start <= w.char_end <= len(text) for w in words)
    assert all(a.char_start <= b.char_start for a, b in zip(words, words[1:]))
    starts = {m.start() for m in re.finditer(r"\S+", text)}
    ends = {m.end() for m in re.finditer(r"\S+", text)}
    assert all(w.char_start in starts and w.char_end in ends for w in words)  # whole written words, never parts


def test_nothing_written_nothing_spoken() -> None:
    assert align("", "") == [] and align("😀", "") == []
    assert [(w.char_start, w.char_end) for w in align("a b", "a x b")] == [(0, 1), (0, 1), (2, 3)]
    assert [(w.char_start, w.char_end) for w in align("", "x")] == [(0, 0)]


def test_spoken_words_are_what_speakable_gives_the_voice() -> None:
    text = "Gov. Smith 😀 paid £1.2m on Dec. 1."
    words = spoken_words(text)
    assert " ".join(w.text for w in words) == "Governor Smith paid one point two million pounds on December first."
    assert {text[w.char_start:w.char_end] for w in words if w.text in ("one", "pounds")} == {"£1.2m"}
    assert spoken_words("😀") == []
