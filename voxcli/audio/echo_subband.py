"""The user's first word under a reverberant room's echo: the echo path fitted per frequency band.

Why: through a room the echo is not one delayed copy of the reply but its
300 ms of reverberation, and the time-domain fit (`voxcli.audio.echo_path`,
32 ms of taps from one delay) never holds there: it correlates under its bar
at any lag, so the first word's span was rebuilt by the mask
(`voxcli.audio.echo_mask`), which keeps only the bins where the user stands
above the loudest echo possible. A user who starts 6 dB under the echo loses
most of their first words that way: "the best of" came out "best at", "faster"
(the barging-in user's WER through the issue's room fixture 0.094-0.146
against 0.000 with no reply). A time-domain FIR long enough for the tail
(5,000 taps) cannot be solved at a barge-in; per STFT bin the same path is a
short filter across frames (a convolutive transfer function: `TAPS` frames
of `HOP` samples), one small least-squares system per bin.

It is made once, when a barge-in needs it and the time-domain fit refused,
from the raw microphone and reference the capture stage kept: the echo's
delay is found first (the lag of the strongest cross-band coherence, up to
`MAX_DELAY_S`), the path is fitted over the `FIT_S` of reply before the span,
frames the fit cannot explain at all are dropped and it is fitted again (a
block the relay starved, a placement that moved), and the span is the
microphone minus the fitted echo. `rebuild` returns None, and the mask stands
in, where the fit takes less than `MIN_ERLE_DB` off its own frames.
"""
from __future__ import annotations

from typing import Final

import numpy as np

RATE: Final = 16000
"""The rate the sizes below are for (chat's capture; any other gets the mask)."""
WINDOW: Final = 512
"""STFT window (32 ms): a root-Hann for analysis and synthesis."""
HOP: Final = 128
"""STFT hop (8 ms; a quarter window: the filter across frames models the path well only with overlap)."""
FIT_S: Final = 2.0
"""Reply fitted, before the span."""
MAX_DELAY_S: Final = 0.45
"""Latest echo delay searched after its placed reference (the room relay puts it 120-180 ms late)."""
PRE_TAPS: Final = 3
"""Frames fitted before the found delay (the direct sound may come before the strongest frame)."""
TAPS: Final = 28
"""Frames of path fitted per bin (224 ms: the room's tail 30 dB down)."""
REG: Final = 1e-3
"""Ridge per bin, relative to the reference's power in it (a reply's quiet bins do not blow the filter up)."""
OUTLIER_DB: Final = 3.0
"""A frame whose residual exceeds the microphone by this much is dropped from the second fit."""
MIN_ERLE_DB: Final = 12.0
"""The fit must take this much off its own frames, else it is tried on the latest `RETRY_S` alone, else
the mask stands in."""
RETRY_S: Final = 1.0
"""The fit tried again on this much reply before the span (a step of the echo's delay earlier in `FIT_S`)."""


def _frames(x: np.ndarray, end: int, count: int) -> np.ndarray:
    """Spectra of the `count` windows whose last ends at `end` (each `HOP` after the one before)."""
    starts = end - WINDOW - HOP * np.arange(count - 1, -1, -1)
    return np.fft.rfft(x[starts[:, None] + np.arange(WINDOW)] * _WIN, axis=1).astype(np.complex64)


_WIN: Final = np.sqrt(np.hanning(WINDOW + 1)[:WINDOW])


def rebuild(near: np.ndarray, far: np.ndarray, lo: int, hi: int, rate: int = RATE) -> np.ndarray | None:
    """near[lo:hi] with the reply's echo subtracted, or None when no fit can be trusted.

    `near` and `far` are the raw microphone and the reference each of its frames was given, sample for
    sample; the fit looks at the `FIT_S` before `lo`."""
    if rate != RATE or hi <= lo or hi > near.size or far.size < near.size:
        return None
    near, far = np.asarray(near, np.float64), np.asarray(far, np.float64)
    reach = int(MAX_DELAY_S * rate) // HOP + TAPS  # frames of reference before each microphone frame
    fit_n = int(FIT_S * rate) // HOP
    first_end = lo - fit_n * HOP + HOP  # the fit's first window ends here; the span's windows follow on
    room = (first_end - WINDOW - reach * HOP) // HOP  # frames short of what the ring holds
    if room < 0:
        fit_n += room
        first_end = lo - fit_n * HOP + HOP
    span_n = -(-(hi - lo) // HOP) + WINDOW // HOP - 1  # windows over [lo, hi)
    if fit_n < 2 * TAPS or first_end + (fit_n + span_n - 1) * HOP > near.size:
        return None
    if not (np.isfinite(near[first_end - WINDOW : hi]).all() and np.isfinite(far[: hi]).all()):
        return None
    n = fit_n + span_n
    Y = _frames(near, first_end + (n - 1) * HOP, n)  # Y[j]: window ending at first_end + j * HOP
    X = _frames(far, first_end + (n - 1) * HOP, n + reach)  # X[j + reach]: the same window of the reference
    delay = _delay(Y[:fit_n], X, reach)
    first = max(0, delay - PRE_TAPS)
    lagged = np.stack([X[reach - first - t : reach - first - t + n] for t in range(TAPS)], axis=2)  # [j, f, t]
    for since in (0, fit_n - int(RETRY_S * rate) // HOP):  # the whole fit, else its latest part alone
        h, erle = _fit(lagged[since:fit_n], Y[since:fit_n])
        if h is not None and erle >= MIN_ERLE_DB:
            break
    else:
        return None
    z = np.fft.irfft(Y[fit_n:] - np.einsum("jft,ft->jf", lagged[fit_n:], h), WINDOW, axis=1) * _WIN
    start = first_end + fit_n * HOP - WINDOW  # the span's first window starts here
    out, norm = np.zeros((span_n - 1) * HOP + WINDOW), np.zeros((span_n - 1) * HOP + WINDOW)
    for j in range(span_n):
        out[j * HOP : j * HOP + WINDOW] += z[j]
        norm[j * HOP : j * HOP + WINDOW] += _WIN**2
    got = (out / np.maximum(norm, 1e-3))[lo - start : hi - start]
    return got.astype(np.float32) if got.size == hi - lo and np.isfinite(got).all() else None


def _fit(lagged: np.ndarray, Y: np.ndarray) -> tuple[np.ndarray | None, float]:
    """The path (per bin, `TAPS` frames) that best maps the lagged reference [j, f, t] to the microphone [j, f],
    and what it takes off the frames it kept (dB): fitted, then fitted again without the frames where its
    estimate overshoots what the microphone heard (the residual `OUTLIER_DB` over the microphone: the
    reference played where the echo went missing, a relay that starved). The second fit takes those frames'
    share out of the normal equations instead of building them again."""
    A, y = np.ascontiguousarray(lagged.transpose(1, 0, 2)), Y.T[:, :, None]  # [f, j, t], [f, j, 1]
    gram, rhs = _normal(A, y)
    keep = np.ones(Y.shape[0], bool)
    mic = (np.abs(Y) ** 2).sum(1)
    for _ in range(2):
        h = _solve(gram, rhs)
        if h is None:
            return None, 0.0
        res = (np.abs(Y - np.einsum("jft,ft->jf", lagged, h)) ** 2).sum(1)
        out = keep & (res > mic * 10 ** (OUTLIER_DB / 10))
        if not out.any():
            break
        keep &= ~out
        if keep.sum() < 2 * TAPS:
            return None, 0.0
        g_out, r_out = _normal(A[:, out], y[:, out])  # taken out of the sums: a fraction of the frames' cost
        gram, rhs = gram - g_out, rhs - r_out
    erle = 10 * np.log10(max(float(mic[keep].sum()), 1e-20) / max(float(res[keep].sum()), 1e-20))
    return h, erle


def _delay(Y: np.ndarray, X: np.ndarray, reach: int) -> int:
    """Frames the echo's strongest part comes after its placed reference: the lag where the microphone and
    the reference are most coherent, summed over bins (each bin normalised, so the loud low bins do not rule)."""
    n = Y.shape[0]
    lags = reach - TAPS + 1
    cross = np.stack([(Y * np.conj(X[reach - k : reach - k + n])).sum(0) for k in range(lags)])  # [k, f]
    px = np.stack([(np.abs(X[reach - k : reach - k + n]) ** 2).sum(0) for k in range(lags)])
    coherence = np.abs(cross) ** 2 / np.maximum(px * (np.abs(Y) ** 2).sum(0), 1e-20)
    return int(np.argmax(coherence.sum(1)))


def _normal(A: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per bin, the normal equations' A^H A and A^H y (A: [f, j, t], y: [f, j, 1])."""
    AH = np.conj(A.transpose(0, 2, 1))
    return AH @ A, AH @ y


def _solve(gram: np.ndarray, rhs: np.ndarray) -> np.ndarray | None:
    """Per bin f, the ridge least-squares h[f] (t taps) from its normal equations (gram: [f, t, t], rhs: [f, t, 1])."""
    taps = gram.shape[1]
    gram = gram.copy()
    ridge = REG * np.trace(gram, axis1=1, axis2=2).real / taps + 1e-12
    gram[:, np.arange(taps), np.arange(taps)] += ridge[:, None]
    try:
        h = np.linalg.solve(gram, rhs)[:, :, 0]
    except np.linalg.LinAlgError:
        return None
    return h if np.isfinite(h).all() else None
