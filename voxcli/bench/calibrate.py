"""`voxcli bench ttfa --calibrate`: measure this device and write the TTS profile `speak` uses.

Three measurements on the loaded voice, all through the voice's public block
API (`blocks(prepared, sizes)` with a per-run `StreamConfig`), so they hold
for whatever block decoder the voice has:

1. Context: decode one long sentence in small blocks with 0, 2, 4, ... frames
   of lookback/lookahead and compare with decoding it as one block; keep the
   smallest context whose SNR reaches the target (`snr_db`).
2. Cost: time blocks of 4..128 frames with that context and fit
   `seconds = call_s + frame_s * (frames + context)` (median per size).
3. Schedule: the smallest first block whose schedule is underrun-free on a
   device `safety` times slower (`voxcli.tts.profile`: the rule and the check).

The sentence's latent comes from one `prepare`; blocked and whole decoding
read the same latent, so the SNR measures only the blocking.
"""
from __future__ import annotations

import copy
import os
import platform
import statistics
import time
from dataclasses import dataclass, replace
from datetime import datetime, timezone
from typing import Any, Callable, Final

import numpy as np

from voxcli.errors import VoxError
from voxcli.tts.profile import (DEFAULT_SAFETY, DEFAULT_SNR_DB, Costs, Profile, schedule, smallest_first,
                                violations)

TEXT: Final = "It was the best of times, it was the worst of times, it was the age of wisdom and of foolishness."
CONTEXTS: Final = (0, 2, 4, 6, 8, 10, 12, 16, 24, 32)
SIZES: Final = (4, 8, 16, 32, 64)
MIN_FIRST: Final = 4
"""Never start a sentence with fewer frames (46 ms): smaller blocks spend most of their call on context."""


class CalibrationError(VoxError):
    """This device cannot stream the voice as asked (e.g. slower than real time at the safety factor)."""


@dataclass(frozen=True)
class Calibration:
    """The profile and the figures it was made from (for the report and --json)."""

    profile: Profile
    snr_by_context: dict[int, float]
    seconds_by_size: dict[int, float]
    sizes: list[int]
    """The schedule A(0), A(1), ... the profile implies (first 12 blocks)."""


def snr_db(reference: np.ndarray, test: np.ndarray) -> float:
    n = min(reference.size, test.size)
    err = float(np.sum((reference[:n] - test[:n]) ** 2)) + float(np.sum(reference[n:] ** 2) + np.sum(test[n:] ** 2))
    return float(10 * np.log10(max(float(np.sum(reference ** 2)), 1e-20) / max(err, 1e-20)))


def _view(engine: Any, **knobs: int) -> Any:
    """The engine with other block knobs (a shallow copy: sessions shared, the voice untouched)."""
    v = copy.copy(engine)
    v.config = replace(engine.config, **knobs)
    return v


def _decode(engine: Any, p: Any, size: int) -> np.ndarray:
    p.z = None  # the flow's output is cached on the sentence (`PiperVoice.latent`): run it again, as speak does
    return np.concatenate([np.asarray(b, np.float32).reshape(-1) for b in engine.blocks(p, lambda k: size)])


def measure_context(engine: Any, p: Any, target_db: float, block: int) -> tuple[int, float, dict[int, float]]:
    """(context, its SNR, SNR per context): the smallest lookback = lookahead reaching `target_db`."""
    whole = _decode(_view(engine, lookback=0, lookahead=0), p, p.frames + 1)
    table: dict[int, float] = {}
    for c in CONTEXTS:
        table[c] = snr_db(whole, _decode(_view(engine, lookback=c, lookahead=c), p, block))
        if table[c] >= target_db:
            return c, table[c], table
    best = max(table, key=lambda c: table[c])
    return best, table[best], table


def measure_costs(engine: Any, p: Any, reps: int) -> dict[int, float]:
    """Median seconds per block of each size (the first block of each pass is a warm-up)."""
    out: dict[int, float] = {}
    for size in SIZES:
        if size * 3 > p.frames:
            break
        times: list[float] = []
        for _ in range(reps):
            p.z = None  # time the flow too: a cached latent would leave it out of every block's cost
            it = engine.blocks(p, lambda k: size)
            next(it, None)
            while True:
                t = time.perf_counter()
                if next(it, None) is None:
                    break
                times.append(time.perf_counter() - t)
            times.pop()  # the last block is a remainder of another size
        out[size] = statistics.median(times) if times else 0.0
    return out


def fit_costs(seconds_by_size: dict[int, float], context: int, audio_frame_s: float) -> Costs:
    """`call_s + frame_s * (size + context)`: the least-squares slope, then the intercept raised until
    no measurement lies above the line (an upper bound of what was seen, so the proof is conservative)."""
    x = np.array([s + context for s in seconds_by_size], float)
    y = np.array(list(seconds_by_size.values()), float)
    frame_s = max(float(np.polyfit(x, y, 1)[0]) if x.size >= 2 else float(y[0] / x[0]), 1e-6)
    call_s = max(0.0, float(np.max(y - frame_s * x)))
    return Costs(call_s=call_s, frame_s=frame_s, audio_frame_s=audio_frame_s)


def calibrate(voice: Any, *, safety: float = DEFAULT_SAFETY, target_db: float = DEFAULT_SNR_DB, reps: int = 2,
              text: str = TEXT, on_step: Callable[[str], None] | None = None) -> Calibration:
    """Measure `voice` (a loaded `Voice`) on this device; the profile is returned, not written."""
    say = on_step or (lambda _m: None)
    engine = getattr(voice, "engine", voice)
    if getattr(engine, "config", None) is None or not getattr(engine, "can_stream", True):
        raise CalibrationError(f"voice {getattr(voice, 'name', '?')} has no block decoder to calibrate")
    p = max(engine.prepare(text, normalize=False), key=lambda q: q.frames)
    base = engine.config
    say(f"context: blocks of {base.first_frames} frames vs whole decoding of {p.frames} frames")
    context, measured, snr_table = measure_context(engine, p, target_db, base.first_frames)
    view = _view(engine, lookback=context, lookahead=context)
    say(f"cost: blocks of {', '.join(map(str, SIZES))} frames, {reps} passes")
    seconds = measure_costs(view, p, reps)
    audio_frame_s = engine.hop_length / float(engine.sample_rate)
    ctx_total = 2 * context + base.overlap
    costs = fit_costs(seconds, ctx_total, audio_frame_s)
    frames = base.frames
    first = None
    while first is None and frames <= 512:
        first = smallest_first(costs, ctx_total, safety, frames)
        frames = frames if first is not None else frames * 2
    if first is None:
        rtf = costs.frame_s / audio_frame_s
        raise CalibrationError(f"this device decodes at RTF {rtf:.2f}: no block schedule keeps up at {safety:g}x "
                               "safety", hint="lower --safety, or use a smaller voice")
    first = max(first, MIN_FIRST)
    profile = Profile(voice=str(getattr(voice, "name", "voice")), first_frames=first, frames=max(frames, first),
                      lookback=context, lookahead=context, overlap=base.overlap, safety=safety, snr_db=target_db,
                      measured_snr_db=round(measured, 1), costs=costs, created=_now(), device=_device())
    sizes = schedule(costs, profile.first_frames, profile.frames, profile.context, safety)
    if violations(costs, sizes, profile.context, safety):  # cannot happen after smallest_first; never write a lie
        raise CalibrationError(f"internal: the schedule {sizes[:8]} fails its own check")
    return Calibration(profile, snr_table, seconds, sizes[:12])


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def _device() -> str:
    return f"{platform.system()} {platform.machine()}, {os.cpu_count()} cores"
