"""The caption contract since the final decode is authoritative (#13 items 8, 9).

Within an utterance, each non-final caption's stable text extends the previous
one (LocalAgreement's ratchet, n >= 2); the final caption is the utterance's
final decode and may re-punctuate the stable words but not change them. With n = 1 there is no ratchet at all.
"""
from __future__ import annotations

from typing import Iterable

from voxcli.asr.agreement import normalize_word
from voxcli.events import Caption


def assert_ratchet(captions: Iterable[Caption], n: int = 2) -> list[Caption]:
    """Check the contract above (utterance order, no caption after a final); return the captions."""
    caps = list(captions)
    prev: dict[int, str] = {}
    closed: set[int] = set()
    last_utt = -1
    for c in caps:
        assert c.utterance not in closed, f"caption after the final of utterance {c.utterance}: {c}"
        assert c.utterance >= last_utt, f"utterances out of order: {c}"
        last_utt = c.utterance
        before = prev.get(c.utterance, "")
        if n >= 2 and not c.is_final:
            assert c.stable.startswith(before), f"stable text shrank or changed: {before!r} -> {c.stable!r}"
        elif n >= 2:  # the final may re-punctuate the shown words, never change them
            shown = [normalize_word(w) for w in before.split()]
            assert [normalize_word(w) for w in c.stable.split()][: len(shown)] == shown, \
                f"the final changed stable words: {before!r} -> {c.stable!r}"
        prev[c.utterance] = c.stable
        if c.is_final:
            assert c.volatile == "", f"a final caption has a volatile tail: {c}"
            closed.add(c.utterance)
    return caps
