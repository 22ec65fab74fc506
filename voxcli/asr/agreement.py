"""LocalAgreement-n with a ratchet: the stable prefix of a caption never shrinks.

The streamer re-decodes the whole current buffer every step; each decode is a
*hypothesis* for that buffer. A word becomes stable when the last `n`
hypotheses agree on it (after the words already stable), compared without
case or punctuation ("Tried," == "tried"). Once stable a word is never taken
back, even if a later hypothesis disagrees: later hypotheses are aligned to
the stable words and only their remainder can become stable or volatile;
a hypothesis that goes on inside the last stable word ("We" -> "We're")
commits nothing (its remainder would be placed after the wrong word).

`n = 1` is the naive policy of the seed (002, chapter 4): every hypothesis is
shown as stable at once, with no ratchet, so stable words may be taken back
(the display flickers); `retractions` and `flicker_words` count that. The
final decode is unforced (the batch text): for n = 1 it is authoritative and
may take shown words back; for n >= 2 it may re-punctuate the stable words
and extend them, never change them, so the ratchet holds.

Pure Python, no model: the streamer feeds word lists, tests feed scripts.
"""
from __future__ import annotations

import re
import unicodedata
from collections import deque
from dataclasses import dataclass, field
from difflib import SequenceMatcher
from typing import Final, NamedTuple

_EDGE_PUNCT = re.compile(r"^[^\w']+|[^\w']+$")


def normalize_word(word: str) -> str:
    """Lower-case and strip edge punctuation, keeping inner apostrophes: "I'd," -> "i'd"."""
    w = unicodedata.normalize("NFKC", word).replace("\u2019", "'").replace("\u2018", "'").lower()
    w = _EDGE_PUNCT.sub("", w)
    return w.strip("'")


_TRAILING_PUNCT = re.compile(r"[.,!?;:\u2026]+$")


def strip_edge_punct(word: str) -> str:
    """"capital?" -> "capital", "\"Yes," -> "Yes" (case and inner apostrophes kept; "" if all punctuation)."""
    return _EDGE_PUNCT.sub("", word)


def strip_trailing_punct(word: str) -> str:
    """"of." -> "of" (keeps the word itself even if it is all punctuation)."""
    return _TRAILING_PUNCT.sub("", word) or word


def _norm(words: list[str]) -> list[str]:
    return [normalize_word(w) for w in words]


ANCHOR_RUN: Final = 2
"""Words in a row that must match for `align_end` to have found where the stable words end."""
ANCHOR_WINDOW: Final = 4
"""That run must end at most this many words before the end of the stable words, and stand at most this many
words (plus one per four stable words before it: a long final may write a few words differently) from its
place among them."""
CLITIC_SKIPS: Final = 2
"""Hypotheses in a row that `update` may skip for going on inside the last stable word ("We" -> "We're");
the next one commits as usual, so a model that keeps the clitic cannot stall the captions until the final."""


class EndMatch(NamedTuple):
    """Where the stable words end inside a hypothesis (`align_end`)."""

    done: int
    """Stable words used."""
    used: int
    """Hypothesis words used: the hypothesis goes on after these."""
    anchored: bool
    """A run of ANCHOR_RUN words matches near the end of the stable words, and at about their place in the
    hypothesis (`ANCHOR_WINDOW`). False: no anchor, the end is a guess from
    pairing leftover words one by one (wrong when the hypothesis wrote the speech differently: "1 2 3" ->
    "1-2-3"), or the run matched words said again later ("It was" shown, a final "The words of the best of
    times, it was the worst of times": placed after its second "it was", six words were lost)."""


def align_end(done: list[str], hyp: list[str]) -> EndMatch:
    """Where `done` (stable words) ends inside `hyp`, and whether a matching run anchors it.

    Longest-matching blocks over normalized words; after the last match,
    leftover words on both sides are paired as substitutions.
    """
    a, b = _norm(done), _norm(hyp)
    if not a or not b:
        return EndMatch(0, 0, False)
    blocks = [m for m in SequenceMatcher(None, a, b, autojunk=False).get_matching_blocks() if m.size]
    if not blocks:
        k = min(len(a), len(b))
        return EndMatch(k, k, False)
    anchored = any(m.size >= ANCHOR_RUN and m.a + m.size >= len(a) - ANCHOR_WINDOW
                   and abs(m.b - m.a) <= ANCHOR_WINDOW + m.a // 4 for m in blocks)
    last = blocks[-1]
    ai, bj = last.a + last.size, last.b + last.size
    skip = min(len(a) - ai, len(b) - bj)
    return EndMatch(ai + skip, bj + skip, anchored)


def common_prefix(lists: list[list[str]]) -> int:
    """Length of the longest common prefix of word lists (normalized)."""
    if not lists:
        return 0
    normed = [_norm(x) for x in lists]
    n = 0
    for column in zip(*normed):
        if any(w != column[0] for w in column[1:]):
            break
        n += 1
    return n


@dataclass
class LocalAgreement:
    """Stable + volatile words of one utterance, from successive hypotheses.

    `stable` covers the whole utterance; `frozen` of those words belong to
    audio the streamer already cut out of its buffer, so new hypotheses
    (which cover only the buffer) are aligned against `stable[frozen:]`.
    """

    n: int = 2
    stable: list[str] = field(default_factory=list)
    volatile: list[str] = field(default_factory=list)
    frozen: int = 0
    retractions: int = 0
    """Hypotheses (n = 1) and finals whose words did not extend the shown stable ones (kept across `reset`)."""
    flicker_words: int = 0
    """Shown stable words those updates took back (not found again in the new words)."""
    _history: deque = field(default_factory=deque)
    _skipped: int = 0
    """Hypotheses skipped in a row by the clitic rule (`CLITIC_SKIPS`)."""

    def __post_init__(self) -> None:
        if self.n < 1:
            raise ValueError("agreement n must be >= 1")

    def _tail(self, hyp: list[str]) -> list[str]:
        return hyp[align_end(self.stable[self.frozen :], hyp).used :]

    @property
    def prompt(self) -> str:
        """The decoder prefix for the next hypothesis of the buffer: its stable words WITHOUT punctuation.

        Committed punctuation is a guess made where the audio ended ("capital?"); forced
        as the prefix it makes the model stop or continue wrongly ("a friend?"). Empty for
        n = 1: nothing is settled there, and a forced prefix would lock early mistakes in.
        """
        if self.n == 1:
            return ""
        return " ".join(w for w in (strip_edge_punct(x) for x in self.stable[self.frozen :]) if w)

    def _replace(self, hyp: list[str]) -> list[str]:
        """The hypothesis becomes the stable words (n = 1, finals); count what it takes back."""
        old = self.stable[self.frozen :]
        keep = common_prefix([old, hyp])
        if keep < len(old):  # shown words change: count the update, and the shown words that are gone
            self.retractions += 1
            kept = SequenceMatcher(None, _norm(old), _norm(hyp), autojunk=False).get_matching_blocks()
            self.flicker_words += len(old) - sum(m.size for m in kept)
        self.stable[self.frozen :] = hyp
        self.volatile = []
        return hyp[keep:]

    def update(self, hyp: list[str]) -> list[str]:
        """Add a hypothesis for the current buffer; returns the newly stable words."""
        if self.n == 1:
            return self._replace([*hyp[:-1], strip_trailing_punct(hyp[-1])] if hyp else [])
        self._skipped = self._skipped + 1 if self._continues_stable(hyp) else 0
        if 0 < self._skipped <= CLITIC_SKIPS:
            # The decode went on inside the last stable word ("We" -> "We're": the forced prefix ended
            # mid-word for the model). Paired word by word, the suffix would be lost and the rest
            # committed after the wrong word ("We all going"); commit nothing from it, so the unforced
            # final ("We were all going") can still extend the stable words. Bounded: see CLITIC_SKIPS.
            self._history.clear()
            self.volatile = self._tail(hyp)
            return []
        self._history.append(list(hyp))
        while len(self._history) > self.n:
            self._history.popleft()
        tails = [self._tail(h) for h in self._history]
        new: list[str] = []
        if len(tails) >= self.n:
            # Commit the longest common prefix of the last n hypotheses' tails.
            new = tails[-1][: common_prefix(tails)]
            if new and len(new) == len(tails[-1]):
                # The buffer ends at this word, so its "." only marks the end of
                # the audio, not of the sentence; committed (and later forced as
                # the decoder prefix) it would make the model stop there.
                new = [*new[:-1], strip_trailing_punct(new[-1])]
            self.stable.extend(new)
        self.volatile = tails[-1][len(new) :]
        return new

    def show(self, hyp: list[str]) -> None:
        """Show a hypothesis as volatile words only: nothing of it commits, nor counts toward the next agreement.

        For decodes the streamer does not trust yet (a patched utterance's first `PATCH_COMMIT_S`): two short
        decodes agreeing on a guessed word would lock it in, where the whole utterance decoded hears it right."""
        self._history.clear()  # the next hypotheses agree among themselves, not with one shown
        self._skipped = 0
        self.volatile = self._tail(hyp)

    def _continues_stable(self, hyp: list[str]) -> bool:
        """Is `hyp`'s word at the end of the stable words the last of them plus a clitic ("We" -> "We're")?

        Only an apostrophe suffix: "it" -> "its" is another word, a substitution like any other.
        """
        old = self.stable[self.frozen :]
        m = align_end(old, hyp)
        if not old or m.done < len(old) or m.used < 1:
            return False
        last, word = normalize_word(old[-1]), normalize_word(hyp[m.used - 1])
        return bool(last) and word.startswith(last + "'")

    def cut(self, segment: list[str]) -> list[str]:
        """The buffer's head was decoded alone as `segment` and removed from the buffer.

        Words of the segment not yet stable become stable (it was a final
        decode of that audio); stable words past the segment stay and are the
        expected start of the next hypotheses. Returns the newly stable words.
        """
        done, used, _ = align_end(self.stable[self.frozen :], segment)
        new = segment[used:]
        self.stable.extend(new)
        self.frozen = len(self.stable) if new else self.frozen + done
        self._history.clear()
        self._skipped = 0
        self.volatile = []
        return new

    def finalize(self, final: list[str]) -> list[str]:
        """A last decode of the whole buffer becomes the utterance's words.

        The decode is unforced (a forced prefix locks early guesses in: "capital?
        a friend?", "spider hath?"), so it is the batch text of the utterance.
        n = 1: it is authoritative; shown words it disagrees with are taken
        back (counted in `retractions`).
        n >= 2: when its words extend the stable ones it replaces them (it may
        re-punctuate, "capital?" -> "capital of France?"); when it disagrees
        with a shown word (rare: "likes" vs "legs", or a buffer cut inside a
        word), what was shown stays and only what it heard after the stable
        words is added: the ratchet holds to the end of the utterance.
        """
        self._history.clear()
        self._skipped = 0
        if self._extends(final):
            return self._replace(list(final))
        new = list(final[align_end(self.stable[self.frozen :], final).used :])
        self.stable.extend(new)
        self.volatile = []
        return new

    def _extends(self, final: list[str]) -> bool:
        """n = 1, or `final` starts with the shown stable words (punctuation aside): it replaces them."""
        old = self.stable[self.frozen :]
        return self.n == 1 or common_prefix([old, final]) == len(old)

    def lines_up(self, final: list[str]) -> bool:
        """Can `finalize` place an unforced final after the shown stable words?

        Yes when it extends them, or when `align_end` finds an anchor (two words in a row that
        match, ending near the end of the stable words, at about their place). Otherwise the decode wrote
        the same speech differently ("one two three" -> "1-2-3", one word), or its match is the stable
        words said again later: pairing words one by one would drop what was said after (or before), so
        the streamer decodes again, forced with the shown words.
        """
        return self._extends(final) or align_end(self.stable[self.frozen :], final).anchored

    def reset(self) -> None:
        """Start the next utterance."""
        self.stable, self.volatile, self.frozen = [], [], 0
        self._history.clear()
        self._skipped = 0

    @property
    def words(self) -> list[str]:
        """The caption's words of the current buffer: stable (after the frozen ones) then volatile."""
        return [*self.stable[self.frozen :], *self.volatile]

    @property
    def stable_text(self) -> str:
        return " ".join(self.stable)

    @property
    def volatile_text(self) -> str:
        return " ".join(self.volatile)
