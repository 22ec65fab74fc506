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
`MAX_DELAY_S`), the path is fitted over the `FIT_S` of reply before the span
(frames where its estimate overshoots the microphone dropped and fitted
again; the latest `RETRY_S` alone where the whole takes too little: a step
of the delay), and the span is the microphone minus the fitted echo, with
what the fit leaves gated where it is not `BETA` under what remains (the
mask's +6 dB rule, on the residue). `rebuild` returns None, and the mask
stands in, where the fit takes less than `MIN_ERLE_DB` off its own frames.
It costs 50 ms of one core (the normal equations built from the
regressors' shift structure, `_normal`; more with frames dropped). Run on
the capture thread, live under the ASR and the voice, it held the capture
100-300 ms behind, so chat runs it on a thread of its own
(`voxcli.chat.first_word`) and announces the patch at the onset
(`ASRStreamer.expect_patch`): a decode of AEC3's output meanwhile had made "He was", "What what's" stable over "It
was", and stable words keep the utterance from moving back to the patch.

Measured (2026-12-02, the room fixture, TAIL 0.3): on the relay's audio the
fit takes 18-19 dB off its own 2 s, and a median 15 dB (1-27 over 84
spans, without the gate) off 0.2 s of reply 0-0.2 s after it, out of
sample. Four recorded sessions, 32 barge-ins transcribed offline as chat
patches them (`benchmarks/aec_session.py words`): WER 0.047 with this
fit, 0.104 with the mask alone (the same audio). Live, interleaved with the
mask alone (`benchmarks/bench_barge_in.py --room 0.3 --trials 48 --arms
onset,onset-maskonly`, three runs on 939cc01 and one on this code): 0.071
against 0.076 over 96 barge-ins each; before the announcement, 0.129 against 0.068 over 40. No reply: 0.000.
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
"""Frames of path fitted per bin (224 ms from `PRE_TAPS` before the delay: a 300 ms room's tail ~40 dB down;
offline, 20 left more of it, one session's WER 0.104 against 0.010)."""
REG: Final = 1e-3
"""Ridge per bin, relative to the reference's power in it (a reply's quiet bins do not blow the filter up)."""
OUTLIER_DB: Final = 3.0
"""A frame whose residual exceeds the microphone by this much is dropped from the second fit."""
MAX_OUTLIERS: Final = 0.25
"""More frames dropped than this share, and the fit is refused (on the relay's audio 0-13 % were)."""
MIN_ERLE_DB: Final = 12.0
"""The fit must take this much off its own frames, else it is tried on the latest `RETRY_S` alone, else
the mask stands in."""
BETA: Final = 4.0
"""What the fit leaves of the echo in a bin (its share on the fitted frames, times the estimate) is taken down
where the rebuilt bin is not this much above it (6 dB, as the mask keeps the user 6 dB above the echo)."""
FLOOR: Final = 0.05
"""The least gain of that gate (-26 dB): the bins under it are not silenced outright."""
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
    c = reach - max(0, _delay(Y[:fit_n], X, reach) - PRE_TAPS)  # X[c + j - t]: tap t of microphone frame j
    retry = fit_n - int(RETRY_S * rate) // HOP
    for since in (0, retry) if retry > 0 else (0,):  # the whole fit, else its latest part alone
        h, erle, left = _fit(X, c, Y, since, fit_n)
        if h is not None and erle >= MIN_ERLE_DB:
            break
    else:
        return None
    est = _echo(X, c, h, fit_n, n)
    Z = Y[fit_n:] - est
    Z *= np.clip(1 - BETA * left * np.abs(est) ** 2 / np.maximum(np.abs(Z) ** 2, 1e-20), FLOOR, 1.0)
    z = np.fft.irfft(Z, WINDOW, axis=1) * _WIN
    start = first_end + fit_n * HOP - WINDOW  # the span's first window starts here
    out, norm = np.zeros((span_n - 1) * HOP + WINDOW), np.zeros((span_n - 1) * HOP + WINDOW)
    for j in range(span_n):
        out[j * HOP : j * HOP + WINDOW] += z[j]
        norm[j * HOP : j * HOP + WINDOW] += _WIN**2
    got = (out / np.maximum(norm, 1e-3))[lo - start : hi - start]
    return got.astype(np.float32) if got.size == hi - lo and np.isfinite(got).all() else None


def _fit(X: np.ndarray, c: int, Y: np.ndarray, a: int, b: int) -> tuple[np.ndarray | None, float, np.ndarray]:
    """The path h [f, t] (per bin, `TAPS` frames) that best maps the reference X[c + j - t] to the microphone
    Y[j] over frames [a, b); what it takes off the frames it kept (dB), and the echo it leaves per bin (a
    fraction of its estimate's power). Fitted, then once more without the frames where its estimate
    overshoots what the microphone heard (the residual `OUTLIER_DB` over the microphone: the reference
    played where the echo went missing, a relay that starved), their share taken out of the normal
    equations; more than `MAX_OUTLIERS` of them and no one path explains the reply (None)."""
    gram, rhs = _normal(X, c, Y, a, b)
    mic = (np.abs(Y[a:b]) ** 2).sum(1)
    h = _solve(gram, rhs)
    if h is None:
        return None, 0.0, np.zeros(0)
    est = _echo(X, c, h, a, b)
    out = (np.abs(Y[a:b] - est) ** 2).sum(1) > mic * 10 ** (OUTLIER_DB / 10)
    if out.any():
        if out.mean() > MAX_OUTLIERS:
            return None, 0.0, np.zeros(0)
        j = np.flatnonzero(out)[:, None] + a + c - np.arange(TAPS)  # [k, t]: X's frame of tap t at outlier k
        A = X[j].astype(np.complex128)  # [k, t, f]
        gram = gram - np.einsum("ktf,ksf->fts", np.conj(A), A)
        rhs = rhs - np.einsum("ktf,kf->ft", np.conj(A), Y[np.flatnonzero(out) + a])
        h = _solve(gram, rhs)
        if h is None:
            return None, 0.0, np.zeros(0)
        est = _echo(X, c, h, a, b)
    keep = ~out
    res = np.abs(Y[a:b][keep] - est[keep]) ** 2  # [j, f] over the kept frames
    erle = 10 * np.log10(max(float(mic[keep].sum()), 1e-20) / max(float(res.sum()), 1e-20))
    return h, erle, res.sum(0) / np.maximum((np.abs(est[keep]) ** 2).sum(0), 1e-20)


def _echo(X: np.ndarray, c: int, h: np.ndarray, a: int, b: int) -> np.ndarray:
    """The echo the path h [f, t] makes of the reference, at microphone frames [a, b)."""
    est = np.zeros((b - a, X.shape[1]), np.complex128)
    for t in range(h.shape[1]):
        est += X[c + a - t : c + b - t] * h[:, t]
    return est


def _normal(X: np.ndarray, c: int, Y: np.ndarray, a: int, b: int) -> tuple[np.ndarray, np.ndarray]:
    """Per bin, the normal equations of the fit over microphone frames [a, b): G [f, t, t'] = sum_j
    conj(X[c+j-t]) X[c+j-t'] and r [f, t] = sum_j conj(X[c+j-t]) Y[j].

    Why not A^H A: the regressors are one sequence shifted, so each diagonal of G is its first entry
    plus a running sum of what enters and leaves the window (G[t, t+d] - G[t-1, t-1+d] =
    conj(X[c+a-t]) X[c+a-t-d] - conj(X[c+b-t]) X[c+b-t-d]): O(taps x frames) per bin, not
    O(taps^2 x frames) (for a 2 s fit the Gram took 46 ms, 17 now; the whole fit 75 -> 50 ms)."""
    taps, bins = TAPS, X.shape[1]
    Xd = X.astype(np.complex128)
    gram = np.empty((bins, taps, taps), np.complex128)
    for d in range(taps):
        g0 = (np.conj(Xd[c + a : c + b]) * Xd[c + a - d : c + b - d]).sum(0)
        s = np.arange(1, taps - d)
        step = np.conj(Xd[c + a - s]) * Xd[c + a - s - d] - np.conj(Xd[c + b - s]) * Xd[c + b - s - d]
        diag = np.concatenate([g0[None], g0[None] + np.cumsum(step, axis=0)]).T  # [f, t]: G[t, t + d]
        t = np.arange(taps - d)
        gram[:, t, t + d] = diag
        gram[:, t + d, t] = np.conj(diag)
    rhs = np.stack([(np.conj(Xd[c + a - t : c + b - t]) * Y[a:b]).sum(0) for t in range(taps)], axis=1)
    return gram, rhs


def _delay(Y: np.ndarray, X: np.ndarray, reach: int) -> int:
    """Frames the echo's strongest part comes after its placed reference: the lag where the microphone and
    the reference are most coherent, summed over bins (each bin normalised, so the loud low bins do not rule)."""
    n = Y.shape[0]
    lags = reach - TAPS + 1
    cross = np.stack([(Y * np.conj(X[reach - k : reach - k + n])).sum(0) for k in range(lags)])  # [k, f]
    px = np.stack([(np.abs(X[reach - k : reach - k + n]) ** 2).sum(0) for k in range(lags)])
    coherence = np.abs(cross) ** 2 / np.maximum(px * (np.abs(Y) ** 2).sum(0), 1e-20)
    return int(np.argmax(coherence.sum(1)))


def _solve(gram: np.ndarray, rhs: np.ndarray) -> np.ndarray | None:
    """Per bin f, the ridge least-squares h[f] (t taps) from its normal equations (gram: [f, t, t], rhs: [f, t])."""
    taps = gram.shape[1]
    gram = gram.copy()
    ridge = REG * np.trace(gram, axis1=1, axis2=2).real / taps + 1e-12
    gram[:, np.arange(taps), np.arange(taps)] += ridge[:, None]
    try:
        h = np.linalg.solve(gram, rhs[:, :, None])[:, :, 0]
    except np.linalg.LinAlgError:
        return None
    return h if np.isfinite(h).all() else None
