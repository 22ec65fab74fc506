"""TextChunker: boundary rules (scripted) and the streaming invariants (hypothesis)."""
from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from voxcli.tts.chunker import ChunkerConfig, TextChunker, chunk_text
from voxcli.tts.normalize import speakable


def feed_in_pieces(text: str, cuts: list[int], config: ChunkerConfig | None = None) -> list[str]:
    chunker = TextChunker(config)
    out: list[str] = []
    last = 0
    for c in sorted(set(cuts)):
        out += chunker.feed(text[last:c])
        last = c
    out += chunker.feed(text[last:])
    return out + chunker.finish()


# Text made of the characters the rules care about, so boundaries are exercised often.
_alphabet = st.sampled_from(
    list("abcAB xyz.,;:!?…-—\"')\n\t0123456789$@/")
    + ["Dr. ", "e.g. ", "U.S. ", "3.50", "10:30", "...", " - ", "\n\n", "1. ", "No. 5", "http://a.b/c?d=1 "]
)
texts = st.lists(_alphabet, max_size=80).map("".join)
configs = st.builds(
    ChunkerConfig,
    first_words=st.integers(0, 5),
    long_chars=st.integers(1, 40),
    max_chars=st.integers(2, 60),
)


@settings(max_examples=300, deadline=None)
@given(text=texts, data=st.data(), config=configs)
def test_any_cutting_gives_the_same_chunks_and_loses_nothing(text: str, data: st.DataObject, config: ChunkerConfig) -> None:
    cuts = data.draw(st.lists(st.integers(0, len(text)), max_size=len(text) + 1))
    whole = chunk_text(text, config)
    pieces = feed_in_pieces(text, cuts, config)
    assert "".join(pieces) == text
    assert pieces == whole
    assert all(pieces), "no empty chunks"


@settings(max_examples=100, deadline=None)
@given(text=st.text(max_size=300))
def test_arbitrary_unicode_character_by_character(text: str) -> None:
    pieces = feed_in_pieces(text, list(range(len(text))))
    assert "".join(pieces) == text
    assert pieces == chunk_text(text)


def test_first_chunk_is_the_first_clause_then_whole_sentences() -> None:
    text = "Well, I think so. This sentence has a comma, but it is short. Last one."
    assert chunk_text(text) == ["Well, ", "I think so. ", "This sentence has a comma, but it is short. ", "Last one."]


def test_first_chunk_ends_after_n_words_without_punctuation() -> None:
    text = "one two three four five six seven eight nine ten."
    assert chunk_text(text, ChunkerConfig(first_words=4)) == ["one two three four ", "five six seven eight nine ten."]
    assert chunk_text(text, ChunkerConfig(first_words=0)) == [text]


def test_long_later_chunks_split_at_clauses() -> None:
    cfg = ChunkerConfig(first_words=0, long_chars=30)
    text = "Intro. A rather long sentence goes on here, and then it continues; finally it ends."
    assert chunk_text(text, cfg) == [
        "Intro. ",
        "A rather long sentence goes on here, ",
        "and then it continues; finally it ends.",  # 23 chars at the ";": not long yet
    ]


def test_forced_split_at_last_whitespace_before_max() -> None:
    cfg = ChunkerConfig(first_words=0, max_chars=20)
    chunks = chunk_text("aaaa bbbb cccc dddd eeee ffff", cfg)
    assert chunks == ["aaaa bbbb cccc dddd ", "eeee ffff"]
    assert chunk_text("x" * 45, cfg) == ["x" * 20, "x" * 20, "x" * 5]


@pytest.mark.parametrize(
    "text",
    [
        "Dr. Smith arrived late today.",
        "Mr. and Mrs. Jones met Prof. Lee at St. Mary's church.",
        "Bring fruit e.g. apples or pears and i.e. no candy please.",
        "He moved to the U.S. Army base last year.",
        "It costs $3.50 per item and 1,000.25 in total.",
        "We meet at 10:30 tomorrow and at 7:45 after that.",
        "She finished No. 5 on page p. 12 of the list.",
        "Visit https://example.com/a.b?c=d.e or write to a.b@example.co.uk today.",
        "Wait... what did you say there?",
        "J. R. R. Tolkien wrote many long books.",
        "Version 2.0.1 fixed the bug in v3.5 quickly.",
    ],
)
def test_never_splits_inside_abbreviations_numbers_urls_ellipses(text: str) -> None:
    assert chunk_text(text, ChunkerConfig(first_words=0)) == [text]


def test_sentence_ends_after_numbers_urls_and_ellipses_before_capitals() -> None:
    cfg = ChunkerConfig(first_words=0)
    assert chunk_text("I counted to 3. Then I left.", cfg) == ["I counted to 3. ", "Then I left."]
    assert chunk_text("Go to example.com. It works.", cfg) == ["Go to example.com. ", "It works."]
    assert chunk_text("Wait... Then go.", cfg) == ["Wait... ", "Then go."]
    assert chunk_text('He said "Hi." She waved.', cfg) == ['He said "Hi." ', "She waved."]
    assert chunk_text("Really?! Yes.", cfg) == ["Really?! ", "Yes."]


def test_paragraphs_and_list_items() -> None:
    cfg = ChunkerConfig(first_words=0)
    assert chunk_text("Title line\n\nBody text here.", cfg) == ["Title line\n\n", "Body text here."]
    assert chunk_text("1. Buy milk today", cfg) == ["1. Buy milk today"]  # an enumerator, not a sentence end


def test_undecided_boundary_waits_for_the_next_character() -> None:
    chunker = TextChunker(ChunkerConfig(first_words=0))
    assert chunker.feed("Hello there.") == []
    assert chunker.feed(" ") == []  # could still be "Dr. smith"-like: needs the next letter
    assert chunker.feed("N") == ["Hello there. "]
    assert chunker.pending == "N"
    assert chunker.finish() == ["N"]
    with pytest.raises(RuntimeError):
        chunker.feed("more")


def test_whitespace_only_and_empty() -> None:
    assert chunk_text("") == []
    assert chunk_text("   \n ") == ["   \n "]


def test_speakable_removes_control_and_markup_but_keeps_words() -> None:
    assert speakable("**Bold** and `code`\x07 <b>tag</b> [label](http://x.y)") == "Bold and code tag label"
    assert speakable("a < b > c") == "a < b > c"
    assert speakable("😀 🎉\x00") == ""
    assert speakable("Hi 😀") == "Hi"
    spoken = speakable("Dr. Smith paid $3.50.")  # the normalizer's wording is H-norm's (tests/tts/test_normalize*.py)
    assert spoken.startswith("Doctor Smith paid ") and "dollars" in spoken and "cents" in spoken


@pytest.mark.parametrize("text, chunks", [
    ("Gov. Smith arrived.", ["Gov. Smith arrived."]),
    ("Sen. Jones and Fr. Brown met Ft. Knox staff.", ["Sen. Jones and Fr. Brown met Ft. Knox staff."]),
    ("Apples and pears etc. Then we left.", ["Apples and pears etc. ", "Then we left."]),
    ("At 3 p.m. Then we go.", ["At 3 p.m. ", "Then we go."]),
    ("at 3 p.m. we go.", ["at 3 p.m. we go."]),
    ("We met on Elm Dr. Then left.", ["We met on Elm Dr. ", "Then left."]),
    ("He said No. Then he left.", ["He said No. ", "Then he left."]),
])
def test_abbreviation_periods_cut_exactly_where_the_normalizer_keeps_a_period(text: str, chunks: list[str]) -> None:
    """One table: a chunk ends at an abbreviation's period iff the normalizer keeps it as a sentence end."""
    from voxcli.tts.normalize import normalize_text

    assert chunk_text(text, ChunkerConfig(first_words=0)) == chunks
    for chunk in chunks:
        spoken = normalize_text(chunk)
        assert "." not in spoken[:-1], spoken  # no period inside a chunk: espeak would split the sentence there


@pytest.mark.parametrize("text, chunks", [
    ("We all met Dr. Smith today.", ["We all met Dr. Smith ", "today."]),
    ("He said 10 000 people came.", ["He said 10 000 ", "people came."]),
    ("Bring some fruit e.g. apples today.", ["Bring some fruit e.g. apples ", "today."]),
])
def test_the_first_words_cut_never_leaves_an_abbreviation_or_number_in_two(text: str, chunks: list[str]) -> None:
    """Before: "We all met Dr. " was a chunk of its own and read "We all met Drive."."""
    assert chunk_text(text) == chunks
