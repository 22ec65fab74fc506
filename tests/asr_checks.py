"""Checks shared by every streaming-ASR test (engine and CLI)."""
from __future__ import annotations

import threading
import time
from typing import Callable, Iterable

import numpy as np

from voxcli.asr.agreement import normalize_word
from voxcli.asr.streamer import ASRStreamer
from voxcli.events import Caption

SR = 16000

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


def caption_retractions(captions: Iterable[Caption]) -> int:
    """Captions whose stable words (compared without case or punctuation) do not extend the previous ones.

    What a viewer of the captions would count as taken back, recounted from the outside: a test
    checks `ASRStats.retractions` (the streamer's own count, which `bench asr` reports) against it.
    Words, not strings: a final caption that only re-punctuates what was shown ("tried," -> "tried")
    has taken nothing back.
    """
    prev: dict[int, list[str]] = {}
    count = 0
    for c in captions:
        words = [normalize_word(w) for w in c.stable.split()]
        before = prev.get(c.utterance, [])
        if words[: len(before)] != before:
            count += 1
        prev[c.utterance] = words
    return count


def final_text(captions: Iterable[Caption]) -> str:
    """The transcript the captions add up to: the final stable text of each utterance, one per line."""
    return "\n".join(c.stable for c in captions if c.is_final and c.stable)


def feed(s: ASRStreamer, audio: np.ndarray, chunk_s: float = 0.1, speed: float = 0.0,
         on_caption: Callable[[Caption], None] | None = None, **send) -> tuple[str, list[Caption], float]:
    """Send `audio` in `chunk_s` blocks while a thread reads the captions, then finish the stream.

    `speed` paces the sends at that many times real time (0: as fast as `send` returns);
    `on_caption` sees each caption as it arrives, on the reader thread; `send` goes to every
    `s.send` (e.g. `block=True`). One loop for every streaming test, so a test's input differs
    from another's only by what its arguments say.

    Returns (transcript, captions in order, most audio seen pending right after a send).
    """
    caps: list[Caption] = []

    def read() -> None:
        for cap in s.captions:
            if on_caption is not None:
                on_caption(cap)
            caps.append(cap)

    reader = threading.Thread(target=read)
    reader.start()
    n, most = int(chunk_s * SR), 0.0
    t0 = time.monotonic()
    for i in range(0, audio.size, n):
        s.send(audio[i : i + n], **send)
        most = max(most, s.pending_s)
        if speed:
            delay = t0 + (i + n) / SR / speed - time.monotonic()
            if delay > 0:
                time.sleep(delay)
    text = s.finish()
    reader.join(10)
    return text, caps, most
