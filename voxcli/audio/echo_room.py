"""The user's first word under a reverberant room's echo: the echo estimated per frequency bin and subtracted.

Why: `voxcli.audio.echo_path` fits one 32 ms FIR from the echo's delay and
refuses a path that is not close to one delayed copy of the reply; in a room
whose reverberation carries most of the echo (the issue's fixture: a 300 ms
tail, benchmarks/room_relay.py) it always refuses, and the echo mask keeps
only the bins where the user stands 6 dB above the loudest echo possible, so
the first word over a loud stretch of the reply comes back partly ("It was"
heard as "It would"). Here the echo is modelled in the short-time Fourier
domain: each bin of the microphone is a short filter over the same bin of the
reference's last `TAPS` frames (a convolutive transfer function: 21 frames
16 ms apart cover the direct sound and ~300 ms of the tail), from the echo's
measured delay (`voxcli.audio.echo_delay`). The filters are fitted by least
squares on the reply before the span (up to `FIT_S`), once, at the barge-in,
and the estimate is subtracted over the span.

It refuses (None: the mask stands in) when too little of the reply is kept,
when the fit takes less than `MIN_ERLE_DB` off its own frames, or on anything
not finite.
"""
from __future__ import annotations

from typing import Final

import numpy as np

from voxcli.audio.aec_room import erle_db

RATE: Final = 16000
WINDOW: Final = 1024
"""Analysis window (64 ms), a quarter of it per hop: with half overlap the per-bin model left the echo
5-9 dB louder and the user 16 dB less clean (tests/audio/test_echo_room.py's scene)."""
HOP: Final = 256
TAPS: Final = 21
"""Reference frames per bin filter (from `PRE` before the delay): ~340 ms of the room's tail."""
PRE: Final = 3
"""Frames before the measured delay (the delay moves; a frame's window spreads it)."""
FIT_S: Final = 2.0
"""Reply fitted, before the span."""
MIN_FIT_S: Final = 0.8
"""Less kept than this before the span: too few frames for `TAPS` unknowns per bin."""
REG: Final = 1e-3
"""Ridge per bin, relative to the reference's power in that bin."""
MIN_ERLE_DB: Final = 6.0
"""The fit must take this much off the frames it was fitted on."""
MIN_SPAN_S: Final = 0.2
"""Less of the span rebuilt than this (the recording ends too soon after it): the mask stands in."""
BAND_HZ: Final = (60.0, 7000.0)
"""Bins fitted and subtracted (outside, the microphone is kept as it is)."""


def rebuild(near: np.ndarray, far: np.ndarray, lo: int, hi: int, lag: int | None,
            rate: int = RATE) -> np.ndarray | None:
    """near[lo:hi] with the room's echo subtracted (up to the last sample every window over which was recorded:
    a window's worth before `near` ends), or None when the fit cannot be trusted.

    `near`, `far`: the raw microphone and the reference each of its frames was given (one run of frames);
    `lag`: the echo's delay after that reference in samples (None: not measured, the fit refuses)."""
    if rate != RATE or lag is None or hi <= lo or hi > near.size or far.size < near.size:
        return None
    near, far = np.asarray(near, np.float64), np.asarray(far, np.float64)
    d = max(0, lag // HOP - PRE)  # the first tap's delay, in frames
    # frame m covers [base + m * HOP, base + m * HOP + WINDOW); the first frame fitted needs d + TAPS before it
    base = lo - int(FIT_S * rate) // HOP * HOP
    first = (d + TAPS) * HOP
    if base < first:
        base = lo - (lo - first) // HOP * HOP
    if lo - base < MIN_FIT_S * rate:
        return None
    end = hi + WINDOW
    if end > near.size:
        end = near.size
    seg = slice(base - (d + TAPS) * HOP, end)
    y_all, x_all = near[seg], far[seg]
    if not (np.isfinite(y_all).all() and np.isfinite(x_all).all()):
        return None
    Y, X = _stft(y_all), _stft(x_all)  # frames from seg.start on
    off = d + TAPS  # frame index of `base` in Y and X
    hz = np.fft.rfftfreq(WINDOW, 1.0 / rate)
    band = (hz >= BAND_HZ[0]) & (hz <= BAND_HZ[1])
    fit_frames = np.arange(off, off + (lo - base - WINDOW) // HOP + 1)  # windows wholly before the span
    A = _lagged(X[:, band], fit_frames, d)  # (bins, frames, taps)
    y = Y[fit_frames][:, band].T  # (bins, frames)
    Ah = np.conj(np.transpose(A, (0, 2, 1)))
    gram = Ah @ A  # (bins, taps, taps): batched products, not an einsum loop
    rhs = (Ah @ y[..., None])[..., 0]
    power = np.real(np.einsum("ktt->k", gram)) / TAPS
    gram[:, np.arange(TAPS), np.arange(TAPS)] += REG * np.maximum(power, 1e-12)[:, None]
    try:
        h = np.linalg.solve(gram, rhs[..., None])[..., 0]  # (bins, taps)
    except np.linalg.LinAlgError:
        return None
    if not np.isfinite(h).all():
        return None
    fitted = (A @ h[..., None])[..., 0]
    if not erle_db(np.abs(y).ravel(), np.abs(y - fitted).ravel(), frame=1, floor=0.0) >= MIN_ERLE_DB:
        return None
    frames = np.arange(off, Y.shape[0])
    E = np.zeros((frames.size, Y.shape[1]), np.complex128)
    E[:, band] = (_lagged(X[:, band], frames, d) @ h[..., None])[..., 0].T
    whole = seg.start + (Y.shape[0] - 1) * HOP + HOP  # samples before this have every window over them
    hi = min(hi, whole)
    out = _istft(Y[frames] - E, y_all.size - off * HOP)[lo - base : hi - base]
    if out.size != hi - lo or out.size < MIN_SPAN_S * rate or not np.isfinite(out).all():
        return None
    return out.astype(np.float32)


def _window() -> np.ndarray:
    """The square root of the periodic Hann: analysis and synthesis together make a Hann (what is subtracted
    in a frame is tapered at its edges too), whose overlapped copies sum to a constant (`_istft` divides)."""
    return np.sqrt(np.hanning(WINDOW + 1)[:WINDOW])


def _stft(a: np.ndarray) -> np.ndarray:
    """(frames, bins) of `a`, frame m over [m * HOP, m * HOP + WINDOW)."""
    n = 1 + max(0, (a.size - WINDOW) // HOP)
    idx = np.arange(WINDOW)[None, :] + HOP * np.arange(n)[:, None]
    return np.fft.rfft(a[idx] * _window(), axis=1)


def _istft(S: np.ndarray, n: int) -> np.ndarray:
    """Weighted overlap-add of the frames into n samples (divided by the windows' sum where it is not 1:
    the edges)."""
    w = _window()
    size = max(n, (S.shape[0] - 1) * HOP + WINDOW)
    out, norm = np.zeros(size), np.zeros(size)
    frames = np.fft.irfft(S, WINDOW, axis=1) * w
    for m in range(S.shape[0]):
        out[m * HOP : m * HOP + WINDOW] += frames[m]
        norm[m * HOP : m * HOP + WINDOW] += w * w
    return (out / np.maximum(norm, 1e-3))[:n]


def _lagged(X: np.ndarray, frames: np.ndarray, d: int) -> np.ndarray:
    """(bins, len(frames), TAPS): tap t of frame m is the reference's frame m - d - t."""
    idx = frames[:, None] - d - np.arange(TAPS)[None, :]
    return np.transpose(X[idx], (2, 0, 1))
