"""TTS word timings on the real Piper voice: durations -> words -> written characters -> chunks.

The voice runs with noise scales 0, so its durations (and audio) are the same
every run. Whole-sentence synthesis (`voxcli.tts.words.synthesize`, the same
audio as `Voice.synthesize`) gives the reference word times; streamed chunks
must carry the same words, each in the chunk where it starts.
"""
from __future__ import annotations

import re

import numpy as np
import pytest

from voxcli.events import AudioChunk, Word
from voxcli.tts import words as W
from voxcli.tts.normalize import normalize_text, speakable
from voxcli.tts.streamer import TTSStreamer, Voice

TEXT = ("Dr. Smith paid $3.50 at 8:15. Of the people there, it was the best of them all. "
        "The morning train was late again today, and nobody knew why!")


@pytest.fixture(scope="module")
def voice(voice_bundle) -> Voice:  # type: ignore[no-untyped-def]
    from voxcli.runtimes.piper.voice import PiperVoice

    engine = PiperVoice.load(voice_bundle.file("en_US-joe-medium.onnx"),
                             voice_bundle.file("en_US-joe-medium.onnx.json"),
                             derived_dir=voice_bundle.derived_dir, normalizer=normalize_text)
    engine.scales = np.array([0.0, engine.scales[1], 0.0], np.float32)  # deterministic durations and audio
    return Voice(engine, voice_bundle.name)


def frame_s(voice: Voice) -> float:
    return voice.engine.hop_length / voice.sample_rate


def test_the_front_part_gives_durations_that_fill_the_sentence(voice: Voice) -> None:
    for p in voice.engine.prepare(speakable(TEXT), normalize=False):
        assert p.durations is not None and len(p.durations) == len(p.ids)
        assert (p.durations >= 0).all() and int(p.durations.sum()) == p.frames


def test_word_times_are_the_durations_of_their_phonemes(voice: Voice) -> None:
    """Every word boundary sits on a phoneme boundary of the durations (within one frame), and word ends
    are where the next space or punctuation phoneme begins: the times are the model's own."""
    engine, hop, sr = voice.engine, voice.engine.hop_length, voice.sample_rate
    audio, words = W.synthesize(voice, TEXT)
    base, k = 0, 0
    for p in engine.prepare(speakable(TEXT), normalize=False):
        edges = np.concatenate([[0], np.cumsum(p.durations)]) * hop / sr + base / sr
        n = len(p.text.split())
        for w in words[k:k + n]:
            assert np.min(np.abs(edges - w.start)) <= frame_s(voice) + 1e-9, w
            assert np.min(np.abs(edges - w.end)) <= frame_s(voice) + 1e-9, w
            assert base / sr <= w.start < w.end <= (base + p.frames * hop) / sr
        k, base = k + n, base + p.frames * hop
    assert k == len(words) and base == audio.size
    assert np.array_equal(audio, voice.synthesize(TEXT)), "the same audio as Voice.synthesize"
    starts = [w.start for w in words]
    assert starts == sorted(starts) and all(a.end <= b.start + 1e-9 for a, b in zip(words, words[1:]))


def test_words_map_back_to_the_written_characters(voice: Voice) -> None:
    _, words = W.synthesize(voice, TEXT)
    spans = [(w.text, TEXT[w.char_start:w.char_end]) for w in words]
    assert spans[:11] == [("Doctor", "Dr."), ("Smith", "Smith"), ("paid", "paid"), ("three", "$3.50"),
                          ("dollars", "$3.50"), ("and", "$3.50"), ("fifty", "$3.50"), ("cents", "$3.50"),
                          ("at", "at"), ("eight", "8:15."), ("fifteen", "8:15.")]
    # every written word is covered, in order, by the words read from it
    written = [m.span() for m in re.finditer(r"\S+", TEXT)]
    assert sorted({(w.char_start, w.char_end) for w in words}) == written
    assert [(w.char_start, w.char_end) for w in words] == sorted((w.char_start, w.char_end) for w in words)


def test_espeak_fusing_words_still_gives_each_word_a_share(voice: Voice) -> None:
    """espeak reads "of the" as one group ("ʌvðə"): both words get their own, consecutive time."""
    _, words = W.synthesize(voice, "Most of the people were at the end of the road.")
    assert [w.text for w in words] == "Most of the people were at the end of the road".split()
    assert all(w.end > w.start for w in words)
    assert all(a.end <= b.start + 1e-9 for a, b in zip(words, words[1:]))


def _stream_words(chunks: list[AudioChunk], sample_rate: int) -> list[Word]:
    """The chunks' words, checking each starts inside its chunk (stream time = samples before it)."""
    out, at = [], 0
    for c in chunks:
        for w in c.words:
            assert at / sample_rate - 1e-9 <= w.start < (at + c.audio.size) / sample_rate, (c.index, w)
        out += c.words
        at += c.audio.size
    return out


def test_streamed_chunks_carry_the_words_in_order(voice: Voice) -> None:
    chunks = list(voice.stream(TEXT))
    assert chunks[-1].kind == "final" and chunks[-1].words == ()
    words = _stream_words(chunks[:-1], voice.sample_rate)
    _, whole = W.synthesize(voice, TEXT)
    assert [(w.text, w.char_start, w.char_end) for w in words] == [(w.text, w.char_start, w.char_end) for w in whole]
    total = sum(c.audio.size for c in chunks) / voice.sample_rate
    assert words[-1].end <= total + 1e-9
    assert all(a.start < b.start for a, b in zip(words, words[1:]))


def test_send_in_pieces_gives_the_spans_of_the_whole_text(voice: Voice) -> None:
    """Deltas cut anywhere (inside "$3.50", "8:15", "Dr."): spans index the concatenated text, the same
    words and spans as one incremental send and as the text given whole (`Voice.stream`: whole sentences)."""
    cuts = [2, 5, 18, 27, 40, 77, 120]
    pieces = [TEXT[a:b] for a, b in zip([0] + cuts, cuts + [len(TEXT)])]
    s = TTSStreamer(voice)
    for piece in pieces:
        s.send(piece)
    s.finish()
    piecewise = _stream_words(list(s.output)[:-1], voice.sample_rate)
    one = TTSStreamer(voice)
    one.send(TEXT)
    one.finish()
    incremental = _stream_words(list(one.output)[:-1], voice.sample_rate)
    whole = _stream_words(list(voice.stream(TEXT))[:-1], voice.sample_rate)
    spans = [(w.text, w.char_start, w.char_end) for w in piecewise]
    assert spans == [(w.text, w.char_start, w.char_end) for w in incremental]
    assert spans == [(w.text, w.char_start, w.char_end) for w in whole]
    # Times are not compared: where the chunker cuts incremental text depends on what had arrived when
    # the producer asked (timing), and a cut moves the prosody. They only have to run forward.
    starts = [w.start for w in piecewise]
    assert starts == sorted(starts) and all(w.end > w.start for w in piecewise)


def test_the_whole_graph_fallback_estimates_words_over_the_audio(voice: Voice) -> None:
    """No durations (a voice that cannot be split): an equal share per phoneme id, inside the audio."""
    p = voice.engine.prepare("Hello there, general Kenobi.", normalize=False)[0]
    p.durations = None
    words = [("Hello", 0, 5), ("there,", 6, 12), ("general", 13, 20), ("Kenobi.", 21, 28)]
    spans = W.sentence_spans(p, voice.engine, words)
    assert [s.text for s in spans] == ["Hello", "there", "general", "Kenobi"]
    assert 0 <= spans[0].start_frame < spans[-1].end_frame <= p.frames
