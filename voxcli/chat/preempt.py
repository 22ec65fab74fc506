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

Warm-up while the user speaks (on-device LLM only): the utterance's start and
each partial caption start a prefill of the conversation plus the words heard so far (`_warm_up`)
into the LLM's shared KV cache; each one reuses the previous one's prefix, so
it runs only the new words. The reply's request then prefills only what the
final transcript changed (the system prompt of a first turn, the history and
most of the user's words are done). Nothing is generated or shown; the reply
waits for a warm-up still running (it is the same work) before it starts.
Only on idle cores: none while the streamer lags the mic (`WARM_MAX_LAG_S`),
none once the utterance has ended (a caption queued before the end edge comes
after it), and one still running when the utterance ends is cancelled
(`_yield_warm_up`). A warm-up is cancelled through its own generation, never
`llm.cancel()`, which would stop every generation of the engine (a reply's).
Not at silence onset: there it would take a core from the final decode, the
turn's critical path (measured: the ASR final came ~200 ms later under load).
"""
from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any, Final

from voxcli.asr.endpointer import FRAME, SAMPLE_RATE
from voxcli.chat.turn import PendingTurn
from voxcli.chat.turnlog import TurnClock

DECISION_TIMEOUT_S: Final = 5.0
"""A speculation with no outcome after this long counts as dropped (the streamer promises one)."""
WARM_MAX_LAG_S: Final = 0.15
"""No warm-up while the ASR streamer lags the mic by more than this (`pending_s`): the cores are not idle,
and the streamer's endpoint is the turn's critical path (measured at load ~14 on 2 cores: warm-ups on every
caption made the vad turn's endpoint ~140 ms later at p50)."""
WARM_WAIT_S: Final = 1.0
"""How long a reply's LLM request waits for the warm-up's prefill (its own prefix) before cancelling it."""
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


def _cancel_generation(gen: Any) -> None:
    """Stop one on-device generation (a warm-up's) at its next token; `LocalLLM.cancel()` would stop
    them all, a reply's too."""
    cancel = getattr(gen, "cancel", None)
    if cancel is not None:
        cancel()


class PreemptMixin:
    """Speculation side of `voxcli.chat.agent.Agent` (it provides the state these methods use)."""

    def _init_preempt(self) -> None:
        """The warm-up's state, and the clock of the audio heard (`TurnGate.heard`)."""
        self._heard_frames = 0
        self._input_over = False
        self._warm: threading.Thread | None = None
        self._warm_gen: Any = None
        """The running warm-up's own `Generation` (cancelled alone: `_cancel_generation`)."""
        self._warm_ok = bool(self.config.preemptive and not self.config.half_duplex and hasattr(
            getattr(self.llm, "engine", None), "start"))  # an on-device LLM (`LocalLLM.start`)
        self.warm_ups = 0
        """Warm-up prefills started (at most one at a time, none while a reply runs or waits)."""
        self.warm_ups_cancelled = 0
        """Warm-ups still running when their utterance ended (cancelled: `_yield_warm_up`)."""

        listen = getattr(self.vad, "listen", None)
        if listen is not None and self._shared_vad:
            listen(self._count_heard)

    def _count_heard(self, probs: Any) -> None:
        """The streamer's VAD scored these frames (its worker thread): that much audio is heard."""
        with self._lock:
            self._heard_frames += len(probs)

    def _heard_until(self) -> float:
        """Capture time of the last audio frame the streamer's VAD scored (now if it scores in `feed`, or the
        input is over). Dropped live audio makes it earlier than true: holds then wait longer, never less."""
        now = self.clock()
        if not getattr(self, "_shared_vad", False) or getattr(self, "_input_over", True):
            return now
        with self._lock:
            heard = self._heard_frames * FRAME
            return min(now, self._wall_of(heard)) if heard else now

    def _warm_up_on(self, words: str) -> None:
        """A partial caption: prefill the conversation and `words` into the LLM (the module docstring)."""
        if not self._warm_ok or self._closed.is_set() or getattr(self.asr, "pending_s", 0.0) > WARM_MAX_LAG_S:
            return
        words = " ".join(words.split())
        with self._lock:
            if (not self._in_speech or self._turn_running or not self._turns.empty() or self._spec is not None
                    or (self._warm is not None and self._warm.is_alive())):
                return  # the utterance ended (the final decode runs), a reply owns the LLM, or one still runs
            held = self._gate.held_text
            try:
                gen = self.llm.engine.start(self._messages(f"{held} {words}".strip() if held else words))
            except Exception:  # noqa: BLE001 - a warm-up only saves time: the reply reports what is wrong
                return
            self._warm_gen = gen
            self._warm = threading.Thread(target=self._warm_up, args=(gen,), name="voxcli-agent-warm", daemon=True)
            self._warm.start()  # under the lock: `is_alive()` is True from the moment `_warm` is set
            self.warm_ups += 1

    def _messages(self, text: str) -> list[dict[str, str]]:
        """What the LLM is sent for the user's `text` (the reply and its warm-up): system prompt, history, new turn."""
        system = [{"role": "system", "content": self.config.system}] if self.config.system else []
        return system + list(self.history.messages) + [{"role": "user", "content": text}]

    @staticmethod
    def _warm_up(gen: Any) -> None:
        try:
            for _ in gen:  # the prompt's prefill, then one token (not fed, not shown)
                break
        except Exception:  # noqa: BLE001 - a warm-up only saves time: the reply prefills what it lacks
            pass

    def _yield_warm_up(self) -> None:
        """The utterance ended: a warm-up still running is cancelled so the final decode has the cores (what
        earlier warm-ups prefilled stays cached). Not when a reply runs or waits: that reply waits for this
        prefill, its own prefix (`_finish_warm`)."""
        with self._lock:
            warm, gen = self._warm, self._warm_gen
            if warm is None or not warm.is_alive():
                return
            if self._turn_running or not self._turns.empty() or self._spec is not None:
                return  # the reply waits for it (`_finish_warm`): its prefill is the reply's prefix
            _cancel_generation(gen)
            self.warm_ups_cancelled += 1

    def _finish_warm(self, timeout: float | None = None) -> None:
        """Before a reply's request (and at close): let the warm-up's prefill end; cancel it past `timeout`
        (default `WARM_WAIT_S`)."""
        with self._lock:
            warm, gen = getattr(self, "_warm", None), getattr(self, "_warm_gen", None)
        if warm is None or not warm.is_alive():
            return
        timeout = WARM_WAIT_S if timeout is None else timeout
        warm.join(timeout)
        if warm.is_alive():
            _cancel_generation(gen)  # the warm-up's own: a reply's generation may run beside it
            warm.join(timeout)

    def _on_asr_event(self, ev: Any) -> None:
        """`UtteranceEdge` / `SpeculativeFinal` / `SpeculationEnd`, on the ASR worker thread: quick hand-offs only."""
        if self._closed.is_set():
            return
        kind = type(ev).__name__
        if kind == "UtteranceEdge":
            self._on_edge(ev)  # voxcli.chat.listening: the utterance's stamps
            if ev.kind == "start":
                self._warm_up_on(self._utt_words)  # the conversation so far, before any words are heard
            else:
                self._yield_warm_up()  # the final decode starts now: the turn's critical path
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
        pending = PendingTurn(spec.text, clock, speculation=spec)
        self._turns.put(pending)

        def settle(released: bool, verdict: dict[str, float] | None = None) -> bool:
            with self._lock:
                if self._spec is spec:
                    self._spec = None
                pending.detector.update(verdict or {})
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
            self._cancel_reply_llm(reply)
            reply.tts.cancel()
            if reply.announced:  # confirmed, then the final said other words: stop what plays
                self.speaker.stop()

    def _reply_stream(self, reply: Any, messages: list[dict[str, str]]) -> Any:
        """The LLM's stream for `reply`; its own generation is kept (`Reply.generation`, on-device) so that a
        dropped speculation cancels that generation alone."""
        stream = self.llm.stream(messages)
        reply.generation = getattr(stream, "generation", None)
        return stream

    def _cancel_reply_llm(self, reply: Any) -> None:
        """Stop the LLM work of `reply` only: its own generation (on-device: `llm.cancel()` would stop every
        generation of the engine, a warm-up's too); a server client streams one reply at a time, so its
        `cancel()` is this reply's. A reply whose on-device stream has not started yet needs nothing: its
        first delta sees the drop (`Agent._speak_llm`)."""
        gen = reply.generation
        if gen is not None:
            _cancel_generation(gen)
        elif not hasattr(getattr(self.llm, "engine", None), "start"):
            self.llm.cancel()

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

    def _hold_audio(self, reply: Any) -> bool:
        """The first audio of a preemptive reply exists: stamp it (the turn log's `audio_ready_ms`, the TTS term
        without the wait), then wait for the endpoint's verdict; False if dropped."""
        if reply.clock.audio_ready is None and not reply.speculation.dropped:
            reply.clock.audio_ready = self.clock()
        return self._verdict(reply)

    def _await_verdict(self, reply: Any) -> bool:
        """The reply's LLM stream has ended: wait for the endpoint; False if dropped. A dropped reply's stamps
        are cleared: a semantic turn held mid-phrase keeps this clock, and its next reply stamps its own."""
        ok = self._verdict(reply)
        if not ok:
            c = reply.clock
            c.llm_request = c.llm_first_token = c.audio_ready = None
        return ok

    def _verdict(self, reply: Any) -> bool:
        """Before the first audio of a preemptive reply: wait for the endpoint; False if dropped."""
        spec = reply.speculation
        if spec is None:
            return True
        waited = 0.0
        while not spec.decided.wait(0.01):
            self._gate.poll()  # semantic: the short hold of a complete thought may have passed (TurnGate)
            waited += 0.01
            if self._closed.is_set() or waited >= DECISION_TIMEOUT_S:
                self._drop_speculation(spec)
                spec.decided.set()
                return False
        if spec.confirmed:
            spec.final_seen.wait(FINAL_WAIT_S)
        return spec.confirmed and not spec.dropped
