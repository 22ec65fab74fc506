"""Subtitles from TTS word times: they parse, match the words within a frame, and an independent
recognizer (Whisper tiny.en's aligned word times, on the same audio) hears each word inside its cue."""
from __future__ import annotations

import re

import numpy as np
import pytest

from tests.tts.test_words import TEXT, frame_s, voice  # noqa: F401 - the fixture
from voxcli.corpus.formats import render
from voxcli.tts import words as W
from voxcli.tts.subtitles import cues
from voxcli.tts.streamer import Voice

_CUE = re.compile(r"(\d+):(\d\d):(\d\d)[,.](\d{3}) --> (\d+):(\d\d):(\d\d)[,.](\d{3})\n(.+?)\n\n", re.S)


def parse(subtitles: str) -> list[tuple[float, float, str]]:
    """(start, end, text) of every SRT or WebVTT cue."""
    out = []
    for m in _CUE.finditer(subtitles):
        h1, m1, s1, ms1, h2, m2, s2, ms2 = (int(x) for x in m.groups()[:8])
        out.append((h1 * 3600 + m1 * 60 + s1 + ms1 / 1000, h2 * 3600 + m2 * 60 + s2 + ms2 / 1000, m.group(9)))
    return out


@pytest.mark.parametrize("fmt", ["srt", "vtt"])
def test_cues_parse_and_match_the_words_within_a_frame(voice: Voice, fmt: str) -> None:
    _, words = W.synthesize(voice, TEXT)
    made = cues(words, TEXT)
    parsed = parse(render(fmt, made, {}))
    texts = [t for _, _, t in parsed]
    assert " ".join(texts) == " ".join(TEXT.split()) and texts[0] == "Dr. Smith paid $3.50 at 8:15."
    assert all(len(t) <= 42 for t in texts[1:])
    assert [t[-1] for t in texts if t[-1] in ".!?"] == [".", ".", "!"], "sentence ends end cues"
    # each cue spans exactly its words: the first word's start and the last word's end
    k, f = 0, frame_s(voice)
    for (start, end, _), cue in zip(parsed, made):
        mine = [w for w in words if start - f < w.start and w.end < end + f]
        assert mine == words[k:k + len(mine)] and mine
        assert abs(start - mine[0].start) < f and abs(end - mine[-1].end) < f
        assert abs(start - cue.start) <= 0.0005 and abs(end - cue.end) <= 0.0005
        k += len(mine)
    assert k == len(words)
    assert all(a[1] <= b[0] for a, b in zip(parsed, parsed[1:]))


def test_a_rewritten_token_is_never_split_between_cues(voice: Voice) -> None:
    text = "He paid $1,234.56 for it."
    _, words = W.synthesize(voice, text)
    made = cues(words, text, max_chars=8)
    assert any("$1,234.56" == c.text for c in made), [c.text for c in made]


def test_whisper_hears_each_word_inside_its_cue_and_near_its_time(voice: Voice) -> None:
    """The independent check: Whisper tiny.en's word times (cross-attention alignment) on the audio."""
    from tests.whisper.conftest import engine
    from voxcli.audio.pcm import resample
    from voxcli.tts.word_pairs import pair, written_tokens

    audio, words = W.synthesize(voice, TEXT)
    asr, _ = engine("whisper-tiny-en")
    heard = asr.transcribe(resample(audio, voice.sample_rate, 16000))
    pairs = pair(words, TEXT, heard)
    assert len(pairs) >= 0.7 * len(written_tokens(words, TEXT)), [h.text for h in heard]
    made = cues(words, TEXT)
    near = 0
    for p in pairs:
        mid = (p.heard.start + p.heard.end) / 2
        assert any(c.start - 0.2 <= mid <= c.end + 0.2 for c in made), p
        near += p.start - 0.15 <= mid <= p.end + 0.15
    assert near >= 0.8 * len(pairs), f"{near}/{len(pairs)} Whisper words within 150 ms of the TTS word"
    assert float(np.median(np.abs([p.start_error for p in pairs]))) < 0.15
