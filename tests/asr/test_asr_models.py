"""Moonshine and Silero VAD on real speech (no mocks)."""
from __future__ import annotations

import numpy as np
import pytest

from tests.asr_checks import BECKETT_REF
from voxcli.audio.files import read_audio
from voxcli.asr.batch import split_long, transcribe_audio
from voxcli.asr.endpointer import FRAME, Endpointer, VADConfig, speech_segments
from voxcli.bench.wer import word_errors
from voxcli.errors import ModelNotFoundError
from voxcli.runtimes.moonshine import MoonshineASR
from voxcli.runtimes.silero_vad import SileroVAD


@pytest.fixture(scope="module")
def silero(vad_bundle) -> SileroVAD:
    return SileroVAD.load(vad_bundle.file("silero_vad.onnx"))


@pytest.fixture(scope="module")
def beckett(speech_samples) -> np.ndarray:
    return read_audio(speech_samples["beckett"], rate=16000)[0]


def test_batch_transcript_of_beckett_matches_reference(moonshine, beckett) -> None:
    words = moonshine.transcribe(beckett)
    text = " ".join(w.text for w in words)
    assert word_errors(BECKETT_REF, text).rate <= 0.1, text
    # Times are estimates spread over the buffer, in order, inside it.
    assert words[0].start == 0.0 and words[-1].end <= beckett.size / 16000 + 1e-6
    assert all(a.end <= b.start + 1e-6 for a, b in zip(words, words[1:]))


def test_prompt_is_forced_as_prefix(moonshine, beckett) -> None:
    text = moonshine.text(beckett[: 16000 * 4], prompt="Ever tried ever")
    assert text.lower().startswith("ever tried ever")
    assert "fail" in text.lower()


def test_token_budget_bounds_runaway_decoding(moonshine) -> None:
    # White noise invites repetition loops; the budget (6.5 tokens/s + 10) must hold.
    noise = np.random.default_rng(0).normal(0, 0.3, 16000 * 2).astype(np.float32)
    assert len(moonshine.generate(noise)) <= MoonshineASR.max_tokens(noise.size)
    assert MoonshineASR.max_tokens(16000) == 17


def test_tiny_input_does_not_crash(moonshine) -> None:
    assert isinstance(moonshine.transcribe(np.zeros(10, np.float32)), list)


def test_missing_model_files_raise_model_not_found(tmp_path) -> None:
    with pytest.raises(ModelNotFoundError):
        MoonshineASR.load(tmp_path)
    with pytest.raises(ModelNotFoundError):
        SileroVAD.load(tmp_path / "none.onnx")


def test_vad_finds_the_six_phrases_of_beckett(silero, beckett) -> None:
    segs = list(speech_segments(silero, beckett))
    assert len(segs) == 6, segs  # "Ever tried." ... "Fail better." with ~1 s pauses
    assert all(0 <= s < e <= beckett.size for s, e in segs)
    assert all(a[1] <= b[0] for a, b in zip(segs, segs[1:]))


def test_vad_finds_no_speech_in_silence_or_low_noise(silero) -> None:
    assert list(speech_segments(silero, np.zeros(16000 * 3, np.float32))) == []
    hiss = np.random.default_rng(1).normal(0, 0.002, 16000 * 3).astype(np.float32)
    assert list(speech_segments(silero, hiss)) == []


def test_vad_streaming_probs_equal_one_shot(silero, beckett) -> None:
    silero.reset()
    whole = silero.probs(beckett[:16000])
    silero.reset()
    parts = np.concatenate([silero.probs(beckett[i : i + 700]) for i in range(0, 16000, 700)])
    assert parts.size == whole.size == 16000 // FRAME
    np.testing.assert_allclose(parts, whole, atol=1e-5)


def test_endpointer_hysteresis_min_speech_and_hold() -> None:
    cfg = VADConfig(threshold=0.5, min_speech_ms=96, endpoint_ms=160)  # 3 frames, 5 frames
    ep = Endpointer(cfg)
    script = [0.1, 0.9, 0.2] + [0.9] * 4 + [0.45] * 3 + [0.1] * 4 + [0.9] + [0.1] * 5
    events = [(i, e) for i, p in enumerate(script) if (e := ep.feed(p))]
    # The 1-frame blip is ignored; 0.45 is between the thresholds (still speech);
    # the 1-frame return to speech resets the hold; the end is where silence began.
    assert [(i, e.kind, e.sample // FRAME) for i, e in events] == [(5, "start", 3), (19, "end", 15)]


def test_endpointer_reports_an_unconfirmed_speech_start() -> None:
    """The streamer keeps the audio of a speech run that may still become an utterance (public API,
    it used to read the private `_candidate`)."""
    ep = Endpointer(VADConfig(threshold=0.5, min_speech_ms=96))  # 3 frames
    assert [ep.feed(p) for p in (0.1, 0.9)] == [None, None] and ep.candidate_sample == 1 * FRAME
    assert ep.feed(0.9) is None and ep.candidate_sample == 1 * FRAME
    assert ep.feed(0.9).kind == "start"
    ep2 = Endpointer()
    ep2.feed(0.9)
    ep2.feed(0.01)  # below the low threshold: the run is dropped
    assert ep2.candidate_sample is None


def test_the_endpoint_default_is_the_one_in_the_defaults_table() -> None:
    from voxcli.asr.open_streamer import open_asr_streamer
    from voxcli.chat.agent import AgentConfig
    from voxcli.config import DEFAULT_ENDPOINT_MS
    import inspect

    assert VADConfig().endpoint_ms == AgentConfig().endpoint_ms == DEFAULT_ENDPOINT_MS
    assert inspect.signature(open_asr_streamer).parameters["endpoint_ms"].default == DEFAULT_ENDPOINT_MS


def test_split_long_cuts_at_the_quietest_frame() -> None:
    probs = np.ones(100, np.float32)
    probs[70] = 0.0
    pieces = split_long(probs, 0, 100 * FRAME, 80 * FRAME)
    assert pieces == [(0, 70 * FRAME + FRAME // 2), (70 * FRAME + FRAME // 2, 100 * FRAME)]


def test_offline_transcription_is_vad_segmented(moonshine, silero, beckett) -> None:
    utts = list(transcribe_audio(moonshine, silero, beckett))
    assert len(utts) == 6
    assert word_errors(BECKETT_REF, " ".join(u.text for u in utts)).rate <= 0.15
    assert list(transcribe_audio(moonshine, silero, np.zeros(16000, np.float32))) == []
