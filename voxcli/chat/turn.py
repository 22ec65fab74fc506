"""The bookkeeping of one conversation turn, shared by the agent's threads.

Kept apart from the turn loop (`voxcli.chat.agent`) so the loop reads as the
algorithm: what a reply carries while it plays (`Reply`), what the agent's own
endpointer saw of a user utterance (`Utterance`), a transcript waiting for its
turn (`PendingTurn`), and when each fed mic sample was captured (`FeedClock`).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

from voxcli.chat.heard import Span
from voxcli.chat.turnlog import TurnClock

STAMPS_KEPT: int = 2048
"""Feed stamps kept by `FeedClock` (at ~10 sends/s, minutes of history: more than any turn needs)."""


class Speaker(Protocol):
    """Where the reply's audio goes: the sound card or a virtual speaker (voxcli.audio.virtual)."""

    sample_rate: int

    def write(self, audio: np.ndarray) -> int | None: ...
    def stop(self) -> int: ...
    def drain(self, timeout: float | None = None) -> bool: ...
    def played_samples(self) -> int: ...


@dataclass
class Reply:
    """The assistant's reply in progress: its TTS stream and what of it was played."""

    turn: int
    tts: Any
    clock: TurnClock
    spans: list[Span] = field(default_factory=list)
    """Speaker positions of the text spoken so far (one span per sentence)."""
    received: str = ""
    """Everything the LLM wrote (spoken or not)."""
    barged: bool = False
    heard_at_barge: str | None = None
    """What the user had heard when they interrupted (the history keeps only this)."""
    speculation: Any = None
    """The `voxcli.chat.preempt.Speculation` a preemptive reply answers (None: a confirmed turn)."""
    dropped: bool = False
    """A preemptive reply whose speculation was dropped: silenced like a barge-in, never recorded."""
    announced: bool = False
    """`TurnStart` was emitted (a preemptive reply announces itself once its endpoint is confirmed)."""
    generation: Any = None
    """The on-device LLM's `Generation` of this reply (`voxcli.chat.preempt`: a drop cancels it alone)."""


@dataclass
class Utterance:
    """One VAD utterance of the user, as seen by the agent's own endpointer."""

    start: float
    overlapped: bool
    """It began while the assistant was speaking (echo or backchannel unless it barged in)."""
    speech_end: float | None = None
    endpoint: float | None = None
    barged: bool = False


@dataclass
class PendingTurn:
    """A final transcript waiting for the turn loop."""

    text: str
    clock: TurnClock
    speculation: Any = None
    """Set for a preemptive reply (`voxcli.chat.preempt`): started before the endpoint was confirmed."""
    detector: dict[str, float] = field(default_factory=dict)
    """The semantic turn detector's verdict on this text (`voxcli.chat.turn_gate`); empty in vad mode."""


class FeedClock:
    """Maps a fed sample index to the wall time it was captured (sends arrive in real time)."""

    def __init__(self) -> None:
        self._stamps: list[tuple[int, float]] = []  # (samples fed after a send, wall time of that send)

    def record(self, fed: int, now: float) -> None:
        self._stamps.append((fed, now))
        if len(self._stamps) > 2 * STAMPS_KEPT:
            del self._stamps[:STAMPS_KEPT]

    def wall_of(self, sample: int, rate: int) -> float:
        """Wall time at which fed sample `sample` was captured."""
        best = self._stamps[-1]
        for fed, t in reversed(self._stamps):  # the send that delivered `sample`: first with fed >= sample
            if fed < sample:
                break
            best = (fed, t)
        fed, t = best
        return t - (fed - sample) / rate


def cut_off_reason(metrics: dict[str, float]) -> str:
    """What the user is told when the LLM's answer ended early (from the final delta's metrics flags).

    Why say which: "no new text for 20 s" points at the server, "one oversized
    piece" at a broken server or proxy, and a plain cut-off at the connection.
    """
    if metrics.get("stalled"):
        return f"the LLM server sent no new text for {metrics.get('progress_s', 0):g} s; the answer was cut off"
    if metrics.get("oversized"):
        return "the LLM server sent one oversized piece of text; the answer was cut off there"
    return "the answer was cut off"
