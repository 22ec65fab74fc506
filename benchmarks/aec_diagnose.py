"""Where the barging-in user's errors come from, on a recorded session (`aec_session.py words` and `tail`).

Two measurements that located the errors left after the first word's span (2026-12-03):

- `user_lead`: how long before the onset the user had started, per barge-in (the clip's first sample
  found in the raw microphone by cross-correlation). The onsets fall in two groups: ~60 ms after the
  user's first sample (the detector heard "It") and ~220 ms (it heard "was": "It" was under the
  reply). `words` splits its WER by this lag.
- `tail`: how much echo the room's fit (`voxcli.audio.echo_subband`) takes off where the reply falls
  silent on its own (a gap in the reference, no user near it), per 50 ms after the silence: what it
  leaves of the echo's tail, which is where a late-detected user's "the" sits after the pause.
"""
from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import numpy as np

HERE = Path(__file__).resolve().parent

LATE_MS = 150
"""A barge-in detected more than this after the user's first sample is counted as detected late."""


def user_clip(rate: int, path: Any = None) -> np.ndarray:
    """The barging-in user's clip as `bench_barge_in.py` plays it, at `rate` (its level does not matter here);
    `path`: the Two Cities recording (default: the speech-samples bundle's)."""
    import soxr

    sys.path.insert(0, str(HERE))
    import bench_barge_in

    user, user_rate = bench_barge_in.user_speech(np.full(160, 0.1, np.float32), path)
    return soxr.resample(user.astype(np.float64), user_rate, rate)


def captured(path: str) -> np.ndarray:
    """The session's capture blocks end to end: the raw microphone, numbered as the canceller numbers it."""
    z = np.load(path)
    au, sizes, cap = z["audio"], z["sizes"], z["cap"]
    ends = np.cumsum(sizes)
    return np.concatenate([au[ends[k] - sizes[k] : ends[k]] for k in range(cap.size) if cap[k]]).astype(np.float64)


def user_lead(near: np.ndarray, onset: int, user: np.ndarray, rate: int) -> int:
    """Samples from the user's first sample to `onset`: where the clip best lines up with the microphone
    between 0.5 s before the onset and the onset (the user is the loudest thing there once the reply pauses)."""
    seg = near[max(0, onset - rate // 2) : onset + user.size]
    n = 1 << int(np.ceil(np.log2(seg.size + user.size)))
    cc = np.fft.irfft(np.fft.rfft(seg, n) * np.conj(np.fft.rfft(user, n)), n)
    start = max(0, onset - rate // 2) + int(np.argmax(cc[: min(rate // 2, onset) + 1]))
    return onset - start


def split_by_lead(leads_ms: list[float], errors: list[Any]) -> str:
    """The WER of the barge-ins detected early and late (`LATE_MS`), with how many of each."""
    parts = []
    for name, pick in (("early", lambda ms: ms <= LATE_MS), ("late", lambda ms: ms > LATE_MS)):
        sel = [e for ms, e in zip(leads_ms, errors) if pick(ms)]
        if sel:
            total = sum(sel[1:], sel[0])
            parts.append(f"detected {name} (user started {'<=' if name == 'early' else '>'} {LATE_MS} ms before "
                         f"the onset): WER {total.rate:.3f} over {len(sel)}")
    return "; ".join(parts)


def tail(path: str, canceller_for: Any, feed: Any) -> None:
    """The room's fit at each gap of the reply (no barge-in from 1 s before to 5 s after; its reference placed
    over the fit's 3 s): the echo it takes off per 50 ms from 50 ms before the reference falls silent, and the
    microphone's level there. `canceller_for`, `feed`: `aec_session`'s (a fresh canceller, the session fed)."""
    from voxcli.audio import echo_subband

    c = canceller_for(path)
    rate, f = c.rate, c.mask.frame
    kept: dict[int, tuple[np.ndarray, np.ndarray]] = {}  # frame number -> (near, far) of a placed frame
    cuts: list[int] = []  # frames where the raw ring was cut (a placement jump): no fit across them
    onsets: list[int] = []
    record, cut = c.mask.record, c.mask.cut

    def recorded(spectrum, band, above, near=None, far=None):  # type: ignore[no-untyped-def]
        if near is not None and far is not None and spectrum is not None:  # (unplaced: zeros for its reference)
            kept[c.mask.count] = (np.array(near, np.float32), np.array(far, np.float32))
        return record(spectrum, band, above, near, far)

    def cutting() -> None:
        cuts.append(c.mask.count)
        cut()

    def told() -> None:  # a barge-in's first onset (trials are > 6 s apart), as `words` counts them
        p = c.mask.count * f
        if not onsets or p - onsets[-1] >= 6 * rate:
            onsets.append(p)

    c.mask.record, c.mask.cut, c.on_near_speech = recorded, cutting, told
    feed(path, c)
    if not kept:
        raise SystemExit(f"{path}: the canceller kept no raw audio (no reply?)")
    count = max(kept) + 1
    valid = np.zeros(count, bool)
    valid[list(kept)] = True
    valid[[k for k in cuts if k < count]] = False  # a cut's frame starts a new run: no window across it
    near, far = np.zeros(count * f), np.zeros(count * f)
    for k, (n, r) in kept.items():
        near[k * f : k * f + n.size], far[k * f : k * f + r.size] = n, r
    active = np.sqrt(np.mean(far[: far.size // f * f].reshape(-1, f) ** 2, axis=1)) > 1e-3
    step = rate // 20
    rows, levels = [], []
    for k in range(200, active.size - 25):
        if not (active[k - 1] and not active[k : k + 25].any() and active[k - 200 : k].mean() > 0.4):
            continue
        if not valid[max(0, k - 300) : k + 40].all() or k < 300:  # the fit's 2 s, its delay search and the gap
            continue
        g = k * f
        if any(-rate < g - o < 5 * rate for o in onsets):  # the user starts up to ~0.3 s before an onset
            continue
        out = echo_subband.rebuild(near, far, g - step, g + 7 * step, rate)
        if out is None:
            continue
        mic = [float(np.sum(near[g - step + t : g + t] ** 2)) for t in range(0, 8 * step, step)]
        left = [float(np.sum(out[t : t + step].astype(np.float64) ** 2)) for t in range(0, 8 * step, step)]
        rows.append([10 * np.log10(max(m, 1e-20) / max(x, 1e-20)) for m, x in zip(mic, left)])
        levels.append([10 * np.log10(max(m / step, 1e-12)) for m in mic])
    if not rows:
        raise SystemExit(f"{path}: no gap of 250 ms in the reply away from the barge-ins, or no fit held there")
    head = " ".join(f"{t:>+6d}" for t in range(-50, 350, 50))
    print(f"{path}: {len(rows)} gaps of the reply (its reference silent for 250 ms or more), no user")
    print(f"  ms after the reference fell silent:   {head}")
    print(f"  echo taken off by the fit, median dB: {' '.join(f'{v:6.1f}' for v in np.median(rows, axis=0))}")
    print(f"  microphone level, median dBFS:        {' '.join(f'{v:6.1f}' for v in np.median(levels, axis=0))}")
