"""End to end: normalized text, spoken by the default voice, is heard as the expected words by voxcli's own ASR.

A subset of the table (tests/tts/test_normalize_table.py) where espeak-ng alone
is misheard: prices, ISO dates, "Dec. 1", years and decades, ranges with
units, Roman numerals, titles, "C#". The whole table is scored by
benchmarks/bench_normalize.py (README: "Text normalization").
"""
from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import numpy as np
import pytest

from tests.helpers.voices import joe_engine
from tests.tts.test_normalize_table import CASES
from voxcli.asr.batch import transcribe_audio
from voxcli.audio.pcm import resample
from voxcli.bench.wer import WER
from voxcli.tts.normalize import strip_markup, strip_unspeakable

_BENCH = Path(__file__).resolve().parents[2] / "benchmarks" / "bench_normalize.py"
_spec = importlib.util.spec_from_file_location("bench_normalize", _BENCH)
bench = importlib.util.module_from_spec(_spec)  # type: ignore[arg-type]
sys.modules["bench_normalize"] = bench
_spec.loader.exec_module(bench)  # type: ignore[union-attr]

SUBSET = ("It costs $3.50 today.", "Worth $5bn today.", "On 2026-12-01 we launch.", "See you Dec. 1 then.",
          "Since 2010 we grew.", "The 1980s had big hair.", "Run 5-10 km daily.", "After World War II ended.",
          "Gov. Smith arrived.", "Capt. Cook sailed far.", "Play it in C# major.", "The bell rang at 14:00.")


@pytest.fixture(scope="module")
def models(voice_bundle, asr_bundle, vad_bundle):  # type: ignore[no-untyped-def]
    from voxcli.runtimes.moonshine import MoonshineASR
    from voxcli.runtimes.silero_vad import SileroVAD
    from voxcli.tts.streamer import Voice

    return Voice(joe_engine(voice_bundle), voice_bundle.name), MoonshineASR.load(asr_bundle.path), \
        SileroVAD.load(vad_bundle.file("silero_vad.onnx"))


def _wer(say, models) -> tuple[WER, list[str]]:  # type: ignore[no-untyped-def]
    voice, asr, vad = models
    total, heard = WER(0, 0, 0, 0), []
    for _, text, spoken in (c for c in CASES if c[1] in SUBSET):
        audio = resample(say(text), voice.sample_rate, 16000)
        heard.append(" ".join(u.text for u in transcribe_audio(asr, vad, audio)))
        total = total + bench.score(spoken, heard[-1])
    return total, heard


def test_subset_is_in_the_table() -> None:
    assert set(SUBSET) <= {t for _, t, _ in CASES}


def test_normalized_speech_is_heard_as_the_expected_words(models) -> None:  # type: ignore[no-untyped-def]
    voice = models[0]

    def streamed(text: str) -> np.ndarray:
        return np.concatenate([c.audio for c in voice.stream(text) if c.audio.size])

    ours, heard = _wer(streamed, models)
    assert ours.ref_words >= 60
    # Measured 2-8 errors in 67 words (3-12 %) over 7 runs: Piper's noise makes every rendition differ,
    # and Moonshine tiny mishears some of them ("Capt. Cook sailed" -> "Cap and cookselled").
    assert ours.rate <= 0.2, heard

    def espeak_alone(text: str) -> np.ndarray:
        return voice.engine.synthesize(strip_markup(strip_unspeakable(text)), normalize=False)

    theirs, heard = _wer(espeak_alone, models)
    assert theirs.rate >= ours.rate + 0.2, heard  # measured 70 %: normalization is what makes these heard
