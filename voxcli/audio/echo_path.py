"""The user's first word under a loud reply, by subtracting the reply's echo: a linear fit made at the barge-in.

Why: AEC3 is a linear filter followed by a suppressor, and the suppressor is
what loses the user's first word when they start over a loud stretch of the
reply; pywebrtc-audio does not expose the linear stage's output. The echo
mask (`voxcli.audio.echo_mask`) gets the word back only in the bins where the
user stands 6 dB above the loudest echo possible, and an onset told 250-300 ms
after the first word means the user was under the echo in most bins: those
barge-ins kept the user's WER at 0.034 against 0.000 without echo
(benchmarks/bench_barge_in.py, 87 trials). A subtraction keeps the user at
any level. Two interleaved runs of `python benchmarks/bench_barge_in.py
--trials 32 --arms onset,onset-maskonly` (2026-12-02, load 0.3-1.2): the
user's WER 0.000 over 32 barge-ins with this rebuild (29 by the fit, 3 by the
mask standing in; 18 onsets 200 ms or more after the first word), 0.016 over
32 with the mask alone; 0.000 with no reply playing.

It is made once, when a barge-in needs it, from the raw microphone and the
reference the capture stage kept (`EchoMask`): the echo path is fitted by
least squares (an FIR of `TAPS` from the echo's delay) on the reply's last
stretch before the user, and subtracted over the span. No adaptive filter runs
on every frame, and the user cannot be learnt as echo: they are not in the fit.

The echo's delay against the placed reference is not constant: the capture
and the output stream each follow their PortAudio stamps (`aec_ref.Anchor`),
and each drift correction moves the placement by ~2 ms (on the null sink the
delay steps between two values ~33 samples apart every second or so). So the
fit uses only the longest stretch of one delay (`BLOCK_S` blocks whose
cross-correlation peaks at the same lag), and the subtraction follows a step
inside the span: each `SPAN_BLOCK` takes the shift of the echo estimate
(within `MAX_SHIFT`) that leaves the least, changing shift only when that is
`SWITCH_DB` better than keeping it (the user's own voice must not steer it).
Where no stretch is long and clear enough, or the fit explains too little of
the echo (`MIN_ERLE_DB`; a room this FIR does not hold), `rebuild` returns None
and the mask stands in.
"""
from __future__ import annotations

from typing import Final

import numpy as np

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


def rebuild(near: np.ndarray, far: np.ndarray, lo: int, hi: int, rate: int = 16000) -> np.ndarray | None:
    """near[lo:hi] with the reply's echo subtracted, or None when no fit can be trusted.

    `near` and `far` are the raw microphone and the reference each of its frames was given, sample
    for sample; the fit looks at what comes before `lo` (up to `FIT_S`).
    """
    near, far = np.asarray(near, np.float64), np.asarray(far, np.float64)
    max_lag, block = int(MAX_LAG_S * rate), int(BLOCK_S * rate)
    start = max(max_lag + TAPS, lo - int(FIT_S * rate))
    if lo - start < block or hi > near.size or lo < 0:
        return None
    run = longest_stretch(block_delays(near, far, start, lo, block, max_lag), block)
    if run is None or run[1] - run[0] < MIN_STRETCH_S * rate:
        return None
    a, b, delay = run
    h, first = fit(near[a:b], far[a - max_lag - TAPS : b], delay, max_lag + TAPS)
    if h is None or erle_db(near[a:b], _subtract(near, far, h, first, a, b)) < MIN_ERLE_DB:
        return None
    return follow(near, far, h, first, lo, hi).astype(np.float32)


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


def longest_stretch(delays: list[tuple[int, int, float]], block: int) -> tuple[int, int, int] | None:
    """(first sample, end sample, delay) of the longest run of clear blocks with one delay (the latest of
    equals), or None. Unclear blocks (`MIN_CORR`) neither end a run nor join it; a clear block with
    another delay ends it. Not just the latest run: the one before a step of the delay fits the same
    path, and `follow` finds the step."""
    clear = [(s, d) for s, d, c in delays if c >= MIN_CORR]
    runs: list[tuple[int, int, int]] = []
    for s, d in clear:
        if runs and abs(d - runs[-1][2]) <= DELAY_TOL:
            runs[-1] = (runs[-1][0], s + block, runs[-1][2])
        else:
            runs.append((s, s + block, d))
    return max(reversed(runs), key=lambda r: r[1] - r[0]) if runs else None


def fit(near: np.ndarray, far: np.ndarray, delay: int, before: int) -> tuple[np.ndarray | None, int]:
    """Least-squares FIR (`TAPS`) from `far` to `near`, starting `PRE_TAPS` before `delay`.

    `far` starts `before` samples before `near`; returns (h, first) where h[j] weighs far `first + j`
    samples back (None if the system is singular)."""
    first = max(0, delay - PRE_TAPS)
    n = near.size
    # columns: far delayed by first .. first + TAPS - 1 samples, over near's span
    m = 1 << int(np.ceil(np.log2(n + TAPS)))
    x = far[before - first - TAPS + 1 : before - first + n]  # x[i + TAPS - 1 - j] = far delayed by first + j at i
    X, Y = np.fft.rfft(x, m), np.fft.rfft(near, m)
    r = np.fft.irfft(np.conj(Y) * X, m)  # r[k] = sum_i near[i] x[i + k]
    rhs = r[TAPS - 1 :: -1][:TAPS]  # j -> k = TAPS - 1 - j
    seg = x[TAPS - 1 :]
    ac = np.fft.irfft(np.abs(np.fft.rfft(seg, m)) ** 2, m)[:TAPS]  # stationary approximation of the Gram matrix
    gram = ac[np.abs(np.subtract.outer(np.arange(TAPS), np.arange(TAPS)))]
    try:
        h = np.linalg.solve(gram + REG * max(float(ac[0]), 1e-12) * np.eye(TAPS), rhs)
    except np.linalg.LinAlgError:
        return None, first
    return h, first


def _estimate(far: np.ndarray, h: np.ndarray, first: int, lo: int, hi: int) -> np.ndarray:
    """The echo of far through (h, first) at samples [lo, hi)."""
    a, b = lo - first - h.size + 1, hi - first  # the far samples it takes: [a, b), silence outside the array
    idx = np.arange(a, b)
    seg = np.where((idx >= 0) & (idx < far.size), far[np.clip(idx, 0, far.size - 1)], 0.0)
    return np.convolve(seg, h, mode="valid")


def _subtract(near: np.ndarray, far: np.ndarray, h: np.ndarray, first: int, lo: int, hi: int) -> np.ndarray:
    return near[lo:hi] - _estimate(far, h, first, lo, hi)


def follow(near: np.ndarray, far: np.ndarray, h: np.ndarray, first: int, lo: int, hi: int) -> np.ndarray:
    """near[lo:hi] minus the echo, each `SPAN_BLOCK` with the shift of the estimate that `SWITCH_DB` allows."""
    est = _estimate(far, h, first, lo - MAX_SHIFT, hi + MAX_SHIFT)  # est[i] is the echo at lo - MAX_SHIFT + i
    out = np.empty(hi - lo)
    shift, switch = 0, 10 ** (SWITCH_DB / 10)
    for s in range(lo, hi, SPAN_BLOCK):
        e = min(hi, s + SPAN_BLOCK)
        base = s - lo + MAX_SHIFT  # est index of sample s at shift 0
        left = [near[s:e] - est[base - k : base - k + e - s] for k in range(-MAX_SHIFT, MAX_SHIFT + 1)]
        energy = np.array([float(r @ r) for r in left])
        best = int(np.argmin(energy))
        if energy[best] * switch < energy[shift + MAX_SHIFT]:
            shift = best - MAX_SHIFT
        out[s - lo : e - lo] = left[shift + MAX_SHIFT]
    return out


def erle_db(before: np.ndarray, after: np.ndarray) -> float:
    """How much the subtraction took off, in dB (inf when it left nothing)."""
    a, b = float(np.mean(np.square(before))), float(np.mean(np.square(after)))
    return float("inf") if b == 0 else 10 * np.log10(max(a, 1e-20) / b)
