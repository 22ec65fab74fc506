"""Raw PCM <-> float32, resampling and sanitizing.

Pipes carry raw PCM (s16le by default, f32le on request). Reads from a pipe
can end in the middle of a sample, so `decode_pcm` returns the incomplete
tail for the caller to prepend to the next read instead of dropping or
misaligning it. Resampling uses soxr (high quality, streaming-capable).

Sample rates are bounded (`MIN_RATE`..`MAX_RATE`, the same range for `--rate`
and for a file's header) because resampling multiplies the data by
target/source: a header that says 1 Hz turns a 318 KB WAV into 10 GB at 16 kHz.
"""
from __future__ import annotations

from typing import Final, Iterable, Iterator

import numpy as np

from voxcli.errors import UsageError

FORMATS: Final = ("s16le", "f32le")
_WIDTH: Final = {"s16le": 2, "f32le": 4}

MIN_RATE: Final = 1000
"""Lowest sample rate accepted (Hz): at most 16x growth when resampling to 16 kHz."""
MAX_RATE: Final = 384000
"""Highest sample rate accepted (Hz): the top of what audio interfaces record."""
MAX_CHANNELS: Final = 64
"""Most channels a file may have: beyond this it is not a recording to transcribe (libsndfile allows 1024)."""


def check_rate(rate: int, what: str) -> int:
    """Return `rate` if within MIN_RATE..MAX_RATE, else a UsageError: "{what} {rate} Hz is out of range (...)".

    `what` names the source, e.g. "--rate" or "talk.wav: header sample rate".
    """
    if not MIN_RATE <= rate <= MAX_RATE:
        raise UsageError(f"{what} {rate} Hz is out of range ({MIN_RATE}..{MAX_RATE} Hz)")
    return rate


def _check(fmt: str) -> None:
    if fmt not in _WIDTH:
        raise UsageError(f"unknown PCM format {fmt!r}", hint="use --format s16le or --format f32le")


def sample_width(fmt: str) -> int:
    _check(fmt)
    return _WIDTH[fmt]


def decode_pcm(data: bytes, fmt: str = "s16le") -> tuple[np.ndarray, bytes]:
    """Bytes -> float32 samples, plus the leftover bytes of an incomplete sample."""
    width = sample_width(fmt)
    usable = len(data) - len(data) % width
    body, rest = data[:usable], data[usable:]
    if fmt == "s16le":
        audio = np.frombuffer(body, dtype="<i2").astype(np.float32) / 32768.0
    else:
        audio = np.frombuffer(body, dtype="<f4").astype(np.float32)
    return audio, bytes(rest)


def encode_pcm(audio: np.ndarray, fmt: str = "s16le") -> bytes:
    """float32 in [-1, 1] -> bytes (clipped; s16 is rounded, not truncated)."""
    _check(fmt)
    a = np.clip(np.asarray(audio, dtype=np.float32), -1.0, 1.0)
    if fmt == "s16le":
        return np.round(a * 32767.0).astype("<i2").tobytes()
    return a.astype("<f4").tobytes()


def sanitize(audio: np.ndarray) -> tuple[np.ndarray, bool]:
    """Replace NaN/inf by silence and clip to [-1, 1]; report whether any were found."""
    a = np.asarray(audio, dtype=np.float32)
    finite = np.isfinite(a)
    bad = not bool(finite.all())
    if bad:
        a = np.where(finite, a, 0.0).astype(np.float32)
    return np.clip(a, -1.0, 1.0), bad


def resample(audio: np.ndarray, from_rate: int, to_rate: int) -> np.ndarray:
    """Whole-buffer resampling (soxr 'HQ')."""
    a = np.asarray(audio, dtype=np.float32)
    if from_rate == to_rate or a.size == 0:
        return a
    import soxr

    return soxr.resample(a, from_rate, to_rate, quality="HQ").astype(np.float32)


class StreamResampler:
    """Chunk-by-chunk resampling that keeps filter state across chunks.

    Resampling chunks independently would click at every boundary; soxr's
    ResampleStream carries the filter history. `last=True` flushes the tail.
    """

    def __init__(self, from_rate: int, to_rate: int) -> None:
        self.from_rate = from_rate
        self.to_rate = to_rate
        self._stream = None
        if from_rate != to_rate:
            import soxr

            self._stream = soxr.ResampleStream(from_rate, to_rate, 1, dtype="float32", quality="HQ")

    def process(self, chunk: np.ndarray, last: bool = False) -> np.ndarray:
        a = np.asarray(chunk, dtype=np.float32)
        if self._stream is None:
            return a
        return np.asarray(self._stream.resample_chunk(a, last=last), dtype=np.float32)


def reblock(blocks: Iterable[np.ndarray], size: int) -> Iterator[np.ndarray]:
    """Re-cut a stream of 1-D blocks into pieces of exactly `size` samples (the last may be shorter).

    Decoded and resampled blocks vary in length; consumers paced per frame
    (a VAD frame, a capture callback) want fixed pieces. Holds < `size` samples.
    """
    carry = np.zeros(0, np.float32)
    for b in blocks:
        a = np.asarray(b, dtype=np.float32).reshape(-1)
        if carry.size:
            a = np.concatenate([carry, a])
        whole = a.size - a.size % size
        for i in range(0, whole, size):
            yield a[i : i + size]
        carry = a[whole:].copy()
    if carry.size:
        yield carry
