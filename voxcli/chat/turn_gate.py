"""When does a final transcript end the user's turn? (`--endpoint vad|semantic`)

vad: every ASR final is a turn (the streamer's hold, `asr.endpoint_ms`, did the
waiting).

semantic: the streamer runs with the short hold of a complete thought
(`HoldPolicy.min_ms`), and the gate asks the turn detector about the words so
far: complete -> the turn goes at once; mid-phrase -> it is held until the
policy's longer hold has passed since the end of speech. If the user speaks
again meanwhile, the next final is joined to the held words and judged again,
so "I'd like to order a ... pizza" is one turn. A held turn whose follow-up
speech yields no words is released `RESUME_GRACE_S` after that speech ends.
"""
from __future__ import annotations

import queue
import threading
import time
from dataclasses import dataclass
from typing import Any, Callable, Final

from voxcli.chat.turn import PendingTurn
from voxcli.chat.turnlog import TurnClock

ENDPOINT_MODES: Final = ("vad", "semantic")
RESUME_GRACE_S: Final = 1.5
"""After resumed speech ends, how long a held turn waits for that speech's transcript."""
SPEECH_CONFIRM_S: Final = 0.35
"""A speech frame during a hold defers its release this long: time for the VAD to confirm a start
(`min_speech_ms`); a click or a cough then lets the turn go."""


@dataclass
class _Held:
    text: str
    clock: TurnClock
    deadline: float | None
    """perf_counter time at which the turn goes; None while the user speaks again."""


class TurnGate:
    """Receives finals (`final`), releases turns through `put`; `poll()` releases held turns when due."""

    def __init__(self, put: Callable[[PendingTurn], None], detector: Any = None,
                 clock: Callable[[], float] = time.perf_counter) -> None:
        self.put, self.detector, self.clock = put, detector, clock
        self.held_turns = 0
        """Turns the detector held past the short hold (mid-phrase pauses)."""
        self.joined = 0
        """Finals joined to a held turn (pauses that did not end the turn)."""
        self.last_score: float | None = None
        self.start_early: Callable[[str, TurnClock], Callable[[bool], bool] | None] | None = None
        """Semantic mode: called with a fresh final before it is scored; may start the reply at once and
        return `settle(released)`, told the verdict (True: the early reply is the turn, nothing is put)."""
        self._held: _Held | None = None
        self._lock = threading.Lock()
        self._prefetch: queue.Queue[str] = queue.Queue(maxsize=1)
        self._closed = threading.Event()
        self._worker: threading.Thread | None = None

    @property
    def holding(self) -> bool:
        return self._held is not None

    def final(self, text: str, clock: TurnClock) -> None:
        """An ASR final: release a turn now, or hold it (semantic mode, mid-phrase)."""
        with self._lock:
            held, self._held = self._held, None
        if held is not None:
            text = f"{held.text} {text}"
            clock.speech_end = clock.speech_end if clock.speech_end is not None else held.clock.speech_end
            self.joined += 1
        if self.detector is None:
            self.put(PendingTurn(text, clock))
            return
        # the LLM may start while the detector scores (2 cores): the verdict confirms or cancels it
        settle = self.start_early(text, clock) if self.start_early is not None and held is None else None
        self.last_score = score = self.detector.score(text)
        hold_s = self.detector.policy.hold_ms(score) / 1000
        origin = clock.speech_end if clock.speech_end is not None else (clock.asr_final or self.clock())
        due = origin + hold_s
        if self.clock() >= due:
            if settle is None or not settle(True):
                self.put(PendingTurn(text, clock))
            return
        if settle is not None:
            settle(False)
        self.held_turns += 1
        with self._lock:
            self._held = _Held(text, clock, due)

    def prefetch(self, text: str) -> None:
        """Score `text` (a speculative final) in the background, so the final finds it done."""
        if self.detector is None or not text.strip() or self._closed.is_set():
            return
        with self._lock:
            held = self._held.text if self._held is not None else None
            if self._worker is None:
                self._worker = threading.Thread(target=self._score_ahead, name="voxcli-turn-detector", daemon=True)
                self._worker.start()
        try:
            self._prefetch.put_nowait(f"{held} {text}" if held else text)
        except queue.Full:
            pass  # one in flight is enough: it is the same utterance

    def _score_ahead(self) -> None:
        while not self._closed.is_set():
            try:
                text = self._prefetch.get(timeout=0.2)
            except queue.Empty:
                continue
            try:
                self.detector.score(text)
            except Exception:  # noqa: BLE001 - a prefetch only warms the cache; the final scores again
                pass

    def close(self) -> None:
        self._closed.set()
        if self._worker is not None:
            self._worker.join(1.0)

    def speech_frame(self) -> None:
        """A frame scored as speech while a turn is held: maybe the user goes on (see SPEECH_CONFIRM_S)."""
        with self._lock:
            h = self._held
            if h is not None and h.deadline is not None:
                h.deadline = max(h.deadline, self.clock() + SPEECH_CONFIRM_S)

    def speech_resumed(self) -> None:
        """The user speaks again: a held turn waits for the next final."""
        with self._lock:
            if self._held is not None:
                self._held.deadline = None

    def speech_ended(self) -> None:
        """The resumed speech ended: its final should follow; do not wait for it forever."""
        with self._lock:
            if self._held is not None and self._held.deadline is None:
                self._held.deadline = self.clock() + RESUME_GRACE_S

    def poll(self) -> float | None:
        """Release a held turn whose hold has passed; the seconds until the next deadline (None: none)."""
        now = self.clock()
        with self._lock:
            h = self._held
            if h is None or h.deadline is None:
                return None
            if now < h.deadline:
                return h.deadline - now
            self._held = None
        h.clock.endpoint = now  # the turn ended when the longer hold did
        self.put(PendingTurn(h.text, h.clock))
        return None
