"""Preemptive reply (issue 13, item 2): answer the speculative final while the hold runs.

The ASR streamer decodes an utterance's final transcript at silence onset,
during the endpoint hold, and says so (`SpeculativeFinal`), then whether the
hold confirmed it (`SpeculationEnd`, "confirmed" -> the final caption follows
with the same text word for word) or speech resumed ("dropped"). The agent
starts the reply -- LLM request and the TTS of its first clause -- on the
speculative text at once, and plays nothing until the endpoint is confirmed:
the hold, the LLM's first token and the first audio then overlap instead of
adding up. A dropped speculation cancels that reply (nothing was heard, no
history, no turn record) and is counted: `Agent.wasted_preemptive`, and in
the next turn record's `wasted_preemptive`.

With the semantic endpoint (whose short hold ends before a speculative decode
is ready) the reply starts on the final instead, while the turn detector
scores it (`_start_early`): a "complete" verdict lets it play, a mid-phrase
one cancels it (counted the same way). Never half-duplex (the mic is closed while a
reply runs, so the hold could not be confirmed), and only when no reply is
running or queued.
"""
from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any, Final

from voxcli.asr.endpointer import SAMPLE_RATE
from voxcli.chat.turn import PendingTurn
from voxcli.chat.turnlog import TurnClock

DECISION_TIMEOUT_S: Final = 5.0
"""A speculation with no outcome after this long counts as dropped (the streamer promises one)."""
FINAL_WAIT_S: Final = 0.3
"""After the confirmation, how long the first audio waits for the final caption (it follows at once), so
the user's words are shown before the reply's."""


@dataclass
class Speculation:
    """A reply started on a speculative final, waiting for the endpoint's verdict."""

    utterance: int
    attempt: int
    text: str
    clock: TurnClock
    decided: threading.Event = field(default_factory=threading.Event)
    confirmed: bool = False
    dropped: bool = False
    final_seen: threading.Event = field(default_factory=threading.Event)


def _same(a: str, b: str) -> bool:
    return " ".join(a.split()) == " ".join(b.split())


class PreemptMixin:
    """Speculation side of `voxcli.chat.agent.Agent` (it provides the state these methods use)."""

    def _on_asr_event(self, ev: Any) -> None:
        """`UtteranceEdge` / `SpeculativeFinal` / `SpeculationEnd`, on the ASR worker thread: quick hand-offs only."""
        if self._closed.is_set():
            return
        kind = type(ev).__name__
        if kind == "UtteranceEdge":
            self._on_edge(ev)  # voxcli.chat.listening: the utterance's stamps
        elif kind == "SpeculativeFinal":
            self._gate.prefetch(ev.text)  # semantic mode: the detector scores it during the hold
            self._maybe_preempt(ev)
        elif kind == "SpeculationEnd":
            self._speculation_ended(ev)

    def _maybe_preempt(self, ev: Any) -> None:
        cfg = self.config
        if not cfg.preemptive or cfg.half_duplex or self._gate.detector is not None or not ev.text.strip():
            return
        with self._lock:
            if self._turn_running or not self._turns.empty() or self._spec is not None or self._gate.holding:
                return
            utt = self._utts.get(ev.utterance)
            if utt is not None and utt.overlapped:
                return  # began while the assistant spoke: echo or backchannel unless it barges in
            end = self._wall_of(int(round(ev.speech_end * SAMPLE_RATE)))
            spec = Speculation(ev.utterance, ev.attempt, " ".join(ev.text.split()), TurnClock(speech_end=end))
            self._spec = spec
        self._turns.put(PendingTurn(spec.text, spec.clock, speculation=spec))

    def _start_early(self, text: str, clock: TurnClock) -> Any:
        """Semantic mode: start the reply on a final while the detector scores it (`TurnGate.start_early`)."""
        cfg = self.config
        if not cfg.preemptive or cfg.half_duplex:
            return None
        with self._lock:
            if self._turn_running or not self._turns.empty() or self._spec is not None:
                return None
            spec = Speculation(-1, 0, " ".join(text.split()), clock)
            self._spec = spec
        self._turns.put(PendingTurn(spec.text, clock, speculation=spec))

        def settle(released: bool) -> bool:
            with self._lock:
                if self._spec is spec:
                    self._spec = None
                spec.confirmed = ok = released and not spec.dropped
            if ok:
                spec.final_seen.set()
            else:
                self._drop_speculation(spec)  # mid-phrase: the turn is held, this early reply is not heard
            spec.decided.set()
            return ok

        return settle

    def _speculation_ended(self, ev: Any) -> None:
        with self._lock:
            spec = self._spec
            if spec is None or (spec.utterance, spec.attempt) != (ev.utterance, ev.attempt):
                return
            spec.confirmed = ev.outcome == "confirmed" and _same(ev.text, spec.text)
            if spec.confirmed:
                spec.clock.endpoint = self.clock()
        if not spec.confirmed:
            self._drop_speculation(spec)
        spec.decided.set()

    def _drop_speculation(self, spec: Speculation) -> None:
        """Cancel the reply started on `spec` (nothing of it has played) and count it."""
        with self._lock:
            if spec.dropped:
                return
            spec.dropped = True
            if self._spec is spec:
                self._spec = None
            self.wasted_preemptive += 1
            reply = self._reply
            mine = reply is not None and reply.speculation is spec
            if mine:
                reply.barged = reply.dropped = True  # silenced: nothing more is sent, played or recorded
        if mine:
            self.llm.cancel()
            reply.tts.cancel()
            if reply.announced:  # confirmed, then the final said other words: stop what plays
                self.speaker.stop()

    def _final_of_speculation(self, text: str, now: float) -> bool:
        """The final caption of a confirmed speculation: its reply is under way already (True)."""
        with self._lock:
            spec = self._spec
            if spec is None:
                return False
            self._spec = None
        if spec.confirmed and _same(text, spec.text):
            spec.clock.asr_final = now
            spec.final_seen.set()
            return True
        self._drop_speculation(spec)  # no verdict, or another text: that reply answers the wrong words
        spec.decided.set()
        return False

    def _await_verdict(self, reply: Any) -> bool:
        """Before the first audio of a preemptive reply: wait for the endpoint; False if dropped."""
        spec = reply.speculation
        if spec is None:
            return True
        waited = 0.0
        while not spec.decided.wait(0.01):
            waited += 0.01
            if self._closed.is_set() or waited >= DECISION_TIMEOUT_S:
                self._drop_speculation(spec)
                spec.decided.set()
                return False
        if spec.confirmed:
            spec.final_seen.wait(FINAL_WAIT_S)
        return spec.confirmed and not spec.dropped
