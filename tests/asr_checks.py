"""Checks shared by every streaming-ASR test (engine and CLI)."""
from __future__ import annotations

from typing import Iterable

from voxcli.asr.agreement import normalize_word
from voxcli.events import Caption

BECKETT_REF = "Ever tried. Ever failed. No matter. Try again. Fail again. Fail better."
# The whole recording (the conftest constant stops before "in short").
TWO_CITIES_REF = (
    "It was the best of times, it was the worst of times, it was the age of wisdom, it was the age of "
    "foolishness, it was the epoch of belief, it was the epoch of incredulity, it was the season of Light, "
    "it was the season of Darkness, it was the spring of hope, it was the winter of despair, we had "
    "everything before us, we had nothing before us, we were all going direct to Heaven, we were all "
    "going direct the other way - in short, the period was so far like the present period, that some of "
    "its noisiest authorities insisted on its being received, for good or for evil, in the superlative "
    "degree of comparison only."
)


def assert_stable_never_shrinks(captions: Iterable[Caption], n: int = 2) -> list[Caption]:
    """Within an utterance each caption's stable text extends the previous one; finals close it.

    The final caption (the final decode) may re-punctuate the stable words, not change them.
    With agreement n = 1 there is no ratchet (stable words may be taken back): only order is checked.

    Returns the captions (as a list) so a test can go on checking them.
    """
    caps = list(captions)
    prev: dict[int, str] = {}
    closed: set[int] = set()
    last_utt = -1
    for c in caps:
        assert c.utterance not in closed, f"caption after the final of utterance {c.utterance}: {c}"
        assert c.utterance >= last_utt, f"utterances out of order: {c}"
        last_utt = c.utterance
        before = prev.get(c.utterance, "")
        if n >= 2 and c.is_final:  # the final may re-punctuate the shown words, never change them
            shown = [normalize_word(w) for w in before.split()]
            assert [normalize_word(w) for w in c.stable.split()][: len(shown)] == shown, \
                f"the final changed stable words: {before!r} -> {c.stable!r}"
        elif n >= 2:
            assert c.stable.startswith(before), f"stable text shrank or changed: {before!r} -> {c.stable!r}"
        prev[c.utterance] = c.stable
        if c.is_final:
            assert c.volatile == "", f"a final caption has a volatile tail: {c}"
            closed.add(c.utterance)
    return caps


def final_text(captions: Iterable[Caption]) -> str:
    """The transcript the captions add up to: the final stable text of each utterance, one per line."""
    return "\n".join(c.stable for c in captions if c.is_final and c.stable)
