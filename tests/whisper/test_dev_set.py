"""Batch WER of every ASR model on the dev set: human speech (Beckett, A Tale of Two Cities) and the clips.

Bounds hold each model near what it measured here (see the notes of issue
16: moonshine-tiny 5.3 %, whisper-tiny-en 4.6 %, whisper-base 2.6 %,
moonshine-base 2.6 % over 152 words), with room for a word or two of drift
from thread timing; the side-by-side figures come from `voxcli bench asr`.
"""
from __future__ import annotations

import pytest

from tests.whisper.conftest import SAMPLE_RATE, engine
from voxcli.asr.batch import transcribe_audio
from voxcli.bench.wer import WER, word_errors

MAX_WER = {"moonshine-tiny-en": 0.08, "moonshine-base-en": 0.05, "whisper-tiny-en": 0.07, "whisper-base": 0.05}


@pytest.mark.parametrize("name", sorted(MAX_WER))
def test_dev_set_wer(name, dev_set) -> None:
    asr, vad = engine(name)
    total = WER(0, 0, 0, 0)
    for clip, audio, ref in dev_set:
        vad.reset()
        hyp = " ".join(u.text for u in transcribe_audio(asr, vad, audio))
        total = total + word_errors(ref, hyp)
        assert word_errors(ref, hyp).rate <= 0.5, (clip, hyp)
    assert total.ref_words >= 97
    assert total.rate <= MAX_WER[name], total


def test_whisper_word_times_follow_the_speech(dev_set) -> None:
    """Two Cities' first 25 s: word starts increase and the last one is near the end of what was said."""
    asr, _ = engine("whisper-tiny-en")
    audio = next(a for clip, a, _ in dev_set if clip == "two_cities")[: 25 * SAMPLE_RATE]
    words = asr.transcribe(audio)
    starts = [w.start for w in words]
    assert len(words) > 40 and starts == sorted(starts)
    assert 20.0 < words[-1].end <= 25.0
