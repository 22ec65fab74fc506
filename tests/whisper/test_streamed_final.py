"""The streamed final keeps every word when the final decode writes the speech differently.

Whisper writes counting as one hyphenated token ("1-2-3-4-5-6-7-8-9") when it decodes a whole
utterance unforced, while its forced step decodes wrote "1, 2, 3, 4, 5 6 7 8". Lining those up word
by word used to drop what came after the stable words: the streamed transcript of counting.wav
ended at "8" (issue 16's dev-set run found it). The streamer now decodes such a final again, forced
with the shown words.
"""
from __future__ import annotations

import re

import pytest

from tests.asr_checks import feed
from tests.whisper.conftest import WHISPER_MODELS, engine, installed, read16k
from voxcli.asr.streamer import ASRStreamer


@pytest.mark.parametrize("name", WHISPER_MODELS)
def test_streamed_counting_keeps_nine_and_ten(name) -> None:
    asr, vad = engine(name)
    audio = read16k(installed("speech-clips-en").file("counting.wav"))
    s = ASRStreamer(asr, vad, lockstep=True)
    text, captions, _ = feed(s, audio, 0.1)
    numbers = re.findall(r"\d+|one|two|three|four|five|six|seven|eight|nine|ten", text.lower())
    assert numbers[-2:] in (["9", "10"], ["nine", "ten"]), text
    finals = [c for c in captions if c.is_final]
    assert finals and all(f.stable for f in finals)
