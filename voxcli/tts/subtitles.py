"""Subtitle cues from TTS word timings (`speak --subtitles out.vtt|out.srt`).

Why cues are cut from words rather than from chunks: a chunk's boundaries
depend on the block scheduler (the load of the machine), a word's do not.
A cue is a run of consecutive words that ends at a sentence end, before a
pause longer than `max_gap_s`, or before it would exceed `max_chars`
characters or `max_s` seconds (the usual reading-speed limits). Words read
from one written token ("$3.50": three dollars and fifty cents) are never
split across cues. A cue's text is the ORIGINAL text of its words (the
written "$3.50", not the spoken words), its times the first word's start
and the last word's end: exactly the word timings, so the cues match the
audio to the millisecond rounding of the file format.

Rendering (SRT / WebVTT) is `voxcli.corpus.formats.render`, shared with
`transcribe`; this module only decides the cues.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Final, Sequence

from voxcli.events import Word
from voxcli.tts import abbreviations
from voxcli.tts.chunker import SENTENCE_END

_CLOSERS: Final = "\"')]}»”’"


@dataclass(frozen=True)
class Cue:
    """One subtitle: original text and its time span in the audio (seconds)."""

    text: str
    start: float
    end: float


def cues(words: Sequence[Word], text: str, *, max_chars: int = 42, max_s: float = 5.0,
         max_gap_s: float = 0.6) -> list[Cue]:
    """Cues for `words` (stream order, with char spans into `text`, the text that was spoken)."""
    runs = _runs(words)
    out: list[Cue] = []
    group: list[list[Word]] = []
    for run in runs:
        if group and _breaks(group, run, text, max_chars, max_s, max_gap_s):
            out.append(_cue(group, text))
            group = []
        group.append(run)
    if group:
        out.append(_cue(group, text))
    return out


def _runs(words: Sequence[Word]) -> list[list[Word]]:
    """Consecutive words read from the same written span (one rewritten token) kept together."""
    runs: list[list[Word]] = []
    for w in words:
        if runs and (w.char_start, w.char_end) == (runs[-1][-1].char_start, runs[-1][-1].char_end):
            runs[-1].append(w)
        else:
            runs.append([w])
    return runs


def _span(group: list[list[Word]]) -> tuple[int, int]:
    return int(group[0][0].char_start or 0), int(group[-1][-1].char_end or 0)


def _breaks(group: list[list[Word]], run: list[Word], text: str, max_chars: int, max_s: float,
            max_gap_s: float) -> bool:
    """Whether `run` starts a new cue after `group`."""
    last = group[-1][-1]
    if _ends_sentence(text, int(last.char_start or 0), int(last.char_end or 0)):
        return True
    if run[0].start - last.end > max_gap_s:
        return True
    grown = len(" ".join(text[_span(group)[0]:int(run[-1].char_end or 0)].split()))
    return grown > max_chars or run[-1].end - group[0][0].start > max_s


def _ends_sentence(text: str, a: int, b: int) -> bool:
    """The written span ends a sentence: "8:15." and "why?" do, "Dr. Smith" does not (the shared table)."""
    written = text[a:b].rstrip(_CLOSERS)
    if written[-1:] not in SENTENCE_END:
        return False
    token = written.split()[-1] if written.split() else ""
    if written.endswith(".") and (abbr := abbreviations.find(token[:-1].lstrip(_CLOSERS + "(["), text[b:].lstrip())):
        previous = text[:a].split()[-1:] or [""]
        return abbreviations.ends_sentence(abbr, previous[0], text[b:].lstrip())
    return True


def _cue(group: list[list[Word]], text: str) -> Cue:
    a, b = _span(group)
    written = " ".join(text[a:b].split()) or " ".join(w.text for run in group for w in run)
    return Cue(written, group[0][0].start, group[-1][-1].end)
