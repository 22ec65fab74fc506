"""When does a final transcript end the user's turn? (`--endpoint vad|semantic`)

vad: every ASR final is a turn (the streamer's hold, `asr.endpoint_ms`, did the
waiting).

semantic: the streamer runs with the shortest hold (`HoldPolicy.min_ms`,
200 ms), and the gate asks the turn detector about the words so far:
complete -> the turn goes once `HoldPolicy.complete_ms` (by default the same
200 ms: usually already passed when the final comes) has passed since the end
of speech (a reply started early keeps running meanwhile: `settle` is told at
the release); mid-phrase -> it is held until the policy's longer hold has
passed (the early reply is cancelled at once). If the user speaks
again meanwhile, the next final is joined to the held words and judged again,
so "I'd like to order a ... pizza" is one turn. A held turn whose follow-up
speech yields no words is released `RESUME_GRACE_S` after that speech ends.

Holds are counted in audio the ASR has heard (`heard`: the capture time of
the last frame its VAD scored), not in wall time: on a loaded machine the
streamer lags the mic, and a wall-clock hold would release "I'd like to order
a" while the words that follow the pause still wait, unheard, in its inbox.

Each verdict is kept with its turn (`PendingTurn.detector`, the turn log's
`detector`): the score, the hold it chose, how long the final waited for the
score (0 when it was ready: prefetched during the hold), and whether it held.
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
    verdict: dict[str, float]
    settle: Callable[[bool, dict], bool] | None = None
    """The early reply kept running through a short hold (a complete thought): told at the release."""


class TurnGate:
    """Receives finals (`final`), releases turns through `put`; `poll()` releases held turns when due."""

    def __init__(self, put: Callable[[PendingTurn], None], detector: Any = None,
                 clock: Callable[[], float] = time.perf_counter, heard: Callable[[], float] | None = None) -> None:
        self.put, self.detector, self.clock, self.heard = put, detector, clock, heard
        """`heard()`: the `clock` time up to which the audio has been heard (None: all of it, `clock()`)."""
        self.held_turns = 0
        """Turns the detector held past the streamer's hold (mid-phrase pauses; complete but not confident)."""
        self.joined = 0
        """Finals joined to a held turn (pauses that did not end the turn)."""
        self.last_score: float | None = None
        self.start_early: Callable[[str, TurnClock], Callable[[bool, dict], bool] | None] | None = None
        """Semantic mode: called with a fresh final before it is scored; may start the reply at once and
        return `settle(released, verdict)`, told the verdict (True: the early reply is the turn, nothing is put)."""
        self._held: _Held | None = None
        self._lock = threading.Lock()
        self._prefetch: queue.Queue[str] = queue.Queue(maxsize=1)
        self._closed = threading.Event()
        self._worker: threading.Thread | None = None

    def _now(self) -> float:
        """The time the holds are judged at: the audio heard so far (see the module docstring)."""
        now = self.clock()
        return now if self.heard is None else min(now, self.heard())

    @property
    def holding(self) -> bool:
        return self._held is not None

    @property
    def held_text(self) -> str | None:
        """The words of a held turn (the next final is joined to them), None when none is held."""
        h = self._held
        return None if h is None else h.text

    def final(self, text: str, clock: TurnClock) -> None:
        """An ASR final: release a turn now, or hold it (semantic mode, mid-phrase)."""
        with self._lock:
            held, self._held = self._held, None
        if held is not None:
            if held.settle is not None:
                held.settle(False, held.verdict)  # the user went on: the reply to the first part is not heard
            text = f"{held.text} {text}"
            clock.speech_end = clock.speech_end if clock.speech_end is not None else held.clock.speech_end
            self.joined += 1
        if self.detector is None:
            self.put(PendingTurn(text, clock))
            return
        # the LLM may start while the detector scores (2 cores): the verdict confirms or cancels it
        settle = self.start_early(text, clock) if self.start_early is not None and held is None else None
        t0 = time.perf_counter()
        self.last_score = score = self.detector.score(text)
        hold_ms = self.detector.policy.hold_ms(score)
        verdict = {"score": round(score, 4), "hold_ms": round(hold_ms, 1),
                   "score_ms": round((time.perf_counter() - t0) * 1000, 1), "held": 0.0}
        origin = clock.speech_end if clock.speech_end is not None else (clock.asr_final or self.clock())
        due = origin + hold_ms / 1000
        if self._now() >= due:
            if settle is None or not settle(True, verdict):
                self.put(PendingTurn(text, clock, detector=verdict))
            return
        keep = settle is not None and score >= self.detector.policy.threshold  # complete: a short wait only
        if settle is not None and not keep:
            settle(False, verdict)
        self.held_turns += 1
        with self._lock:
            self._held = _Held(text, clock, due, dict(verdict, held=1.0), settle if keep else None)

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
        now = self._now()  # before the lock: `heard` takes the agent's
        with self._lock:
            h = self._held
            if h is not None and h.deadline is not None:
                h.deadline = max(h.deadline, now + SPEECH_CONFIRM_S)

    def speech_resumed(self) -> None:
        """The user speaks again: a held turn waits for the next final (an early reply kept for it is dropped)."""
        with self._lock:
            h = self._held
            settle = None
            if h is not None:
                h.deadline, settle, h.settle = None, h.settle, None
        if settle is not None:  # outside the lock: settle takes the agent's
            settle(False, h.verdict)

    def speech_ended(self) -> None:
        """The resumed speech ended: its final should follow; do not wait for it forever."""
        now = self._now()
        with self._lock:
            if self._held is not None and self._held.deadline is None:
                self._held.deadline = now + RESUME_GRACE_S

    def poll(self) -> float | None:
        """Release a held turn whose hold has passed; the seconds until the next deadline (None: none)."""
        now = self._now()
        with self._lock:
            h = self._held
            if h is None or h.deadline is None:
                return None
            if now < h.deadline:
                return h.deadline - now
            self._held = None
        # the stamp is wall time, like every TurnClock stamp (the deadline is in audio heard: not comparable)
        h.clock.endpoint = self.clock()
        if h.settle is not None and h.settle(True, h.verdict):  # the early reply goes on: it is the turn
            return None
        self.put(PendingTurn(h.text, h.clock, detector=h.verdict))
        return None
