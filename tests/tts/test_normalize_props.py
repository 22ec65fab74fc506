"""Properties of the normalizer on generated text: it never raises, leaves no ASCII digit, and is stable."""
from __future__ import annotations

import re

from hypothesis import given, settings
from hypothesis import strategies as st

from voxcli.tts.normalize import normalize_text

# Text made of the characters the rules look at, so the generator hits their edges quickly.
_ALPHABET = st.sampled_from(list("0123456789 .,:;-–/$€£¥¢%°+=&@#~×'()aAmMpPsStTkKgBbIVXxDr\n") +
                            ["Dec", "St", "km", "GB", "°C", "pm", "a.m.", "in ", "the ", "Henry ", "World War ",
                             "http://", "www.", ".com", "@x.io", "1990s", "$3.50", "10:30", "2026-12-01"])
_TEXT = st.lists(_ALPHABET, max_size=40).map("".join)
_WORDS = st.lists(_ALPHABET.filter(lambda a: "\n" not in a), max_size=24).map(lambda w: "So " + " ".join(w))


@settings(max_examples=400, deadline=None)
@given(_TEXT)
def test_never_raises_and_spells_every_digit(text: str) -> None:
    out = normalize_text(text)
    assert isinstance(out, str)
    assert not re.search(r"[0-9]", out), (text, out)


@settings(max_examples=300, deadline=None)
@given(_WORDS)
def test_normalizing_twice_changes_nothing(text: str) -> None:
    """The voice may be handed text that was already normalized (chat history, ASR-scoring both sides).

    Pieces separated by spaces after a word: glued junk such as "@x.io0" can still change ("x.io zero"
    is a domain), and so can a line whose first symbols hide a Markdown bullet ("~ - 0")."""
    once = normalize_text(text)
    assert normalize_text(once) == once, (text, once)
