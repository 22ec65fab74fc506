"""Incremental text chunking for streaming TTS: emit speakable pieces as soon as they are safe.

Why incremental and deterministic: text arrives in arbitrary deltas (LLM tokens,
bytes from a pipe), and the first audio should start after the first clause,
not after the whole answer. A cut may only be decided once the characters that
decide it have arrived (a "." is a sentence end only if the next non-space
character says so), and it is decided from the text alone, never from where a
delta happened to end: so the chunks are the same however the text was cut,
and their concatenation is exactly the input (whitespace stays with the chunk
it follows).

Algorithm in one line: scan forward from the last undecided position; at each
punctuation or whitespace run, wait until the next non-space character (or the
end) is known, then cut after the run if the rule for this chunk allows it.

Two policies (issue 15): for incremental text (an LLM, `speak -`) the first
chunk is short (`first_words`, or the first clause) because the rest of its
sentence may not even exist yet. For text known up front (`whole_sentences`:
an argument, `Voice.stream(text)`) only sentence ends and paragraph breaks
cut: the voice decodes a whole sentence in blocks, so the first audio comes
early without cutting the sentence's prosody in two.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Final

from voxcli.tts import abbreviations

SENTENCE_END: Final = frozenset(".!?…")
CLAUSE_END: Final = frozenset(",;:—–")
CLOSERS: Final = frozenset("\"')]}»”’")

_DOTTED: Final = re.compile(r"^(?:[A-Za-z]\.)+[A-Za-z]$")  # U.S, e.g, a.m, i.e


@dataclass(frozen=True)
class ChunkerConfig:
    """Chunk size policy (characters and words, not time: it must not depend on arrival)."""

    first_words: int = 4
    """The first chunk ends after this many words if no clause ended sooner (0 = off).

    Measured (benchmarks/bench_tts.py, 2 loaded cores): warm TTFA p50 80 ms with 8
    words, 61 ms with 4: the front part's cost grows with the chunk's length."""
    long_chars: int = 160
    """Later chunks end at a clause boundary once they are at least this long."""
    max_chars: int = 400
    """Forced split at the last whitespace before this many characters."""
    flush_min_words: int = 3
    """`flush()` (the streamer's time-based flush) speaks nothing shorter than this many words."""
    whole_sentences: bool = False
    """The text is known up front: cut only at sentence ends and paragraph breaks (no short
    first chunk, no clause or line cuts; a sentence over `max_chars` is still split, at its
    last clause boundary if it has one)."""

    def __post_init__(self) -> None:
        if self.max_chars < 2 or self.first_words < 0 or self.long_chars < 1 or self.flush_min_words < 1:
            raise ValueError(f"invalid chunker config: {self}")


_WAIT = -1  # the deciding characters have not arrived yet
_NO = -2  # not a cut here; keep scanning


class TextChunker:
    """Cut a stream of text deltas into chunks at linguistic boundaries.

    `feed(delta)` returns the chunks that became safe to speak; `finish()`
    returns the rest. Not thread-safe (the streamer serializes calls).
    """

    def __init__(self, config: ChunkerConfig | None = None) -> None:
        self.config = config or ChunkerConfig()
        self._buf = ""
        self._pos = 0  # first undecided position in _buf
        self._words = 0  # words completed in the current chunk before _pos
        self._index = 0  # chunks emitted so far
        self._prev = ""  # last character emitted (line-start detection for "1. ")
        self._finished = False

    @property
    def pending(self) -> str:
        """Text received but not yet emitted."""
        return self._buf

    def feed(self, delta: str) -> list[str]:
        if self._finished:
            raise RuntimeError("feed() after finish()")
        if not delta:
            return []
        self._buf += delta
        return self._drain(final=False)

    def finish(self) -> list[str]:
        """Emit everything still buffered (the last chunk keeps trailing whitespace)."""
        if self._finished:
            return []
        out = self._drain(final=True)
        if self._buf:
            out.append(self._emit(len(self._buf)))
        self._finished = True
        return out

    def flush(self) -> list[str]:
        """Cut what is safe to speak now although no boundary came (the text stalled).

        The cut is the last one that leaves no word, number or abbreviation
        in two pieces: after a whitespace run whose word is complete and is
        not a title ("Dr. "), "e.g.", an initial, a list number or a number
        that may go on ("10 " before "000"); or at the very end after a
        finished word's punctuation ("there." but not "3." or "etc.").
        Nothing if that leaves fewer than `flush_min_words` words.
        """
        if self._finished:
            return []
        cut = _last_safe_cut(self._buf, self._prev)
        if cut <= 0 or len(self._buf[:cut].split()) < self.config.flush_min_words:
            return []
        return [self._emit(cut)]

    # -- scanning ---------------------------------------------------------------

    def _drain(self, final: bool) -> list[str]:
        out: list[str] = []
        while True:
            cut = self._scan(final)
            if cut is None:
                return out
            out.append(self._emit(cut))

    def _emit(self, cut: int) -> str:
        chunk, self._buf = self._buf[:cut], self._buf[cut:]
        self._pos = 0
        self._words = 0
        self._index += 1
        self._prev = chunk[-1]
        return chunk

    def _scan(self, final: bool) -> int | None:
        buf, n, cfg = self._buf, len(self._buf), self.config
        while self._pos < n:
            p = self._pos
            if p >= cfg.max_chars:
                return self._forced_cut()
            c = buf[p]
            if c in SENTENCE_END or c in CLAUSE_END or (c == "-" and _spaced_dash(buf, p)):
                q = _punct_run_end(buf, p)
                r = _space_run_end(buf, q)
                if r == q:  # no whitespace after the run: "3.50", "10:30", "a.b", "?x="
                    if q == n and not final:
                        return None
                    self._pos = q
                    continue
                if r == n and not final:
                    return None
                decision = self._punct_decision(buf, p, q, r, final)
                if decision >= 0:
                    return decision
                self._pos = q
                continue
            if c.isspace() and p > 0 and not buf[p - 1].isspace():
                r = _space_run_end(buf, p)
                if r == n and not final:
                    return None
                newlines = buf.count("\n", p, r)
                words = self._words + 1
                if newlines >= 2 or (r < n and newlines == 1 and self._clause_ok(r)
                                     and _safe_after(buf, p, r, self._prev)):  # not "e.g. \n a"
                    return r
                if (self._index == 0 and cfg.first_words and words >= cfg.first_words and r < n
                        and not cfg.whole_sentences
                        and _safe_after(buf, p, r, self._prev)):  # not "We all met Dr. | Smith"
                    return r
                self._words = words
                self._pos = r
                continue
            self._pos = p + 1
        return None

    def _clause_ok(self, cut: int) -> bool:
        """A clause boundary cuts the first chunk, or a later one that is already long (never whole sentences)."""
        if self.config.whole_sentences:
            return False
        return self._index == 0 or cut >= self.config.long_chars

    def _punct_decision(self, buf: str, p: int, q: int, r: int, final: bool) -> int:
        if r == len(buf):  # only trailing whitespace left (final): let finish() take it
            return _NO
        run = buf[p:q]
        nxt = buf[r]
        paragraph = buf.count("\n", q, r) >= 2
        if buf[p] == "," and nxt.isdigit() and not paragraph:  # "Dec. 1, | 2026" reads as a date only whole
            return _NO
        if buf[p] in CLAUSE_END or buf[p] == "-":
            return r if (paragraph or self._clause_ok(r)) else _NO
        if paragraph:
            return r
        if "!" in run or "?" in run:
            return r
        if "…" in run or run.count(".") >= 2:  # ellipsis: a pause unless a new sentence starts
            return r if nxt.isupper() else _NO
        if nxt.islower():
            return _NO
        token = _token_before(buf, p)
        abbr = abbreviations.find(token, nxt)
        if abbr is not None:  # the normalizer keeps a period exactly where this cuts
            previous = _token_before(buf, len(buf[:p - len(token)].rstrip()))
            return r if abbreviations.ends_sentence(abbr, previous, nxt) else _NO
        if _DOTTED.match(token):
            return _NO
        if len(token) == 1 and token.isupper():  # an initial: "J. R. R. Tolkien"
            return _NO
        if token.isdigit() and len(token) <= 3:  # list enumerator or ordinal at line start: "1. Buy"
            start = p - len(token)
            before = buf[start - 1] if start > 0 else self._prev
            if before in ("", "\n"):
                return _NO
        return r

    def _forced_cut(self) -> int:
        """No boundary within max_chars: cut after the last clause mark (or whitespace, or hard)."""
        limit = self.config.max_chars
        buf = self._buf
        space = 0
        for i in range(limit - 1, 0, -1):
            if buf[i].isspace():
                if buf[i - 1] in CLAUSE_END and not buf[i - 2:i - 1].isdigit():  # not "1, 000"
                    return i + 1
                space = space or i + 1
        return space or limit


_WORD: Final = re.compile(r"[^\W\d_]+(?:['’-][^\W\d_]+)*")  # letters, inner apostrophes/hyphens


def _last_safe_cut(buf: str, prev: str) -> int:
    """The last position where a stalled buffer may be cut (see `TextChunker.flush`); 0 if none."""
    n = len(buf)
    stripped = buf.rstrip()
    if stripped and stripped[-1] in SENTENCE_END | CLAUSE_END | CLOSERS and len(stripped) == n:
        if _ends_with_finished_word(buf):
            return n
    r = n
    while r > 0:
        q = len(buf[:r].rstrip())
        if q < r and q > 0 and _safe_after(buf, q, r, prev):
            return r
        while r > 0 and buf[r - 1].isspace():  # to the start of this whitespace run ...
            r -= 1
        while r > 0 and not buf[r - 1].isspace():  # ... and over the word before it
            r -= 1
    return 0


def _ends_with_finished_word(buf: str) -> bool:
    """"there." / "yes!" / "well," at the end: the punctuation closes a word that cannot go on."""
    token = _token_before(buf, len(buf)).rstrip("".join(CLOSERS))
    word = token.rstrip("".join(SENTENCE_END | CLAUSE_END))
    if not _WORD.fullmatch(word) or (len(word) == 1 and (word.isupper() or token.endswith("."))):
        return False  # "J." an initial; "e." may still become "e.g." / "i.e."
    return not (token.endswith(".") and abbreviations.find(word, "0") is not None)


def _safe_after(buf: str, q: int, r: int, prev: str) -> bool:
    """May a chunk end after the whitespace run buf[q:r] (the word before it is complete)?"""
    token = _token_before(buf, q)
    nxt = buf[r] if r < len(buf) else ""  # "": not arrived yet
    core = token.rstrip("".join(CLOSERS))
    if not core:
        return False
    if core[-1].isdigit() and (not nxt or nxt.isdigit()):
        return False  # "10 000", or a number whose unit/next digits have not arrived
    if not core.endswith("."):
        return True
    word = core.rstrip(".")
    if _DOTTED.match(word) or (len(word) == 1 and word.isalpha()):
        return False  # "U.S. Army", "J. R. R."
    abbr = abbreviations.find(word, nxt or "0")  # unknown next: it may be a number ("No. 5")
    if abbr is not None:
        if not nxt:
            return False
        previous = _token_before(buf, len(buf[:q - len(token)].rstrip()))
        return abbreviations.ends_sentence(abbr, previous, nxt)
    if word.isdigit() and len(word) <= 3:  # "1. " at a line start is a list number
        start = q - len(token)
        before = buf[start - 1] if start > 0 else prev
        return before not in ("", "\n")
    return True


def _punct_run_end(buf: str, p: int) -> int:
    """End of a punctuation run with its closing quotes/brackets ('?!', '...', '."')."""
    q = p + 1
    n = len(buf)
    while q < n and (buf[q] in SENTENCE_END or buf[q] in CLOSERS or (buf[q] == buf[p] and buf[p] in CLAUSE_END)):
        q += 1
    return q


def _space_run_end(buf: str, q: int) -> int:
    n = len(buf)
    while q < n and buf[q].isspace():
        q += 1
    return q


def _spaced_dash(buf: str, p: int) -> bool:
    """A hyphen used as a dash: " - " or " -- ", not "well-known" or "-5"."""
    return p > 0 and buf[p - 1] in " \t"


def _token_before(buf: str, p: int) -> str:
    """The word (with inner dots) ending just before position p, without opening quotes."""
    i = p
    while i > 0 and not buf[i - 1].isspace():
        i -= 1
    return buf[i:p].lstrip("\"'([{«“‘")


def chunk_text(text: str, config: ChunkerConfig | None = None) -> list[str]:
    """All chunks of a complete text (convenience for tests and the one-shot path)."""
    chunker = TextChunker(config)
    return chunker.feed(text) + chunker.finish()
