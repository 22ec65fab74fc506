"""The echo path through a room on real devices: one null sink's monitor, a room, another null sink.

Why: a single null sink whose monitor is the microphone is the loudest echo
there is, but a perfect one: the reply itself, a constant delay later. A
laptop's speaker saturates, its room reverberates, and the path's delay
drifts. Here an input stream records the monitor of the sink the agent plays
into, its callback applies `voxcli.audio.aec_room.Room` (a soft clip, a
300 ms impulse response, a gain) and a delay that drifts by a sample now and
then, and an output stream plays the result into a second sink, whose monitor
is the agent's microphone; the user's voice is played into that second sink
directly. Real devices, real buffers, real jitter.

    sinks = Sinks(room=Room(delay_s=0.0))   # loads both, points PULSE_SINK/PULSE_SOURCE at them, starts the relay
    with sinks.user_sink():    # streams opened in here play into the microphone's sink
        ...
    sinks.close()
"""
from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import time
from typing import Iterator

import numpy as np

from voxcli.audio.aec_room import Room, room_response

RATE = 16000
BLOCK = 320
"""Samples the relay takes and gives at a time (20 ms)."""


TARGET_FILL = 800
"""Samples the relay aims to hold between its input and output callbacks (50 ms: its input comes in bursts).
Slips start only `FILL_SLACK` off it, so a steady clock difference parks the fill near one edge (40 or 60 ms)."""
FILL_SLACK = 160
FILL_SMOOTH = 0.02
"""Per output callback: the held samples are followed over ~1 s (the input comes in 20 ms bursts)."""


class RoomRelay:
    """`src` sink's monitor -> soft clip, room response, gain, drifting delay -> `dst` sink.

    Two PortAudio streams at the low latency, each opened with its sink chosen through PULSE_SOURCE /
    PULSE_SINK, and a queue between their callbacks (parec and pacat in a pipe added ~115 ms). The two
    sinks' clocks differ (by ~700 ppm here): a plain queue drained slowly and starved every ~28 s, an
    18-20 ms step of the echo's delay each time, which no laptop's speaker and microphone (one clock)
    make. The queue is held at `TARGET_FILL` by repeating or dropping one sample at a time, as a sound
    server's loopback resamples between two devices: a smooth drift, like two devices' clocks."""

    def __init__(self, src: str, dst: str, room: Room = Room(delay_s=0.0), drift_every_s: float = 1.5,
                 drift_max: int = 48, seed: int = 0) -> None:
        import collections

        import sounddevice as sd

        self.room, self.drift_max = room, drift_max
        self.drift_every = max(1, int(drift_every_s * RATE / BLOCK))
        h = room_response(RATE, room.rt60_s, room.seed, room.tail).astype(np.float64)
        self._n = 1 << int(np.ceil(np.log2(BLOCK + h.size)))
        self._h = np.fft.rfft(h, self._n)
        self._tail = np.zeros(h.size - 1)
        self._delay = np.zeros(int(room.delay_s * RATE))  # the path's own delay (the streams add theirs)
        self._rng = np.random.default_rng(seed)
        self.drift = 0  # samples the delay has drifted by (a random walk within +-drift_max)
        self._blocks = 0
        self._queue: collections.deque[np.ndarray] = collections.deque()
        self._pending = np.zeros(0, np.float32)
        self.starved = 0
        """Output callbacks that found less than a block queued (silence played for the gap)."""
        self.dropped = 0
        """Blocks dropped to catch up (each a 20 ms step of the path's delay and a click)."""
        self.slips = 0
        """Single samples repeated or dropped to hold the queue at `TARGET_FILL` (the two sinks' clocks differ)."""
        self._fill: float | None = None
        self._primed = False
        with pulse_env(PULSE_SOURCE=f"{src}.monitor", PULSE_SINK=dst):
            self._in = sd.InputStream(samplerate=RATE, blocksize=BLOCK, channels=1, dtype="float32",
                                      device="pulse", latency="low", callback=self._take)
            self._out = sd.OutputStream(samplerate=RATE, blocksize=BLOCK, channels=1, dtype="float32",
                                        device="pulse", latency="low", callback=self._give)
        self._in.start()
        self._out.start()

    def _take(self, indata: np.ndarray, frames: int, time_info: object, status: object) -> None:
        y = self.process(indata[:, 0].copy())
        self._blocks += 1
        if self._blocks % self.drift_every == 0:
            y = self._drift(y)
        self._queue.append(y.astype(np.float32))

    def _give(self, outdata: np.ndarray, frames: int, time_info: object, status: object) -> None:
        queued = self._pending.size + sum(b.size for b in self._queue)
        self._fill = queued if self._fill is None else (1 - FILL_SMOOTH) * self._fill + FILL_SMOOTH * queued
        if not self._primed and queued < TARGET_FILL:
            outdata[:, 0] = 0.0  # the output started before the input: wait for the target's worth
            return
        self._primed = True
        while self._pending.size < frames + 1 and self._queue:
            self._pending = np.concatenate([self._pending, self._queue.popleft()])
        if self._fill > TARGET_FILL + FILL_SLACK and self._pending.size > frames:
            self._pending, self.slips = np.delete(self._pending, frames // 2), self.slips + 1  # one sample less
        elif self._fill < TARGET_FILL - FILL_SLACK and self._pending.size:
            k = min(frames // 2, self._pending.size - 1)
            self._pending, self.slips = np.insert(self._pending, k, self._pending[k]), self.slips + 1
        if self._pending.size < frames:
            self.starved += 1
        n = min(frames, self._pending.size)
        outdata[:n, 0] = self._pending[:n]
        outdata[n:, 0] = 0.0
        self._pending = self._pending[n:]
        while len(self._queue) > 4:  # more than 80 ms behind (the input came in a burst): catch up
            self._queue.popleft()
            self.dropped += 1

    def process(self, x: np.ndarray) -> np.ndarray:
        """One block through the speaker's clip, the room (overlap-add) and the gain, the path's delay after."""
        r = self.room
        x = np.tanh(r.drive * np.asarray(x, np.float64)) / r.drive
        y = np.fft.irfft(np.fft.rfft(x, self._n) * self._h, self._n)[: x.size + self._tail.size]
        y[: self._tail.size] += self._tail
        out, self._tail = y[: x.size] * r.gain, y[x.size :].copy()
        if self._delay.size:
            both = np.concatenate([self._delay, out])
            out, self._delay = both[: x.size], both[x.size :]
        return out

    def _drift(self, y: np.ndarray) -> np.ndarray:
        """The delay moves by one sample: one more (a sample repeated) or one less (a sample dropped)."""
        step = int(self._rng.choice([-1, 1])) if abs(self.drift) < self.drift_max else -int(np.sign(self.drift))
        self.drift += step
        k = int(self._rng.integers(1, y.size - 1))
        return np.insert(y, k, y[k]) if step > 0 else np.delete(y, k)

    def close(self) -> None:
        for stream in (self._in, self._out):
            with contextlib.suppress(Exception):
                stream.abort()
                stream.close()


@contextlib.contextmanager
def pulse_env(**names: str) -> Iterator[None]:
    """PulseAudio streams opened in here use these PULSE_SINK / PULSE_SOURCE (each stream reads them when
    it opens); the previous values come back after."""
    before = {k: os.environ.get(k) for k in names}
    os.environ.update(names)
    try:
        yield
    finally:
        for k, v in before.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


class Sinks:
    """Private null sinks for a benchmark: one (the microphone hears the speaker's sink) or, with `room`,
    two with a `RoomRelay` between them. Every stream this process opens plays into the first and records
    the microphone's monitor (PULSE_SINK/PULSE_SOURCE), except those opened inside `user_sink()`; the
    user's default sink is left alone. The daemon is started as the device tests start it when none runs."""

    def __init__(self, room: Room | None = None, name: str = f"voxbarge{os.getpid()}") -> None:
        _daemon()
        self.speaker, self.mic = name, f"{name}room" if room else name
        self._modules = [self._load(self.speaker)] + ([self._load(self.mic)] if room else [])
        os.environ["PULSE_SINK"], os.environ["PULSE_SOURCE"] = self.speaker, f"{self.mic}.monitor"
        self.relay = RoomRelay(self.speaker, self.mic, room) if room else None

    @staticmethod
    def _load(sink: str) -> str:
        loaded = subprocess.run(["pactl", "load-module", "module-null-sink", f"sink_name={sink}"],
                                capture_output=True, text=True, timeout=10, check=True)
        return loaded.stdout.strip()

    def user_sink(self) -> contextlib.AbstractContextManager[None]:
        """Streams opened in here play into the microphone's sink (the user is in the room, not in the speaker)."""
        return pulse_env(PULSE_SINK=self.mic)

    def close(self) -> None:
        if self.relay is not None:
            self.relay.close()
            print(f"room relay: {self.relay.starved} output blocks starved, {self.relay.dropped} dropped, "
                  f"{self.relay.slips} single-sample slips")
        for module in self._modules:
            subprocess.run(["pactl", "unload-module", module], capture_output=True, timeout=10)


def _daemon() -> None:
    """Start PulseAudio (as .ci/run and the device tests do) when none answers; exit with a line if it cannot."""
    if subprocess.run(["pactl", "info"], capture_output=True).returncode == 0:
        return
    subprocess.run(["pulseaudio", "-D", "--exit-idle-time=-1", "--system=false", "--disallow-exit"],
                   capture_output=True)
    deadline = time.monotonic() + 10
    while subprocess.run(["pactl", "info"], capture_output=True).returncode != 0:
        if time.monotonic() > deadline:
            sys.exit(f"{os.path.basename(sys.argv[0])}: PulseAudio does not start here")
        time.sleep(0.2)
