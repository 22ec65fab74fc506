"""Reading audio files: headers are bounded before decoding, and blocks equal a whole-file decode.

The reference here is computed independently of voxcli (soundfile's
whole-file read, a channel mean, soxr's one-shot resampler), so the block
decoder is compared with what the old whole-file reader did, not with itself.
"""
from __future__ import annotations

import numpy as np
import pytest
import soundfile as sf
import soxr

from voxcli.audio.files import AudioInfo, audio_info, iter_audio, read_audio
from voxcli.audio.pcm import MAX_CHANNELS, MAX_RATE, MIN_RATE, check_rate, reblock
from voxcli.errors import UsageError

from tests.audio.headers import wav_with_header


def _signal(rate: int, channels: int, seconds: float = 2.3) -> np.ndarray:
    """A chirp plus noise per channel: every frequency band and every block boundary matters."""
    t = np.arange(int(rate * seconds)) / rate
    rng = np.random.default_rng(rate + channels)
    cols = [0.4 * np.sin(2 * np.pi * (200 + 1500 * t * (c + 1)) * t) + 0.05 * rng.standard_normal(t.size)
            for c in range(channels)]
    return np.stack(cols, axis=1).astype(np.float32)


def _whole_file_reference(path, rate: int) -> np.ndarray:
    data, sr = sf.read(str(path), dtype="float32", always_2d=True)
    mono = data.mean(axis=1).astype(np.float32)
    return mono if sr == rate else soxr.resample(mono, sr, rate, quality="HQ").astype(np.float32)


@pytest.mark.parametrize("channels", [1, 2])
@pytest.mark.parametrize("rate", [16000, 22050, 44100, 48000])
def test_blocks_equal_a_whole_file_decode_and_resample(tmp_path, rate, channels):
    f = tmp_path / f"s{rate}_{channels}.wav"
    sf.write(f, _signal(rate, channels), rate, subtype="FLOAT")
    want = _whole_file_reference(f, 16000)
    for block_s in (1.0, 0.1, 0.0137):  # the default, the live chunk, and an odd size
        blocks = list(iter_audio(f, 16000, block_s=block_s))
        got = np.concatenate(blocks)
        assert all(b.dtype == np.float32 and b.ndim == 1 for b in blocks)
        assert got.size == want.size, (block_s, got.size, want.size)
        assert np.abs(got - want).max() < 1e-6, block_s
    whole, sr = read_audio(f, 16000)
    assert sr == 16000 and whole.size == want.size and np.abs(whole - want).max() < 1e-6


def test_without_a_target_rate_the_file_rate_is_kept(tmp_path):
    f = tmp_path / "s.flac"
    audio = _signal(22050, 2)
    sf.write(f, audio, 22050, subtype="PCM_24")
    got, sr = read_audio(f)
    assert sr == 22050 and got.size == audio.shape[0]
    assert np.abs(got - _whole_file_reference(f, 22050)).max() == 0.0


def test_blocks_are_bounded_in_samples_whatever_the_rate_and_channels(tmp_path):
    f = tmp_path / "wide.wav"
    sf.write(f, _signal(MAX_RATE, MAX_CHANNELS, seconds=0.2), MAX_RATE, subtype="PCM_16")
    blocks = list(iter_audio(f, block_s=10.0))  # ask for 10 s: 245 M samples if unbounded
    assert max(b.size for b in blocks) * MAX_CHANNELS <= 1 << 20
    assert sum(b.size for b in blocks) == int(MAX_RATE * 0.2)


@pytest.mark.parametrize("rate", [1, 7, 999, 384001, 4_000_000])
def test_a_header_rate_out_of_range_is_a_usage_error_naming_file_and_rate(tmp_path, rate):
    f = tmp_path / f"lie{rate}.wav"
    wav_with_header(f, rate)
    for read in (audio_info, lambda p: iter_audio(p, 16000), lambda p: read_audio(p, 16000)):
        with pytest.raises(UsageError) as e:
            read(f)  # iter_audio raises on the call, before the first block is asked for
        assert str(f) in str(e.value) and f"{rate} Hz" in str(e.value)
        assert f"{MIN_RATE}..{MAX_RATE}" in str(e.value)


@pytest.mark.parametrize("rate", [MIN_RATE, MAX_RATE])
def test_the_bounds_themselves_are_accepted(tmp_path, rate):
    f = tmp_path / "edge.wav"
    wav_with_header(f, rate, frames=rate // 10)
    assert audio_info(f) == AudioInfo(f, rate, 1, rate // 10)
    audio, sr = read_audio(f, 16000)
    assert sr == 16000 and abs(audio.size - 1600) <= 1


def test_too_many_channels_is_a_usage_error(tmp_path):
    f = tmp_path / "many.wav"
    sf.write(f, np.zeros((10, MAX_CHANNELS + 1), np.float32), 16000, subtype="PCM_16")
    with pytest.raises(UsageError, match=rf"{MAX_CHANNELS + 1} is out of range \(1\.\.{MAX_CHANNELS}\)"):
        iter_audio(f, 16000)


def test_check_rate_is_the_one_range_for_flags_and_headers():
    assert check_rate(16000, "--rate") == 16000
    with pytest.raises(UsageError, match=r"^--rate 500 Hz is out of range \(1000\.\.384000 Hz\)$"):
        check_rate(500, "--rate")


def test_missing_file_and_directory_are_usage_errors_at_the_call(tmp_path):
    with pytest.raises(UsageError, match="no such file"):
        iter_audio(tmp_path / "nope.wav")
    with pytest.raises(UsageError, match="is a directory"):
        iter_audio(tmp_path)


def test_a_file_replaced_after_the_header_check_is_refused(tmp_path):
    """iter_audio checks the header on the call but opens lazily: a swapped file must not slip past the bounds."""
    f = tmp_path / "swap.wav"
    sf.write(f, np.zeros(1600, np.float32), 16000)
    blocks = iter_audio(f, 16000)
    wav_with_header(f, 1, frames=159_000)
    with pytest.raises(UsageError, match="changed while it was being opened"):
        next(blocks)


def test_reblock_cuts_varying_blocks_into_fixed_pieces_and_loses_nothing(tmp_path):
    f = tmp_path / "s.wav"
    sf.write(f, _signal(44100, 2), 44100, subtype="FLOAT")
    want = read_audio(f, 16000)[0]
    pieces = list(reblock(iter_audio(f, 16000, block_s=0.0137), 512))
    assert all(p.size == 512 for p in pieces[:-1]) and 0 < pieces[-1].size <= 512
    assert np.array_equal(np.concatenate(pieces), want)
    assert list(reblock([], 512)) == []
