"""Whisper's log-mel front end in numpy (what the encoder was trained on).

The recipe of openai/whisper `audio.log_mel_spectrogram`, as faster-whisper's
`feature_extractor.py` reimplements it without torch: 25 ms Hann windows
every 10 ms (n_fft 400, hop 160 at 16 kHz), power spectrum, Slaney-style mel
filterbank, log10 floored at 1e-10, clamped to 8 decades under the maximum,
then scaled by (x + 4) / 4.

The CTranslate2 encoder only accepts a full 30 s window (3,000 frames), so
the audio is padded with zeros *before* the transform, as whisper does with
`padding=N_SAMPLES`: the padded frames then get the same floor (max - 8) the
model saw in training, rather than zeros in log space.
"""
from __future__ import annotations

from functools import lru_cache
from typing import Final

import numpy as np

SAMPLE_RATE: Final = 16000
N_FFT: Final = 400
HOP: Final = 160
CHUNK_SECONDS: Final = 30
N_SAMPLES: Final = CHUNK_SECONDS * SAMPLE_RATE
N_FRAMES: Final = N_SAMPLES // HOP
"""3,000 mel frames: the window the encoder is built for."""


@lru_cache(maxsize=4)
def mel_filters(n_mels: int = 80, sr: int = SAMPLE_RATE, n_fft: int = N_FFT) -> np.ndarray:
    """[n_mels, n_fft // 2 + 1] Slaney mel filterbank (librosa's `htk=False, norm='slaney'`)."""
    fftfreqs = np.fft.rfftfreq(n=n_fft, d=1.0 / sr)
    # Mel scale: linear below 1 kHz (200/3 Hz per mel), logarithmic above; 45.2456 mel = 8 kHz.
    mels = np.linspace(0.0, 45.245640471924965, n_mels + 2)
    f_sp, min_log_hz = 200.0 / 3, 1000.0
    min_log_mel = min_log_hz / f_sp
    logstep = np.log(6.4) / 27.0
    freqs = f_sp * mels
    high = mels >= min_log_mel
    freqs[high] = min_log_hz * np.exp(logstep * (mels[high] - min_log_mel))
    fdiff = np.diff(freqs)
    ramps = freqs[:, None] - fftfreqs[None, :]
    lower = -ramps[:-2] / fdiff[:-1, None]
    upper = ramps[2:] / fdiff[1:, None]
    weights = np.maximum(0.0, np.minimum(lower, upper))
    weights *= (2.0 / (freqs[2 : n_mels + 2] - freqs[:n_mels]))[:, None]
    return weights.astype(np.float32)


def log_mel(audio: np.ndarray, n_mels: int = 80) -> np.ndarray:
    """[n_mels, 3000] float32 features of up to 30 s of 16 kHz mono audio (longer input is cut)."""
    audio = np.asarray(audio, dtype=np.float32).reshape(-1)[:N_SAMPLES]
    x = np.pad(audio, (N_FFT // 2, N_SAMPLES - audio.size + N_FFT // 2), mode="constant")
    # center=True with reflect padding on the left edge, as torch.stft does.
    if audio.size > N_FFT // 2:
        x[: N_FFT // 2] = audio[1 : N_FFT // 2 + 1][::-1]
    frames = np.lib.stride_tricks.sliding_window_view(x, N_FFT)[::HOP][:N_FRAMES]
    window = np.hanning(N_FFT + 1)[:-1].astype(np.float32)
    power = np.abs(np.fft.rfft(frames * window, axis=-1)).astype(np.float32) ** 2
    spec = mel_filters(n_mels) @ power.T
    log_spec = np.log10(np.maximum(spec, 1e-10))
    log_spec = np.maximum(log_spec, log_spec.max() - 8.0)
    return np.ascontiguousarray((log_spec + 4.0) / 4.0, dtype=np.float32)


def context_frames(samples: int, margin: int = 800, minimum: int = 1000) -> int:
    """Encoder window for a buffer: its frames plus `margin` (8 s), at least 10 s, at most 30 s.

    Why not always 30 s: the encoder's cost is its window, and a streamer
    re-decodes a short buffer every step (tiny.en: about 0.2 s for 15 s of
    window vs 0.65 s for 30 s here). Why a margin: with the window barely
    longer than the speech the decoder runs on past the end ("... the age of
    wisdom, it was the age of wisdom" with 10 s of window for 7 s of
    speech). With 8 s, tiny.en's batch WER on the dev set was 4.6 % vs
    6.6 % with 30 s, in 3.2 s instead of 11.6 s (one run, shared CPU).
    (whisper.cpp's `audio_ctx` is the same trade.)
    """
    return int(min(N_FRAMES, max(minimum, frames_of(samples) + margin)))


def frames_of(samples: int) -> int:
    """Mel frames that cover `samples` of real audio (the rest of the window is padding)."""
    return min(N_FRAMES, int(samples) // HOP)
