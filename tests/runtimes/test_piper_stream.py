"""Block-wise decoding of the real joe voice: exact coverage, first block size, fidelity."""
from __future__ import annotations

import multiprocessing
import os
from pathlib import Path

import numpy as np
import pytest

from voxcli.runtimes.onnx import session
from voxcli.tts.normalize import normalize_text
from voxcli.runtimes.piper.graph_split import SplitError, find_latent, find_prior, load_or_split
from voxcli.runtimes.piper.voice import PiperVoice, Prepared, StreamConfig

LONG = ("It was the best of times, it was the worst of times, it was the age of wisdom, "
        "it was the age of foolishness, it was the epoch of belief.")


@pytest.fixture(scope="module")
def voice_files(voice_bundle):
    return voice_bundle.file("en_US-joe-medium.onnx"), voice_bundle.file("en_US-joe-medium.onnx.json")


@pytest.fixture(scope="module")
def voice(voice_files, tmp_path_factory) -> PiperVoice:
    onnx_path, config_path = voice_files
    # The TTS layer's text rules, as voxcli.tts.streamer.load_voice passes them.
    return PiperVoice.load(onnx_path, config_path, derived_dir=tmp_path_factory.mktemp("derived"),
                           normalizer=normalize_text)


@pytest.fixture(scope="module")
def deterministic(voice_files, tmp_path_factory):
    """The same voice with noise scales 0 (front part deterministic), and the unsplit model."""
    onnx_path, config_path = voice_files
    v = PiperVoice.load(onnx_path, config_path, derived_dir=tmp_path_factory.mktemp("derived0"))
    v.scales = np.array([0.0, v.voice_config.length_scale, 0.0], np.float32)
    whole = session(onnx_path)
    return v, whole


def snr_db(reference: np.ndarray, test: np.ndarray) -> float:
    noise = reference - test
    return 10 * np.log10(np.sum(reference**2) / max(np.sum(noise**2), 1e-20))


def test_latent_found_by_inspection(voice_files):
    import onnx

    model = onnx.load(str(voice_files[0]), load_external_data=False)
    assert find_latent(model) == "/Mul_7_output_0"
    assert find_prior(model) == "/Add_output_0"  # z_p: the Add after the last RandomNormalLike


def test_voice_uses_the_config_scales(voice):
    inference = voice.voice_config
    assert voice.scales.tolist() == pytest.approx([inference.noise_scale, inference.length_scale, inference.noise_w])
    assert voice.scales.tolist() == pytest.approx([0.667, 1.0, 0.8])
    assert voice.can_stream and voice.sample_rate == 22050 and voice.hop_length == 256


def test_blocks_match_unsplit_model_with_noise_off(deterministic):
    v, whole = deterministic
    (p,) = v.prepare(LONG)
    reference = whole.run(None, v._inputs(p.ids))[0].reshape(-1)
    blocks = np.concatenate(list(v.blocks(p)))
    assert blocks.size == reference.size == p.frames * v.hop_length
    assert snr_db(reference, blocks) >= 90.0


def test_context_is_what_makes_blocks_faithful(deterministic):
    v, whole = deterministic
    (p,) = v.prepare(LONG)
    reference = v.whole(p)
    base = v.config
    v.config = StreamConfig(base.first_frames, 20, 0, 0, 0)
    try:
        bare = np.concatenate(list(v.blocks(p)))
    finally:
        v.config = base
    assert snr_db(reference, bare) < 25.0 < snr_db(reference, np.concatenate(list(v.blocks(p))))


def test_first_block_has_first_frames(voice):
    (p,) = voice.prepare(LONG)
    first = next(voice.blocks(p))
    assert p.frames > voice.config.first_frames + voice.config.frames
    assert first.size == voice.config.first_frames * voice.hop_length


@pytest.mark.parametrize("sizes", [None, lambda k: 1, lambda k: 3, lambda k: 7 + 5 * k, lambda k: 10_000])
def test_blocks_cover_the_sentence_exactly(voice, sizes):
    (p,) = voice.prepare("Short blocks must add up to the whole sentence, sample for sample.")
    blocks = list(voice.blocks(p, sizes))
    assert sum(b.size for b in blocks) == p.frames * voice.hop_length
    assert all(b.dtype == np.float32 and b.size % voice.hop_length == 0 and b.size > 0 for b in blocks)
    assert np.isfinite(np.concatenate(blocks)).all()


def test_render_is_a_trimmed_context_decode(deterministic):
    v, _ = deterministic
    (p,) = v.prepare(LONG)
    whole = v.whole(p)
    hop = v.hop_length
    part = v.render(p, 30, 50)
    assert part.size == 20 * hop
    assert snr_db(whole[30 * hop:50 * hop], part) > 90.0
    assert v.render(p, p.frames, p.frames + 5).size == 0


def test_prepare_splits_sentences_and_reports_time(voice):
    prepared = voice.prepare("First sentence. Second one? Third!")
    assert [p.text for p in prepared] == ["First sentence.", "Second one?", "Third!"]
    for p in prepared:
        assert isinstance(p, Prepared) and p.latent is not None and p.latent.shape[:2] == (1, 192)
        assert p.frames == p.latent.shape[2] > 0 and p.prepare_s > 0 and p.audio is None


@pytest.mark.parametrize("text", ["", "   ", "\x00\x01\x1b[31m", "👋🏽❤️🎉", "<br/>", "\ud800"])
def test_nothing_to_say_is_an_empty_list(voice, text):
    assert voice.prepare(text) == []
    assert voice.synthesize(text).size == 0


@pytest.mark.parametrize("text", ["Hi 👋 <b>there</b> **friend**\x07!", "**", "a * b", "Ünïcödé façade naïve café.", "日本語 text"])
def test_odd_text_is_spoken_not_fatal(voice, text):
    audio = voice.synthesize(text)
    assert audio.size > 0 and np.isfinite(audio).all()


def test_split_is_cached_and_reused(voice_files, tmp_path):
    first = load_or_split(voice_files[0], tmp_path)
    assert isinstance(first.front, Path) and first.front.is_file() and first.decoder.is_file()
    assert first.flow.is_file() and first.prior == "/Add_output_0" and first.mask
    stamp = first.front.stat().st_mtime_ns
    again = load_or_split(voice_files[0], tmp_path)
    assert again == first and again.front.stat().st_mtime_ns == stamp
    assert not list(tmp_path.glob("*.tmp"))


def _split_in_child(args):
    onnx_path, derived = args
    split = load_or_split(Path(onnx_path), Path(derived))
    return split.latent, os.path.getsize(split.front), os.path.getsize(split.decoder)


def test_two_processes_split_once_without_clobbering(voice_files, tmp_path):
    ctx = multiprocessing.get_context("spawn")
    with ctx.Pool(2) as pool:
        results = pool.map(_split_in_child, [(str(voice_files[0]), str(tmp_path))] * 2)
    assert results[0] == results[1]
    assert not list(tmp_path.glob("*.tmp"))


def test_unsplittable_voice_falls_back_to_whole_sentences(voice_files, tmp_path):
    import onnx

    model = onnx.load(str(voice_files[0]))
    for node in model.graph.node:
        node.name = node.name.replace("/dec/", "/vocoder/")
    renamed = tmp_path / "renamed.onnx"
    onnx.save(model, str(renamed))
    with pytest.raises(SplitError):
        find_latent(model)
    v = PiperVoice.load(renamed, voice_files[1], derived_dir=tmp_path / "derived")
    assert not v.can_stream
    (p,) = v.prepare("A voice that cannot be split still speaks.")
    assert p.latent is None and p.frames == 0 and p.audio is not None and p.audio.size > 0
    blocks = list(v.blocks(p))
    assert len(blocks) == 1 and blocks[0].size == p.audio.size


def test_text_rules_come_from_the_caller(voice, monkeypatch):
    """The runtime does not import the TTS layer's normalizer (layering); it applies the one it is given."""
    seen: list[str] = []
    monkeypatch.setattr(voice, "normalizer", lambda t: seen.append(t) or "Hello there.")
    assert [p.text for p in voice.prepare("Who is it?")] == ["Hello there."] and seen == ["Who is it?"]
    assert [p.text for p in voice.prepare("Who is it?", normalize=False)] == ["Who is it?"] and len(seen) == 1
    monkeypatch.setattr(voice, "normalizer", None)
    assert [p.text for p in voice.prepare("Hi there.")] == ["Hi there."]
