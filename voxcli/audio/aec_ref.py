"""The echo canceller's far end: what the speaker played, on one clock with the microphone.

Why a timeline and not a queue: the echo in a captured frame is whatever the
speaker was playing when that frame was captured (plus the room's few ms), so
the reference for a microphone frame is looked up by *time*. Both sides stamp
their audio with PortAudio's own times, mapped to one monotonic clock in the
callback that delivers them (`playback_time`, `capture_time`): the output
callback's `outputBufferDacTime` (when its first sample reaches the DAC) and
the input callback's `inputBufferAdcTime` (when its first sample left the
ADC), each measured against the callback's `currentTime`, so the two streams
need not share a time base. A host API that gives no times (zeros) falls back
to the stream's reported `latency`. The delay between reference and echo is
thus measured, not a constant; AEC3's own delay estimator only has to find the
acoustic few milliseconds and the error of those stamps.

`ReferenceTimeline` takes the tapped output blocks at the device's rate
(after the player's resampling: exactly the samples the DAC gets), resamples
them to the capture rate and writes them at their time into a ring. Blocks
follow each other by sample count while their stamps agree within
`REANCHOR_S`; a jump (a new output stream after a barge-in, an underflow, the
two clocks drifting apart) re-anchors the timeline at the stamp. What was not
played (before the first block, gaps) reads as silence, as it sounded.
"""
from __future__ import annotations

import collections
import threading
import time
from typing import Any, Final

import numpy as np

from voxcli.audio.pcm import StreamResampler

REANCHOR_S: Final = 0.02
"""A block whose stamp is this far from where counting puts it starts a new anchor (a jump)."""
DRIFT_S: Final = 0.002
"""`DRIFT_BLOCKS` stamps in a row this far off the same way move the anchor by their median."""
DRIFT_BLOCKS: Final = 8
KEEP_S: Final = 10.0
"""Played audio kept for the capture side: as much as `MicCapture` queues (10 s). A capture that
falls behind by more than this (a starved process) is cancelled against silence, and the echo
passes: with 4 s, `chat` at load 15-19 interrupted itself on echo words once the capture lagged
by ~4 s (benchmarks/bench_barge_in.py --self-turns)."""


def _stamp(time_info: Any, field: str) -> tuple[float, float] | None:
    """(stamp, currentTime) from a sounddevice time_info, or None where the host API gives zeros."""
    try:
        t, now = float(getattr(time_info, field)), float(time_info.currentTime)
    except (AttributeError, TypeError, ValueError):
        return None
    return (t, now) if t > 0 and now > 0 else None


def playback_time(time_info: Any, latency: float, clock: Any = time.monotonic) -> float:
    """Monotonic time at which an output callback's first sample is heard."""
    now = clock()
    s = _stamp(time_info, "outputBufferDacTime")
    return now + (s[0] - s[1] if s else latency)


def capture_time(time_info: Any, frames: int, rate: float, latency: float, clock: Any = time.monotonic) -> float:
    """Monotonic time at which an input callback's first sample was captured."""
    now = clock()
    s = _stamp(time_info, "inputBufferAdcTime")
    return now + (s[0] - s[1] if s else -latency - frames / rate)


class PlayHead:
    """How many samples an output stream had *heard* by a time, from its callbacks' DAC stamps.

    Why: a reply cut off by a barge-in keeps the words the user heard, and the
    samples handed to PortAudio are not heard yet: they sit in the device's
    buffer for the output latency (tens of ms, more on Bluetooth or a loaded
    sound server). Each callback that played audio records (samples handed
    before it, the time its first sample reaches the DAC, how many it played);
    the play head at `now` is the latest such block that has started, plus how
    far into it `now` is. Silence padded by an underrun plays nothing and is
    not counted, so a stall moves the head late, as the listener hears it.
    """

    def __init__(self, rate: float, keep: int = 256) -> None:
        self.rate = rate
        self._blocks: collections.deque[tuple[int, float, int]] = collections.deque(maxlen=keep)

    def record(self, before: int, t_dac: float, n: int) -> None:
        """A callback played `n` samples (samples `before`..`before + n`) from `t_dac` on (n 0: nothing)."""
        if n > 0:
            self._blocks.append((before, t_dac, n))

    def heard(self, now: float) -> int:
        """Samples heard by `now` (over the stream's lifetime)."""
        for before, t, n in reversed(self._blocks):
            if t <= now:
                return before + min(n, int((now - t) * self.rate))
        return self._blocks[0][0] if self._blocks else 0

    def time_of(self, sample: int) -> float | None:
        """When sample `sample` reached the DAC (None: not played, or too long ago to be kept)."""
        for before, t, n in reversed(self._blocks):
            if before <= sample < before + n:
                return t + (sample - before) / self.rate
        return None


class Anchor:
    """Sample count -> clock time at `rate`, following a stream's stamps without their jitter.

    A single stamp is a few ms off (scheduling), so counting samples from an
    anchor is more exact than any one stamp. But the count loses track when
    the stream skips (an underflow/overflow) or its clock drifts from the
    monotonic one: a stamp more than `REANCHOR_S` off is a jump (new anchor
    at it); when the last `DRIFT_BLOCKS` stamps all deviate by more than
    `DRIFT_S` the same way, the anchor moves by their median (PulseAudio skips 8-12 ms now and
    then, which AEC3 must not have to re-learn for long).
    """

    def __init__(self, rate: float) -> None:
        self.rate = rate
        self.t: float | None = None
        self.n = 0
        self._devs: collections.deque[float] = collections.deque(maxlen=DRIFT_BLOCKS)
        self.jumps = 0
        self.shifts = 0

    def time_of(self, count: int) -> float:
        assert self.t is not None
        return self.t + (count - self.n) / self.rate

    def place(self, t: float, count: int) -> float | None:
        """Stamp `t` for sample `count`. Returns None (no change), nan (a jump), or the shift in s."""
        if self.t is None:
            self.t, self.n = t, count
            return None
        dev = t - self.time_of(count)
        if abs(dev) > REANCHOR_S:
            self.t, self.n = t, count
            self._devs.clear()
            self.jumps += 1
            return float("nan")
        self._devs.append(dev)
        if len(self._devs) == DRIFT_BLOCKS and (min(self._devs) > DRIFT_S or max(self._devs) < -DRIFT_S):
            med = float(np.median(self._devs))
            self.t += med
            self._devs.clear()
            self.shifts += 1
            return med
        return None


class ReferenceTimeline:
    """Played audio at `rate`, by time; `tap()` from the output callback, `read()` from the capture side."""

    def __init__(self, rate: int, *, keep_s: float = KEEP_S, clock: Any = time.monotonic) -> None:
        self.rate = rate
        self.t0 = clock()
        """Clock time of ring index 0."""
        self._block = max(1, rate // 100)
        n = -(-int(keep_s * rate) // self._block) * self._block  # whole 10 ms blocks
        self._ring = np.zeros(n, np.float32)
        self._peaks = np.zeros(n // self._block, np.float32)
        """Peak |x| of each 10 ms block of the ring (absolute block b at b % len): `peak()` in O(1) per block."""
        self._end = 0  # absolute index one past the last sample written
        self._pending: collections.deque[tuple[np.ndarray, float, int]] = collections.deque(maxlen=512)
        self._lock = threading.Lock()
        self._resampler: StreamResampler | None = None
        self._anchor: Anchor | None = None  # the current output stream's count -> time
        self._in = 0  # device-rate samples of this stream
        self._out = 0  # absolute index of the next resampled sample
        self._reanchors = 0
        self.last_tap: float | None = None

    def tap(self, played: np.ndarray, t_play: float, device_rate: int) -> None:
        """Output callback: `played` (a copy) is heard from `t_play` on. O(1), never blocks."""
        self._pending.append((played, t_play, device_rate))
        self.last_tap = t_play

    def index_of(self, t: float) -> int:
        return int(round((t - self.t0) * self.rate))

    def read(self, start: int, n: int) -> np.ndarray:
        """Samples [start, start + n) of the timeline (silence where nothing was played or it is gone)."""
        with self._lock:
            self._absorb()
            out = np.zeros(n, np.float32)
            lo, hi = max(start, self._end - self._ring.size), min(start + n, self._end)
            if hi > lo:
                self._copy_out(lo, hi, out[lo - start : hi - start])
            return out

    def peak(self, start: int, n: int) -> float:
        """max |x| over samples [start, start + n), as `np.abs(read(start, n)).max()` gives it (0 if empty).

        Whole 10 ms blocks inside the window come from the per-block peaks kept by
        `_write`, only the two part-blocks at its edges are scanned: the warm-up asks
        this for a 610 ms window on every 10 ms frame.
        """
        with self._lock:
            self._absorb()
            lo, hi = max(start, self._end - self._ring.size), min(start + n, self._end)
            if hi <= lo:
                return 0.0
            b = self._block
            first, last = -(-lo // b), hi // b  # whole blocks [first, last)
            if first >= last:
                return self._scan(lo, hi)
            nb = self._peaks.size
            i, j = first % nb, last % nb
            whole = self._peaks[i:j] if i < j else np.concatenate([self._peaks[i:], self._peaks[:j]])
            return max(float(whole.max()), self._scan(lo, first * b), self._scan(last * b, hi))

    def _scan(self, lo: int, hi: int) -> float:
        """max |x| over ring samples [lo, hi) (less than a block: the window's edges)."""
        if hi <= lo:
            return 0.0
        size = self._ring.size
        i = lo % size
        part = self._ring[i : i + hi - lo]
        peak = max(float(part.max()), -float(part.min()))
        if part.size < hi - lo:  # wrapped
            rest = self._ring[: hi - lo - part.size]
            peak = max(peak, float(rest.max()), -float(rest.min()))
        return peak

    def _copy_out(self, lo: int, hi: int, dst: np.ndarray) -> None:
        """Ring samples [lo, hi) (absolute, within the ring's span) into `dst`: at most two slices."""
        size = self._ring.size
        i = lo % size
        k = min(hi - lo, size - i)
        dst[:k] = self._ring[i : i + k]
        dst[k:] = self._ring[: hi - lo - k]

    @property
    def kept(self) -> int:
        """Samples the timeline keeps (older ones read as silence)."""
        return self._ring.size

    @property
    def reanchors(self) -> int:
        """Times the stamps disagreed with the sample count (a new stream, an underflow, drift)."""
        with self._lock:
            self._absorb()
            return self._reanchors

    @property
    def end(self) -> int:
        """Absolute index one past the last sample known (absorbing what was tapped)."""
        with self._lock:
            self._absorb()
            return self._end

    def _absorb(self) -> None:
        while self._pending:
            block, t, dev_rate = self._pending.popleft()
            moved = None if self._anchor is None or self._anchor.rate != dev_rate else self._anchor.place(t, self._in)
            if self._anchor is None or self._anchor.rate != dev_rate or (moved is not None and moved != moved):
                self._reanchor(t, dev_rate)
            elif moved is not None:  # drift: later samples go where the stamps now say
                self._out += int(round(moved * self.rate))
            y = self._resampler.process(block) if self._resampler is not None else block
            self._write(self._out, y)
            self._out += y.size
            self._in += block.size

    def _reanchor(self, t: float, dev_rate: int) -> None:
        """A new stream (or a skip): flush the resampler, count again from `t`."""
        if self._resampler is not None:
            self._write(self._out, self._resampler.process(np.zeros(0, np.float32), last=True))
        if self._anchor is not None:
            self._reanchors += 1
        self._resampler = StreamResampler(dev_rate, self.rate) if dev_rate != self.rate else None
        self._anchor = Anchor(dev_rate)
        self._anchor.place(t, 0)
        self._in = 0
        self._out = self.index_of(t)

    def _write(self, at: int, y: np.ndarray) -> None:
        if y.size == 0:
            return
        size = self._ring.size
        if y.size > size:  # longer than the ring: only its end is kept
            at, y = at + y.size - size, y[-size:]
        lo = at
        if at > self._end:  # a gap: silence was played (or nothing was)
            lo = max(self._end, at - size)
            self._copy_in(lo, np.zeros(at - lo, np.float32))
        self._copy_in(at, y)
        self._end = max(self._end, at + y.size)
        self._update_peaks(max(lo, at + y.size - size), at + y.size)

    def _copy_in(self, at: int, y: np.ndarray) -> None:
        """`y` (at most the ring's size) into the ring from absolute index `at`: at most two slices."""
        size = self._ring.size
        i = at % size
        k = min(y.size, size - i)
        self._ring[i : i + k] = y[:k]
        self._ring[: y.size - k] = y[k:]

    def _update_peaks(self, lo: int, hi: int) -> None:
        """Recompute the peaks of the blocks that samples [lo, hi) touched, from the ring."""
        b, nb = self._block, self._peaks.size
        first, last = lo // b, -(-hi // b)
        idx = np.arange(first, min(last, first + nb)) % nb
        self._peaks[idx] = np.abs(self._ring.reshape(nb, b)[idx]).max(axis=1)
