"""LocalAgreement-n with a ratchet: the stable prefix of a caption never shrinks.

The streamer re-decodes the whole current buffer every step; each decode is a
*hypothesis* for that buffer. A word becomes stable when the last `n`
hypotheses agree on it (after the words already stable), compared without
case or punctuation ("Tried," == "tried"). Once stable a word is never taken
back, even if a later hypothesis disagrees: later hypotheses are aligned to
the stable words and only their remainder can become stable or volatile.

Pure Python, no model: the streamer feeds word lists, tests feed scripts.
"""
from __future__ import annotations

import re
import unicodedata
from collections import deque
from dataclasses import dataclass, field
from difflib import SequenceMatcher

_EDGE_PUNCT = re.compile(r"^[^\w']+|[^\w']+$")


def normalize_word(word: str) -> str:
    """Lower-case and strip edge punctuation, keeping inner apostrophes: "I'd," -> "i'd"."""
    w = unicodedata.normalize("NFKC", word).replace("\u2019", "'").replace("\u2018", "'").lower()
    w = _EDGE_PUNCT.sub("", w)
    return w.strip("'")


_TRAILING_PUNCT = re.compile(r"[.,!?;:\u2026]+$")


def strip_trailing_punct(word: str) -> str:
    """"of." -> "of" (keeps the word itself even if it is all punctuation)."""
    return _TRAILING_PUNCT.sub("", word) or word


def _norm(words: list[str]) -> list[str]:
    return [normalize_word(w) for w in words]


def align_end(done: list[str], hyp: list[str]) -> tuple[int, int]:
    """Where `done` (stable words) ends inside `hyp`: (words of done used, words of hyp used).

    Longest-matching blocks over normalized words; after the last match,
    leftover words on both sides are paired as substitutions.
    """
    a, b = _norm(done), _norm(hyp)
    if not a or not b:
        return 0, 0
    blocks = [m for m in SequenceMatcher(None, a, b, autojunk=False).get_matching_blocks() if m.size]
    if not blocks:
        k = min(len(a), len(b))
        return k, k
    last = blocks[-1]
    ai, bj = last.a + last.size, last.b + last.size
    skip = min(len(a) - ai, len(b) - bj)
    return ai + skip, bj + skip


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
    _history: deque = field(default_factory=deque)

    def __post_init__(self) -> None:
        if self.n < 1:
            raise ValueError("agreement n must be >= 1")

    def _tail(self, hyp: list[str]) -> list[str]:
        return hyp[align_end(self.stable[self.frozen :], hyp)[1] :]

    def update(self, hyp: list[str]) -> list[str]:
        """Add a hypothesis for the current buffer; returns the newly stable words."""
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

    def cut(self, segment: list[str]) -> list[str]:
        """The buffer's head was decoded alone as `segment` and removed from the buffer.

        Words of the segment not yet stable become stable (it was a final
        decode of that audio); stable words past the segment stay and are the
        expected start of the next hypotheses. Returns the newly stable words.
        """
        done, used = align_end(self.stable[self.frozen :], segment)
        new = segment[used:]
        self.stable.extend(new)
        self.frozen = len(self.stable) if new else self.frozen + done
        self._history.clear()
        self.volatile = []
        return new

    def finalize(self, final: list[str]) -> list[str]:
        """A last decode of the whole buffer: everything after the stable words becomes stable."""
        new = self._tail(final)
        self.stable.extend(new)
        self.volatile = []
        self._history.clear()
        return new

    def reset(self) -> None:
        """Start the next utterance."""
        self.stable, self.volatile, self.frozen = [], [], 0
        self._history.clear()

    @property
    def stable_text(self) -> str:
        return " ".join(self.stable)

    @property
    def volatile_text(self) -> str:
        return " ".join(self.volatile)
