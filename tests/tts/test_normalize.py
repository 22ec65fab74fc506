"""Text normalization: what espeak would misread is rewritten as the words a reader says (table: test_normalize_table.py)."""
from __future__ import annotations

import pytest

from voxcli.tts.normalize import normalize_text, strip_markup, strip_unspeakable


@pytest.mark.parametrize("text, expected", [
    ("It costs $3.50 today.", "It costs three dollars and fifty cents today."),
    ("$1 or $0.99 or $2.05", "one dollar or ninety-nine cents or two dollars and five cents"),
    ("$1,250.00 total", "one thousand two hundred fifty dollars total"),
    ("A $1.5 million deal.", "A one point five million dollar deal."),
    ("€5 and £10", "five euros and ten pounds"),
    ("At 10:30 we go.", "At ten thirty we go."),
    ("At 10:05 or 10:00.", "At ten oh five or ten o'clock."),
    ("In 1984 and 1905, the 1990s, 1900.", "In nineteen eighty-four and nineteen oh five, the nineteen nineties, nineteen hundred."),
    ("In 2024 we had 1,984 users and 1984.5 points.",
     "In twenty twenty-four we had one thousand nine hundred eighty-four users and "
     "one thousand nine hundred eighty-four point five points."),
    ("Dr. Smith lives on Elm St. in the U.S. now.", "Doctor Smith lives on Elm Street in the U.S. now."),
    ("We met Dr. Who on Elm Dr. Then left.", "We met Doctor Who on Elm Drive. Then left."),
    ("St. Louis is big.", "Saint Louis is big."),
    ("Mr. and Mrs. Jones, Prof. X", "Mister and Missus Jones, Professor X"),
    ("Bring fruit, e.g., apples, i.e. red ones, etc. Then go.",
     "Bring fruit, for example, apples, that is red ones, et cetera. Then go."),
    ("At 3 p.m. Then we go.", "At three PM. Then we go."),
    ("at 3 p.m. we go", "at three PM we go"),
    ("The 1st, 22nd and 3rd place; 20% more; 3.14.",
     "The first, twenty-second and third place; twenty percent more; three point one four."),
])
def test_normalize(text, expected):
    assert normalize_text(text) == expected


def test_markup_is_stripped_to_words():
    assert strip_markup("**bold** and `code` [link](http://x.y) <b>tag</b>").split() == \
        ["bold", "and", "code", "link", "tag"]
    assert normalize_text("# Header\n- item one\n* item two") == "Header\nitem one\nitem two"
    assert normalize_text("snake_case_name stays") == "snake_case_name stays"


def test_emoji_and_control_characters_are_dropped():
    assert normalize_text("Hi 👋🏽 there ❤️ ok\u200b\x07!") == "Hi there ok !"
    assert strip_unspeakable("a\x00b\x1bc") == "a b c"
    assert strip_unspeakable("\x1b[31mred\x1b[0m text") == "red text"
    assert normalize_text("5°C, café, naïve") == "five degrees Celsius, café, naïve"
    assert normalize_text("“quoted” ‘single’") == "\"quoted\" 'single'"


@pytest.mark.parametrize("text", ["", "   ", "\ud800", "$", "$.", "10:", ":30", "Dr.", "e.g.", "\x00" * 5,
                                  "9" * 80 + "th", "$" + "9" * 80, "-" + "9" * 80 + ".5", "99/99/9999", "2026-13-45",
                                  "http://", "@@", "#", "~", "\u0663\u0664"])
def test_never_raises(text):
    assert isinstance(normalize_text(text), str)


def test_normalized_abbreviation_no_longer_splits_the_sentence():
    from voxcli.runtimes.piper.phonemize import EspeakPhonemizer

    phonemizer = EspeakPhonemizer("en-us")
    assert len(phonemizer.phonemize("Dr. Smith came home.")) == 2  # espeak alone: "Dr." ends a sentence
    assert len(phonemizer.phonemize(normalize_text("Dr. Smith came home."))) == 1
    spoken = "".join(phonemizer.phonemize(normalize_text("It costs $3.50."))[0].phonemes)
    assert "dˈɑːlɚz" in spoken and "sˈɛnts" in spoken and "pɔɪnt" not in spoken


def test_gov_smith_is_one_chunk_spoken_as_governor_smith():
    """The chunker and the normalizer share one table: "Gov." neither cuts nor stays unexpanded."""
    from voxcli.tts.chunker import chunk_text

    assert chunk_text("Gov. Smith arrived.") == ["Gov. Smith arrived."]
    assert normalize_text("Gov. Smith arrived.") == "Governor Smith arrived."


@pytest.mark.parametrize("text, expected", [
    ("See No. 5 on p. 12 and Fig. 3.", "See number five on page twelve and figure three."),
    ("I said No. Then left.", "I said No. Then left."),  # not before a number: the word "no"
    ("Apple Inc. Then Sony Ltd. made it.", "Apple Incorporated. Then Sony Limited made it."),
    ("Cost approx. 5 dollars, cf. the list.", "Cost approximately five dollars, compare the list."),
    ("Sen. Jones met Rep. Lee at Mt. Hood.", "Senator Jones met Representative Lee at Mount Hood."),
])
def test_shared_table_expansions(text, expected):
    assert normalize_text(text) == expected


def test_markup_is_stripped_once_on_the_streaming_path(monkeypatch):
    """The streamer normalizes each chunk once and turns the voice's own normalization off."""
    import voxcli.tts.normalize as norm

    calls: list[str] = []
    real = norm.strip_markup
    monkeypatch.setattr(norm, "strip_markup", lambda t: calls.append(t) or real(t))
    assert norm.speakable("**Gov.** Smith") == "Governor Smith"
    assert len(calls) == 1
