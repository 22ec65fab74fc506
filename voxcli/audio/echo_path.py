"""The user's first word under a loud reply, by subtracting the reply's echo: a linear fit made at the barge-in.

Why: AEC3 is a linear filter followed by a suppressor, and the suppressor is
what loses the user's first word when they start over a loud stretch of the
reply; pywebrtc-audio does not expose the linear stage's output. The echo
mask (`voxcli.audio.echo_mask`) gets the word back only in the bins where the
user stands 6 dB above the loudest echo possible, and an onset told 250-300 ms
after the first word means the user was under the echo in most bins: those
barge-ins kept the user's WER at 0.034 against 0.000 without echo
(benchmarks/bench_barge_in.py, 87 trials). A subtraction keeps the user at
any level. Seven interleaved runs of `python benchmarks/bench_barge_in.py
--trials 32 --arms onset,onset-maskonly` (2026-12-02, load 0.3-1.8; README):
the user's WER 0.007 over 111 barge-ins with this rebuild (62 onsets 200 ms
or more after the first word), 0.014 over 112 with the mask alone, 0.000 with
no reply playing; the last two, on this code, 0.000 over 32, all rebuilt by
the fit.

It is made once, when a barge-in needs it (35-45 ms of one core, on a thread
of its own: `voxcli.chat.first_word`), from the raw microphone and the
reference the capture stage kept (`EchoMask`): the echo path is fitted by
least squares (an FIR of `TAPS` from the echo's delay, exact normal
equations) on the reply before the span, and subtracted over it. No
adaptive filter runs on every frame, and the fit takes only the blocks the
reference explains (`MIN_CORR`): a block where the user talks, or the reply
is quiet, is left out.

The echo's delay against the placed reference is not constant: the capture
and the output stream each follow their PortAudio stamps (`aec_ref.Anchor`),
and each drift correction moves the placement by ~2 ms (on the null sink the
delay steps between two values ~33 samples apart every second or so; a jump
of placement cuts the kept frames, `EchoMask.cut`). So the fit uses the
longest stretch of one delay (`BLOCK_S` blocks whose cross-correlation peaks
at the same lag), and the subtraction follows a step inside the span: each
`SPAN_BLOCK` takes the shift of the echo estimate (within `MAX_SHIFT`) that
leaves the least, from the sample where it starts to, changing shift only
when that is `SWITCH_DB` better than keeping it (the user's own voice must not
steer it). `rebuild` returns None, and the mask stands in, where no stretch
is long and clear enough, where the latest delay is out of the shifts' reach,
or where the fit takes less than `MIN_ERLE_DB` off its own stretch or off a
clear block after it. What passes is a path close to one delayed copy of the
reply: the null sink, a speaker whose direct path carries most of the echo.
A reverberant room (the synthetic one of the tests: 300 ms RT60, a soft-clipped
speaker) correlates under `MIN_CORR` at any one lag and gets the mask.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Final

import numpy as np

from voxcli.audio.aec_room import erle_db

RATE: Final = 16000
"""The rate the sample counts below are for (chat's capture; any other gets the mask)."""
FIT_S: Final = 2.0
"""Reply searched for the fit, before the span (the user is not in it: the span starts `PRE_S` before the pause)."""
BLOCK_S: Final = 0.1
"""Blocks whose echo delays are compared."""
MAX_LAG_S: Final = 0.1
"""Delay of the echo after its placed reference searched (as the double-talk detector's bound)."""
MIN_CORR: Final = 0.9
"""A block's delay counts only when the far end explains it this well (normalised cross-correlation):
quiet blocks and the user's say nothing about it."""
DELAY_TOL: Final = 3
"""Blocks whose delays differ by this many samples or less are one stretch (a fractional delay wobbles)."""
MIN_STRETCH_S: Final = 0.2
"""A shorter stretch of one delay fits too little of the reply: the mask stands in."""
TAPS: Final = 512
"""The fitted echo path (32 ms at 16 kHz from `PRE_TAPS` before the delay: the path and its early room)."""
PRE_TAPS: Final = 32
"""Taps before the echo's delay (a fractional delay and a sink's resampler smear it both ways)."""
REG: Final = 1e-4
"""Ridge on the fit, relative to the reference's power (a reply's quiet bands do not blow the filter up)."""
MIN_ERLE_DB: Final = 10.0
"""The fit must take this much off its own stretch, else the mask stands in."""
SPAN_BLOCK: Final = 320
"""Samples per shift decision over the span (20 ms)."""
MAX_SHIFT: Final = 48
"""Largest step of the echo's delay followed inside the span (a drift correction is ~33 samples)."""
SWITCH_DB: Final = 3.0
"""A new shift must leave this much less than the current one. So a step under a user much louder than
the echo is followed only at the next block the echo dominates (the echo left meanwhile is that much
under the user); a lower bar let the user's voice pick shifts by chance (tested: 8-14 dB less taken off)."""


def rebuild(near: np.ndarray, far: np.ndarray, lo: int, hi: int, rate: int = RATE) -> np.ndarray | None:
    """near[lo:hi] with the reply's echo subtracted, or None when no fit can be trusted.

    `near` and `far` are the raw microphone and the reference each of its frames was given, sample
    for sample (one run of frames with no jump of placement in it); the fit looks at what comes before
    `lo` (up to `FIT_S`).
    """
    if rate != RATE:
        return None  # the taps, shifts and blocks are counted at the capture stage's rate
    near, far = np.asarray(near, np.float64), np.asarray(far, np.float64)
    max_lag, block = int(MAX_LAG_S * rate), int(BLOCK_S * rate)
    start = max(max_lag + TAPS, lo - int(FIT_S * rate))
    if lo - start < block or hi > near.size or hi <= lo or far.size < near.size:
        return None
    if not (np.isfinite(near[start - max_lag - TAPS : hi]).all() and np.isfinite(far[: hi]).all()):
        return None
    delays = block_delays(near, far, start, lo, block, max_lag)
    run = longest_stretch(delays, block)
    if run is None or sum(e - s for s, e in run.segments) < MIN_STRETCH_S * rate:
        return None
    latest = [(s, d) for s, d, c in delays if c >= MIN_CORR][-1]
    shift = latest[1] - run.delay  # where the echo is now, against the fitted path
    shift = 0 if abs(shift) <= DELAY_TOL else shift  # the same delay (a fractional one wobbles by a sample)
    if abs(shift) > MAX_SHIFT - DELAY_TOL:
        return None  # the delay moved past what `follow` reaches since the fit's stretch
    h, first = fit(near, far, run.segments, run.delay)
    if h is None:
        return None
    fitted = np.concatenate([near[s:e] for s, e in run.segments])
    left = np.concatenate([near[s:e] - _estimate(far, h, first, s, e) for s, e in run.segments])
    if not erle_db(fitted, left) >= MIN_ERLE_DB:  # over the whole stretch: a quiet block alone says little
        return None
    if latest[0] >= run.segments[-1][1]:  # a clear block after the stretch: the fit must hold there too
        s, e = latest[0], latest[0] + block
        if not erle_db(near[s:e], follow(near, far, h, first, s, e, shift)) >= MIN_ERLE_DB:
            return None
    out = follow(near, far, h, first, lo, hi, shift)
    return out.astype(np.float32) if np.isfinite(out).all() else None


def block_delays(near: np.ndarray, far: np.ndarray, lo: int, hi: int, block: int,
                 max_lag: int) -> list[tuple[int, int, float]]:
    """(start, delay, normalised correlation) of each block of near[lo:hi] against far lagged 0..max_lag."""
    out = []
    m = 1 << int(np.ceil(np.log2(block + max_lag + block)))
    for s in range(lo, hi - block + 1, block):
        y, x = near[s : s + block], far[s - max_lag : s + block]
        c = np.fft.irfft(np.conj(np.fft.rfft(y, m)) * np.fft.rfft(x, m), m)[: max_lag + 1]  # c[k]: y[t] ~ x[t + k]
        k = int(np.argmax(np.abs(c)))
        xs = x[k : k + block]
        den = float(np.sqrt((xs @ xs) * (y @ y)))
        out.append((s, max_lag - k, abs(float(c[k])) / den if den > 0 else 0.0))
    return out


@dataclass
class Stretch:
    """Clear blocks with one echo delay: `segments` [start, end) of consecutive ones (what is fitted)."""

    delay: int
    segments: list[tuple[int, int]]


def longest_stretch(delays: list[tuple[int, int, float]], block: int) -> Stretch | None:
    """The stretch with the most clear blocks (the latest of equals), or None.

    Unclear blocks (`MIN_CORR`: the user talking, a quiet reply, no reference) neither end a stretch
    nor join it, so they are never fitted; a clear block with another delay ends it. Not just the
    latest stretch: the one before a step of the delay fits the same path, and `follow` finds the step."""
    runs: list[Stretch] = []
    joined = False  # the previous block joined the last stretch (a clear block next to it extends its segment)
    for s, d, c in delays:
        if c < MIN_CORR:
            joined = False
            continue
        if runs and abs(d - runs[-1].delay) <= DELAY_TOL:
            segs = runs[-1].segments
            segs[-1:] = [(segs[-1][0], s + block)] if joined else [segs[-1], (s, s + block)]
        else:
            runs.append(Stretch(d, [(s, s + block)]))
        joined = True
    size = lambda r: sum(e - s for s, e in r.segments)  # noqa: E731
    return max(reversed(runs), key=size) if runs else None


def fit(near: np.ndarray, far: np.ndarray, segments: list[tuple[int, int]],
        delay: int) -> tuple[np.ndarray | None, int]:
    """Least-squares FIR (`TAPS`) from `far` to `near` over `segments`, from `PRE_TAPS` before `delay`.

    Returns (h, first): h[j] weighs far `first + j` samples back (None if the system is singular).
    The normal equations are exact (`_gram`): the autocorrelation method's edge errors cost ~25 dB of
    the fit on speech (the reviewer's measurement: median 36.7 against 61.2 dB)."""
    first = max(0, delay - PRE_TAPS)
    gram, rhs = np.zeros((TAPS, TAPS)), np.zeros(TAPS)
    for s, e in segments:
        n = e - s
        x = far[s - first - TAPS + 1 : e - first]  # x[i + TAPS - 1 - j] is far delayed by first + j at s + i
        m = 1 << int(np.ceil(np.log2(n + TAPS)))
        c = np.fft.irfft(np.conj(np.fft.rfft(near[s:e], m)) * np.fft.rfft(x, m), m)  # c[k] = sum_i near[s+i] x[i+k]
        rhs += c[TAPS - 1 :: -1][:TAPS]  # j -> k = TAPS - 1 - j
        gram += _gram(x, n)  # (in S's order: j = TAPS - 1 - p, reversed once below)
    gram = np.ascontiguousarray(gram[::-1, ::-1])
    try:
        gram[np.diag_indices(TAPS)] += REG * max(float(np.trace(gram)) / TAPS, 1e-12)
        h = np.linalg.solve(gram, rhs)
    except np.linalg.LinAlgError:
        return None, first
    return (h, first) if np.isfinite(h).all() else (None, first)


def _gram(x: np.ndarray, n: int) -> np.ndarray:
    """S[p, q] = sum_{i<n} x[i + p] x[i + q] (p, q < T = `TAPS`; x holds n + T - 1 samples), exactly: the
    normal matrix of the fit is G[j, l] = S[T-1-j, T-1-l].

    S(p+1, q+1) = S(p, q) - x[p]x[q] + x[n+p]x[n+q], so each
    diagonal is its first entry (one FFT correlation) plus a running sum, all diagonals at once."""
    m = 1 << int(np.ceil(np.log2(n + 2 * TAPS)))
    first_row = np.fft.irfft(np.conj(np.fft.rfft(x[:n], m)) * np.fft.rfft(x, m), m)[:TAPS]  # S(0, d)
    xp = np.concatenate([x, np.zeros(TAPS)])  # (entries past x are never used: p + d < T)
    view = np.lib.stride_tricks.sliding_window_view
    head, tail = view(xp[: 2 * TAPS - 2], TAPS), view(xp[n : n + 2 * TAPS - 2], TAPS)  # [r, d] = x[r + d], x[n + r + d]
    step = xp[n : n + TAPS - 1] * tail.T - xp[: TAPS - 1] * head.T  # [d, r]: S(r+1, r+1+d) - S(r, r+d)
    np.cumsum(step, axis=1, out=step)  # (along the rows: contiguous)
    diag = np.empty((TAPS, TAPS))  # diag[p, d] = S(p, p + d)
    diag[0] = first_row
    diag[1:] = first_row + step.T
    skew = np.zeros((TAPS, 2 * TAPS))  # skew[p, p + d] = diag[p, d]: the upper triangle in its first TAPS columns
    rows = np.lib.stride_tricks.as_strided(skew, (TAPS, TAPS), (skew.strides[0] + skew.strides[1], skew.strides[1]))
    rows[...] = diag
    upper = skew[:, :TAPS]
    S = upper + upper.T
    S[np.diag_indices(TAPS)] -= np.diag(upper)
    return S


def _estimate(far: np.ndarray, h: np.ndarray, first: int, lo: int, hi: int) -> np.ndarray:
    """The echo of far through (h, first) at samples [lo, hi)."""
    a, b = lo - first - h.size + 1, hi - first  # the far samples it takes: [a, b), silence outside the array
    idx = np.arange(a, b)
    seg = np.where((idx >= 0) & (idx < far.size), far[np.clip(idx, 0, far.size - 1)], 0.0)
    return np.convolve(seg, h, mode="valid")


def follow(near: np.ndarray, far: np.ndarray, h: np.ndarray, first: int, lo: int, hi: int,
           shift: int = 0) -> np.ndarray:
    """near[lo:hi] minus the echo, each `SPAN_BLOCK` with the shift of the estimate that `SWITCH_DB` allows.

    A block that changes shift changes it at the sample that leaves the least (a step of the delay
    falls anywhere in a block; switching at the block's edge left its 20 ms of echo whole)."""
    est = _estimate(far, h, first, lo - MAX_SHIFT, hi + MAX_SHIFT)  # est[i] is the echo at lo - MAX_SHIFT + i
    out = np.empty(hi - lo)
    switch = 10 ** (SWITCH_DB / 10)
    for s in range(lo, hi, SPAN_BLOCK):
        e = min(hi, s + SPAN_BLOCK)
        base = s - lo + MAX_SHIFT  # est index of sample s at shift 0
        left = [near[s:e] - est[base - k : base - k + e - s] for k in range(-MAX_SHIFT, MAX_SHIFT + 1)]
        energy = np.array([float(r @ r) for r in left])
        best, old = int(np.argmin(energy)), left[shift + MAX_SHIFT]
        new = left[best]
        cost = np.cumsum(np.concatenate([[0.0], old**2])) + float(new @ new) - np.cumsum(np.concatenate([[0.0], new**2]))
        m = int(np.argmin(cost))  # the old shift before sample m, the best one from it
        if cost[m] * switch < energy[shift + MAX_SHIFT]:
            out[s - lo : e - lo] = np.concatenate([old[:m], new[m:]])
            shift = best - MAX_SHIFT
        else:
            out[s - lo : e - lo] = old
    return out
