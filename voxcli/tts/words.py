"""Word timings for TTS: which words each audio chunk speaks, when, and from which written characters.

Why here and how: the Piper front part already decides how many latent frames
(`hop_length` samples each) every phoneme id lasts (the duration predictor,
`Prepared.durations`). Three mappings turn that into words:

1. ids -> phonemes: `phonemes_to_ids` lays out `^ _ p1 _ p2 _ ... $`, so every
   phoneme owns its id(s) and the pad after it; a phoneme's frames are the sum
   of those ids' durations (the pad is the tail of its sound).
2. phonemes -> spoken words: espeak separates words with a space, but it also
   fuses some ("of the" -> "ʌvðə"). When the groups and the words do not pair
   one to one, the words are aligned to the groups by their lengths when
   phonemized alone (a small dynamic programme), and a fused group is shared by
   its words in proportion to those lengths. Punctuation phonemes (the pause of
   a comma) belong to no word.
3. spoken words -> written characters: `voxcli.tts.alignment` ("$3.50" -> three
   dollars and fifty cents, all pointing at "$3.50").

A voice without durations (whole-graph fallback) gets every id an equal share
of the sentence's audio: an estimate, documented as such.

`PieceWords` is made per text piece by the producer (offset = characters sent
before the piece), `SentenceWords` per prepared sentence; the decoder asks it
for the words that start inside each block it emits (`take`).
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any, Final

import numpy as np

from voxcli.events import Word
from voxcli.tts.alignment import align

_TOKEN = re.compile(r"\S+")
_PUNCT: Final = frozenset(".,:;?!¡¿\u2013\u2014\u2015\u2026\"'()[]-")
_MAX_FUSED: Final = 4  # words espeak may fuse into one group ("as a matter of")


@dataclass(frozen=True)
class WordSpan:
    """One word of a sentence: its text, its written characters, its frames inside the sentence."""

    text: str
    char_start: int
    char_end: int
    start_frame: float
    end_frame: float


class PieceWords:
    """The spoken words of one text piece with their spans in the stream's text, handed out per sentence."""

    def __init__(self, piece: str, clean: str, offset: int) -> None:
        spoken = align(piece, clean)
        tokens = list(_TOKEN.finditer(clean))
        self._clean = clean
        self._words = [(m.start(), w.text, w.char_start + offset, w.char_end + offset)
                       for m, w in zip(tokens, spoken)]
        self._cursor = 0  # characters of `clean` handed out
        self._next = 0  # index of the next word

    def sentence(self, text: str) -> list[tuple[str, int, int]]:
        """(word, char_start, char_end) of the next sentence, whose text is `text` (a slice of `clean`)."""
        at = self._clean.find(text, self._cursor) if text else -1
        if at >= 0:
            end = at + len(text)
            self._cursor = end
            stop = self._next
            while stop < len(self._words) and self._words[stop][0] < end:
                stop += 1
        else:  # the phonemizer changed the text: count its tokens instead
            stop = min(len(self._words), self._next + len(text.split()))
        out = [(w, a, b) for _, w, a, b in self._words[self._next:stop]]
        self._next = stop
        return out


@dataclass
class SentenceWords:
    """The words of one prepared sentence, in frames, and which of them were handed out."""

    words: list[WordSpan]
    hop: int
    _given: int = field(default=0, repr=False)

    def take(self, start: int, stop: int, base: int, sample_rate: int, last: bool = False) -> tuple[Word, ...]:
        """Words starting in samples [start, stop) of the sentence (all remaining if `last`), as stream
        `Word`s: `base` = stream samples before the sentence."""
        out = []
        while self._given < len(self.words):
            w = self.words[self._given]
            if not last and w.start_frame * self.hop >= stop:
                break
            out.append(Word(text=w.text, start=(base + w.start_frame * self.hop) / sample_rate,
                            end=(base + w.end_frame * self.hop) / sample_rate,
                            char_start=w.char_start, char_end=w.char_end))
            self._given += 1
        return tuple(out)


def synthesize(voice: Any, text: str) -> tuple[np.ndarray, list[Word]]:
    """Whole sentences at once, like `Voice.synthesize(text)` (the same audio), and their words.

    For `speak --no-stream` and tests: with noise scales 0 the audio is
    deterministic, and each sentence's words come from the same front-part run
    as its audio (the duration predictor is noisy otherwise).
    """
    from voxcli.audio.pcm import sanitize
    from voxcli.tts.normalize import speakable

    engine = getattr(voice, "engine", voice)
    sample_rate = int(engine.sample_rate)
    clean = speakable(text)
    pieces, words = PieceWords(text, clean, 0), []
    parts: list[np.ndarray] = []
    base = 0
    for p in (engine.prepare(clean, normalize=False) if clean else []):
        timing = attach(p, engine, pieces.sentence(p.text))
        audio = engine.render(p, 0, p.frames) if getattr(p, "latent", None) is not None else p.audio
        audio = np.asarray(audio if audio is not None else np.zeros(0), np.float32).reshape(-1)
        words += timing.take(0, audio.size, base, sample_rate, last=True)
        parts.append(audio)
        base += audio.size
    audio = np.concatenate(parts) if parts else np.zeros(0, np.float32)
    return sanitize(audio)[0], words


def attach(p: Any, engine: Any, words: list[tuple[str, int, int]]) -> SentenceWords:
    """Time `words` (this sentence's, from PieceWords) on the frames of prepared sentence `p`; sets `p.words`."""
    spans = sentence_spans(p, engine, words)
    timing = SentenceWords(spans, int(getattr(engine, "hop_length", 256)))
    try:
        p.words = timing
    except AttributeError:  # an engine whose sentences take no attributes: no word times
        pass
    return timing


def sentence_spans(p: Any, engine: Any, words: list[tuple[str, int, int]]) -> list[WordSpan]:
    """WordSpans of `words` on the sentence's frames (see the module docstring)."""
    words = [w for w in words if any(ch.isalnum() for ch in w[0])]
    if not words:
        return []
    bounds = _phone_frames(p, engine)
    if bounds is None:  # ids and phonemes disagree: spread the words over the sentence by length
        total = _frames(p, engine)
        lens = np.array([len(w[0]) for w in words], float)
        edges = np.concatenate([[0.0], np.cumsum(lens) / lens.sum() * total])
        return [WordSpan(_bare(w), a, b, float(edges[i]), float(edges[i + 1])) for i, (w, a, b) in enumerate(words)]
    groups = _groups(bounds)
    if not groups:
        return [WordSpan(_bare(w), a, b, 0.0, 0.0) for w, a, b in words]
    glens = [len(g) for g in groups]
    # Phoneme counts of the words alone (espeak per word) matter only when words and groups do not
    # pair one to one; with one word per group its share is the whole group whatever its count.
    wlens = [_phoneme_count(engine, w) for w, _, _ in words] if len(words) != len(glens) else [1] * len(words)
    out = []
    for (w0, w1), (g0, g1) in _pair(wlens, glens):
        phones = [ph for g in groups[g0:g1] for ph in g]
        share = np.cumsum([0] + [max(wlens[i], 1) for i in range(w0, w1)], dtype=float)
        cuts = np.rint(share / share[-1] * len(phones)).astype(int)
        for k, i in enumerate(range(w0, w1)):
            a, b = cuts[k], cuts[k + 1]
            start = phones[a][0] if a < len(phones) else phones[-1][1]
            end = phones[b - 1][1] if b > a else start
            out.append(WordSpan(_bare(words[i][0]), words[i][1], words[i][2], float(start), float(end)))
    return out


def _bare(word: str) -> str:
    """The spoken word without the punctuation around it ("fifteen." -> "fifteen")."""
    return word.strip("".join(_PUNCT)) or word


def _frames(p: Any, engine: Any) -> float:
    if getattr(p, "frames", 0):
        return float(p.frames)
    audio = getattr(p, "audio", None)
    return (audio.size if audio is not None else 0) / float(getattr(engine, "hop_length", 256))


def _phones(p: Any, engine: Any) -> list[str]:
    phones = list(p.phonemes)
    clusters = getattr(getattr(engine, "phonemizer", None), "vowel_clusters", None)
    if clusters:
        from voxcli.runtimes.piper.phonemize import merge_vowel_clusters

        phones = merge_vowel_clusters(phones, clusters)
    return phones


def _phone_frames(p: Any, engine: Any) -> list[tuple[str, float, float]] | None:
    """(phoneme, first frame, end frame) of every phoneme, from the ids' durations (None if they disagree)."""
    id_map = getattr(getattr(engine, "voice_config", None), "phoneme_id_map", None)
    if not id_map:
        return None
    n_ids = len(p.ids)
    durations = getattr(p, "durations", None)
    if durations is None or len(durations) != n_ids:
        durations = np.full(n_ids, _frames(p, engine) / max(1, n_ids))  # estimate: an equal share per id
    edges = np.concatenate([[0.0], np.cumsum(np.asarray(durations, float))])
    pad = len(id_map.get("_", [0]))
    i = len(id_map.get("^", [0])) + pad
    out = []
    for ph in _phones(p, engine):
        mapped = id_map.get(ph)
        if mapped is None:
            continue  # phonemes_to_ids skipped it too
        j = i + len(mapped) + pad
        if j > n_ids:
            return None
        out.append((ph, float(edges[i]), float(edges[j])))
        i = j
    return out if i + len(id_map.get("$", [0])) == n_ids else None


def _groups(bounds: list[tuple[str, float, float]]) -> list[list[tuple[float, float]]]:
    """Space-separated phoneme groups (espeak's words), punctuation left out: [(start, end)] per phoneme."""
    groups: list[list[tuple[float, float]]] = [[]]
    for ph, a, b in bounds:
        if ph.isspace():
            if groups[-1]:
                groups.append([])
        elif ph not in _PUNCT:
            groups[-1].append((a, b))
    return [g for g in groups if g]


@lru_cache(maxsize=4096)
def _count(phonemizer: Any, word: str) -> int:
    return sum(1 for s in phonemizer.phonemize(word) for ph in s.phonemes
               if not ph.isspace() and ph not in _PUNCT)


def _phoneme_count(engine: Any, word: str) -> int:
    """Phonemes of `word` said alone (its letters when the engine has no phonemizer)."""
    phonemizer = getattr(engine, "phonemizer", None)
    if phonemizer is None:
        return sum(ch.isalnum() for ch in word)
    try:
        return _count(phonemizer, word.strip("".join(_PUNCT)) or word)
    except Exception:  # noqa: BLE001 - a word espeak refuses still gets a share
        return sum(ch.isalnum() for ch in word)


def _pair(wlens: list[int], glens: list[int]) -> list[tuple[tuple[int, int], tuple[int, int]]]:
    """Monotonic pairing of word runs with group runs (k words : 1 group, or 1 word : l groups).

    One to one when the counts agree; otherwise the pairing whose phoneme counts
    differ least (each extra word or group in a unit costs 0.5, so 1:1 wins ties).
    """
    n, m = len(wlens), len(glens)
    if n == m:
        return [((i, i + 1), (i, i + 1)) for i in range(n)]
    wsum, gsum = _prefix(wlens), _prefix(glens)
    inf = float("inf")
    cost = [[inf] * (m + 1) for _ in range(n + 1)]  # plain lists: this runs before a sentence's first audio
    back: dict[tuple[int, int], tuple[int, int]] = {}
    cost[0][0] = 0.0
    units = [(k, 1) for k in range(1, _MAX_FUSED + 1)] + [(1, l) for l in range(2, 4)]
    for i in range(n + 1):
        row = cost[i]
        for j in range(m + 1):
            c0 = row[j]
            if c0 == inf:
                continue
            for k, l in units:
                if i + k > n or j + l > m:
                    continue
                c = c0 + abs(wsum[i + k] - wsum[i] - gsum[j + l] + gsum[j]) + 0.5 * (k + l - 2)
                if c < cost[i + k][j + l]:
                    cost[i + k][j + l], back[(i + k, j + l)] = c, (i, j)
    if cost[n][m] == inf:  # cannot pair (more groups than 3 per word...): everything in one unit
        return [((0, n), (0, m))]
    out, at = [], (n, m)
    while at != (0, 0):
        prev = back[at]
        out.append(((prev[0], at[0]), (prev[1], at[1])))
        at = prev
    return out[::-1]


def _prefix(values: list[int]) -> list[int]:
    out = [0]
    for v in values:
        out.append(out[-1] + v)
    return out
