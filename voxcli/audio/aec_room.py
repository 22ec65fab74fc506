"""A synthetic but realistic echo path: what a laptop's microphone hears of its own speaker.

Why it exists: the echo canceller (`voxcli.audio.aec`) is measured and tested
without a sound card, so the "room" is made here, the same for the benchmark
(`benchmarks/bench_aec.py`), the offline tests and the device tests. The path
is the one a real speaker -> air -> microphone chain has: a small speaker that
saturates (a soft clip: the non-linearity a linear adaptive filter cannot
model), a room impulse response (a direct path, a few early reflections and a
late tail of exponentially decaying noise, reverberation time 200-400 ms), a
gain (laptop speakers at full volume are as loud at the microphone as the
user, or louder) and a delay (the acoustic path plus whatever buffers the
devices add).

ERLE (echo return loss enhancement) is the figure of merit: the echo's energy
over what is left of it after cancellation, in dB, on far-end-only audio.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Room:
    """One echo path; the defaults are a laptop at full volume in a small furnished room."""

    rt60_s: float = 0.3
    """Reverberation time: the tail decays by 60 dB in this time."""
    delay_s: float = 0.04
    """Delay from the reference to the echo's direct path (acoustic path + device buffers)."""
    gain: float = 1.0
    """Echo level relative to the far-end signal at the speaker (after the response is normalized)."""
    drive: float = 2.0
    """Soft clip of the speaker: y = tanh(drive * x) / drive (1 ~ linear for quiet audio)."""
    seed: int = 0
    tail: float = 0.3
    """The reverberant tail's level (`room_response`). The direct sound against all after it: 0.3 -> -15 dB
    (a speaker a few metres off in a small room: the tail carries most of the echo), 0.1 -> -6 dB; a
    laptop's own speaker and microphone, centimetres apart, hear more direct sound than either. AEC3 is
    the weak point at 0.3: 17-40 dB of ERLE offline on one reply, 52-68 dB at 0.2 and below."""


def room_response(rate: int, rt60_s: float = 0.3, seed: int = 0, tail_level: float = 0.3) -> np.ndarray:
    """Impulse response: direct path, early reflections, exponentially decaying noise tail; unit energy."""
    rng = np.random.default_rng(seed)
    n = int(rt60_s * rate)
    t = np.arange(n) / rate
    tail = rng.standard_normal(n) * 10.0 ** (-3.0 * t / rt60_s)  # -60 dB at rt60
    tail[: int(0.002 * rate)] = 0.0  # the tail builds up after the first reflections
    h = tail_level * tail
    h[0] = 1.0
    for ms, amp in ((3.1, -0.6), (5.7, 0.45), (8.9, -0.35), (13.2, 0.3)):
        h[int(ms * rate / 1000)] += amp
    return (h / np.sqrt(np.sum(h * h))).astype(np.float32)


def echo_of(far: np.ndarray, rate: int, room: Room = Room()) -> np.ndarray:
    """What the microphone hears of `far` played through `room` (same length as `far`)."""
    x = np.asarray(far, np.float64)
    x = np.tanh(room.drive * x) / room.drive
    h = room_response(rate, room.rt60_s, room.seed, room.tail).astype(np.float64)
    y = np.convolve(x, h)[: x.size] * room.gain
    d = int(round(room.delay_s * rate))
    return np.concatenate([np.zeros(d), y[: max(0, y.size - d)]]).astype(np.float32)


def erle_db(echo: np.ndarray, residual: np.ndarray, frame: int = 160, floor: float = 1e-4) -> float:
    """ERLE over the frames where the echo is audible (RMS above `floor`): 10 log10(sum e^2 / sum r^2)."""
    n = min(echo.size, residual.size) // frame * frame
    e = np.asarray(echo[:n], np.float64).reshape(-1, frame)
    r = np.asarray(residual[:n], np.float64).reshape(-1, frame)
    loud = np.sqrt(np.mean(e * e, axis=1)) > floor
    if not loud.any():
        return 0.0
    return float(10.0 * np.log10(np.sum(e[loud] ** 2) / max(np.sum(r[loud] ** 2), 1e-20)))


def rms(a: np.ndarray) -> float:
    a = np.asarray(a, np.float64)
    return float(np.sqrt(np.mean(a * a))) if a.size else 0.0


def replay(canceller, played: np.ndarray, play_rate: int, mic: np.ndarray, *, out_block: int = 256,
           in_block: int = 512, lead_s: float = 0.03, jitter_s: float = 0.002, seed: int = 0) -> np.ndarray:
    """Run `canceller` (a `voxcli.audio.aec.EchoCanceller`) as the device callbacks would, without devices.

    `played` (at `play_rate`) is what the speaker plays from time 0 on, `mic`
    (at the canceller's rate) what the microphone captures from time 0 on.
    Output blocks are tapped `lead_s` ahead of the capture that hears them (an
    output buffer is filled before it plays: the output latency); every stamp has up to
    `jitter_s` of error, as real callback stamps do. Returns the cancelled
    microphone signal, as long as `mic` (the last part-frame zero).
    """
    rng = np.random.default_rng(seed)
    ref = canceller.reference
    rate = canceller.rate
    t0 = ref.t0
    out = np.zeros(mic.size, np.float32)
    done = tapped = 0
    for start in range(0, mic.size, in_block):
        t_end = (start + in_block) / rate + lead_s
        while tapped < played.size + play_rate and tapped / play_rate < t_end:  # the speaker runs ahead
            block = played[tapped : tapped + out_block]
            block = np.pad(block, (0, out_block - block.size)).astype(np.float32)
            ref.tap(block, t0 + tapped / play_rate + rng.uniform(-jitter_s, jitter_s), play_rate)
            tapped += out_block
        y = canceller.process(mic[start : start + in_block], t0 + start / rate + rng.uniform(-jitter_s, jitter_s))
        y = y[: max(0, mic.size - done)]
        out[done : done + y.size] = y
        done += y.size
    return out
