"""Whisper on CTranslate2: features, word grouping and times, forced prefix, the no-speech guard."""
from __future__ import annotations

import numpy as np
import pytest

from tests.asr_checks import BECKETT_REF
from tests.whisper.conftest import SAMPLE_RATE, engine, installed, read16k
from voxcli.bench.wer import word_errors
from voxcli.runtimes.whisper_ct2 import split_at_prefix, split_words, word_times
from voxcli.runtimes.whisper_features import N_FRAMES, context_frames, log_mel, mel_filters


def test_log_mel_is_whispers_window_with_the_padding_floor() -> None:
    t = np.arange(SAMPLE_RATE) / SAMPLE_RATE
    feats = log_mel((0.5 * np.sin(2 * np.pi * 440 * t)).astype(np.float32))
    assert feats.shape == (80, N_FRAMES) and feats.dtype == np.float32
    # Padding frames sit at the clamp floor: (max - 8 + 4) / 4 = max - 2 in the scaled units.
    assert np.allclose(feats[:, 200:], feats.max() - 2.0)
    # A 440 Hz tone is loudest in a low mel band, during the tone only.
    assert 5 <= int(feats[:, 50].argmax()) <= 20 and feats[:, 50].max() > feats[:, 500].max()


def test_mel_filters_are_slaney_triangles() -> None:
    fb = mel_filters(80)
    assert fb.shape == (80, 201) and (fb >= 0).all()
    peaks = fb.argmax(axis=1)
    assert (np.diff(peaks) >= 0).all() and peaks[-1] > 150  # ordered, up to 8 kHz


def test_context_window_grows_with_the_buffer() -> None:
    assert context_frames(SAMPLE_RATE) == 1000  # at least 10 s
    assert context_frames(15 * SAMPLE_RATE) == 2300  # 15 s + 8 s
    assert context_frames(40 * SAMPLE_RATE) == N_FRAMES


def test_split_words_and_word_times() -> None:
    vocab = {1: "ĠFail", 2: "Ġbet", 3: "ter", 4: "."}
    assert split_words([1, 2, 3, 4], vocab.get) == [[1], [2, 3, 4]]
    # After a forced prefix: punctuation and "'re" join its last word, a digit starts a new one.
    vocab.update({5: "ĠWe", 6: "'re", 7: "Ġ1", 8: "-", 9: "4"})
    assert split_at_prefix([1, 4, 2], 1, vocab.get) == [[1, 4], [2]]
    assert split_at_prefix([5, 6], 1, vocab.get) == [[5, 6]]
    assert split_at_prefix([7, 8, 9], 2, vocab.get) == [[7, 8], [9]]
    assert split_at_prefix([1, 2, 3], 0, vocab.get) == [[1], [2, 3]]
    # DTW path: token 0 starts at frame 10, token 1 at 40, token 2 at 60, token 3 at 80.
    pairs = [(0, 10), (0, 20), (1, 40), (2, 60), (2, 70), (3, 80)]
    starts, ends = word_times(pairs, [1, 3], duration=2.0)
    assert starts == [0.2, 0.8] and ends == [0.8, 2.0]


@pytest.mark.parametrize("name", ["whisper-tiny-en", "whisper-base"])
def test_beckett_words_with_real_times(name, speech_samples) -> None:
    asr, _ = engine(name)
    audio = read16k(speech_samples["beckett"])
    words = asr.transcribe(audio)
    assert word_errors(BECKETT_REF, " ".join(w.text for w in words)).rate <= 0.2
    starts = [w.start for w in words]
    assert starts == sorted(starts) and all(w.start <= w.end <= audio.size / SAMPLE_RATE for w in words)
    # Real times, not an even spread: "Ever" opens the clip, "better." is its last word (8-10 s).
    assert words[0].start < 1.0 and 7.0 < words[-1].start < 9.8
    assert all(0.0 < w.prob <= 1.0 for w in words)


def test_prompt_is_forced_as_the_start(speech_samples) -> None:
    asr, _ = engine("whisper-tiny-en")
    audio = read16k(speech_samples["beckett"])[: 5 * SAMPLE_RATE]
    words = [w.text for w in asr.transcribe(audio, prompt="Ever tried, ever")]
    assert words[:3] == ["Ever", "tried,", "ever"] and len(words) >= 5


@pytest.mark.parametrize("name", ["whisper-tiny-en", "whisper-base"])
def test_guard_keeps_whisper_quiet_on_non_speech(name) -> None:
    """Without the guard, tiny.en says " you" over digital silence and "You" over white noise."""
    asr, _ = engine(name)
    rng = np.random.default_rng(16)
    t = np.arange(10 * SAMPLE_RATE) / SAMPLE_RATE
    for what, audio in {
        "silence": np.zeros(10 * SAMPLE_RATE),
        "white noise": rng.normal(0, 0.05, 10 * SAMPLE_RATE),
        "hum": 0.1 * np.sin(2 * np.pi * 220 * t),
    }.items():
        assert asr.transcribe(audio.astype(np.float32)) == [], what


def test_base_joins_its_two_parts_once() -> None:
    bundle = installed("whisper-base")
    from voxcli.runtimes.whisper_parts import model_dir

    joined = model_dir(bundle.path, bundle.derived_dir)
    size = sum(bundle.file(n).stat().st_size for n in ("model.bin.part1", "model.bin.part2"))
    assert (joined / "model.bin").stat().st_size == size and (joined / "tokenizer.json").is_file()
