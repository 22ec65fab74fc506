"""A scripted microphone: speech files fed to the chat agent in real time, as if spoken.

Why real time: turn taking, barge-in and the latency ledger are all about
wall-clock time (the VAD hold, the play head of the reply), so the
non-interactive `voxcli chat --input a.wav --input b.wav@1.5` must pace its
audio exactly like a person would, silence included, or the test would
measure a different program than the one people talk to.

Schedule: an input without an offset starts once the agent is idle (the
previous reply has finished playing) plus `gap_s`; `FILE@T` starts T seconds
after the previous reply's first audio (so it can talk over the reply: a
scripted barge-in). Between inputs the mic hears silence, in real time.

Each input file is opened only when its turn comes and decoded in blocks
(`iter_audio`), so `--input` of any length holds about a second of audio.
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterable, Union

import numpy as np

from voxcli.asr.endpointer import SAMPLE_RATE
from voxcli.audio.files import iter_audio
from voxcli.audio.pcm import reblock
from voxcli.errors import UsageError

CHUNK = 512  # 32 ms, one VAD frame: what a capture callback typically delivers


@dataclass(frozen=True)
class ScriptedInput:
    path: Path
    offset_s: float | None = None
    """Seconds after the previous reply's first audio; None = after the reply ends."""

    @classmethod
    def parse(cls, spec: str) -> "ScriptedInput":
        """`turn.wav` or `turn.wav@1.5` (a path that itself contains '@' can be given as ./a@b.wav@0)."""
        path, sep, off = spec.rpartition("@")
        if sep and path:
            try:
                offset = float(off)
            except ValueError:
                return cls(Path(spec))
            if offset < 0:
                raise UsageError(f"--input {spec}: the offset must be >= 0 seconds")
            return cls(Path(path), offset)
        return cls(Path(spec))


class PacedFeeder:
    """Feeds `agent.feed` in CHUNK pieces on a real-time schedule (catching up if late)."""

    def __init__(self, feed: Callable[[np.ndarray], None], *, clock: Callable[[], float] = time.perf_counter,
                 sleep: Callable[[float], None] = time.sleep, should_stop: Callable[[], bool] = lambda: False):
        self.feed, self.clock, self.sleep, self.should_stop = feed, clock, sleep, should_stop
        self._t0: float | None = None
        self._sent = 0
        self._silence = np.zeros(CHUNK, dtype=np.float32)

    def _pace(self) -> None:
        if self._t0 is None:
            self._t0 = self.clock()
        due = self._t0 + self._sent / SAMPLE_RATE
        wait = due - self.clock()
        if wait > 0:
            self.sleep(wait)
        elif wait < -1.0:  # badly late (CPU starved): re-anchor rather than burst seconds of audio
            self._t0 = self.clock() - self._sent / SAMPLE_RATE

    def audio(self, pieces: Iterable[np.ndarray]) -> None:
        """Feed the pieces (CHUNK samples each: see `reblock`) on the real-time schedule."""
        for piece in pieces:
            if self.should_stop():
                return
            self._pace()
            self.feed(piece)
            self._sent += piece.size

    def silence_until(self, done: Callable[[], bool], timeout: float) -> bool:
        """Feed silence until `done()` (True) or `timeout` seconds (False)."""
        end = self.clock() + timeout
        while not done():
            if self.should_stop() or self.clock() >= end:
                return False
            self._pace()
            self.feed(self._silence)
            self._sent += CHUNK
        return True


ScriptItem = Union[ScriptedInput, "tuple[ScriptedInput, Path | np.ndarray]"]


def input_pieces(item: ScriptItem) -> tuple[ScriptedInput, Iterable[np.ndarray]]:
    """The input and its CHUNK-sample pieces; a file is decoded lazily, a block at a time.

    An item is a ScriptedInput (read from its path), or a pair of one with a
    path or with audio already decoded at 16 kHz.
    """
    spec, source = (item, item.path) if isinstance(item, ScriptedInput) else item
    blocks = [source] if isinstance(source, np.ndarray) else iter_audio(source, SAMPLE_RATE)
    return spec, reblock(blocks, CHUNK)


def run_script(agent, inputs: list[ScriptItem], *, gap_s: float = 0.4,
               lead_in_s: float = 0.3, turn_timeout_s: float = 120.0,
               clock: Callable[[], float] = time.perf_counter) -> None:
    """Play the inputs into the agent as a conversation; return when the last reply has played."""
    stop = lambda: agent.error is not None or agent.closed  # noqa: E731
    feeder = PacedFeeder(agent.feed, clock=clock, should_stop=stop)
    feeder.silence_until(lambda: False, lead_in_s)
    turns_before = agent.turns_done
    for k, item in enumerate(inputs):
        spec = item if isinstance(item, ScriptedInput) else item[0]
        if k and spec.offset_s is not None:
            # Talk over the reply: start T s after its first audio (or when it ends, if sooner).
            def reply_due() -> bool:
                t = agent.reply_first_audio
                if t is not None:
                    return clock() >= t + spec.offset_s
                return agent.turns_done > turns_before and not agent.busy()

            feeder.silence_until(reply_due, turn_timeout_s)
        elif k:
            feeder.silence_until(_idle_for(agent, gap_s, clock), turn_timeout_s)
        if stop():
            return
        turns_before = agent.turns_done
        feeder.audio(input_pieces(item)[1])
    feeder.silence_until(_idle_for(agent, gap_s, clock), turn_timeout_s)


def _idle_for(agent, gap_s: float, clock: Callable[[], float]) -> Callable[[], bool]:
    """A predicate: the agent has been idle (nobody speaking, no turn running) for `gap_s`."""
    since: list[float | None] = [None]

    def check() -> bool:
        if agent.busy():
            since[0] = None
            return False
        if since[0] is None:
            since[0] = clock()
        return clock() - since[0] >= gap_s

    return check
