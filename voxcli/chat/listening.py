"""The agent's ears: mic audio in, speech runs and utterance stamps out, barge-in decided.

Kept apart from the turn loop (`voxcli.chat.agent`): this is the part that
runs for every 32 ms frame. `feed()` hands the mic audio to the ASR streamer;
the speech probabilities of that audio reach `_on_probs` either from the
streamer's own VAD pass (`voxcli.chat.shared_vad.SharedVAD`: one Silero run
per frame for the whole conversation, delivered on the streamer's worker
thread) or, with a plain scorer, from a pass made here in `feed`.

`_on_probs` keeps the speech run (hysteresis) that barge-in needs and the
agent's own endpointer events, which stamp each `Utterance` (speech start,
speech end, endpoint) in wall time through the `FeedClock`, and tells the
turn gate when speech resumes or ends. A streamer that finalizes during the
hold (`subscribe`: `SpeculativeFinal`) has its text scored by the semantic
detector at once, so the final finds the score ready. (Scoring the caption at
silence onset was tried: the partial text then rarely equals the final.)
"""
from __future__ import annotations

from typing import Any

import numpy as np

from voxcli.asr.endpointer import FRAME, SAMPLE_RATE
from voxcli.chat.heard import heard_text, non_echo_words
from voxcli.chat.turn import Utterance
from voxcli.events import BargeIn

UTTERANCES_KEPT = 8
"""Utterances awaiting their transcript that the agent remembers (older ones were empty to the ASR)."""


class ListeningMixin:
    """Mic side of `voxcli.chat.agent.Agent` (it provides the state these methods use)."""

    vad: Any
    asr: Any

    def _listen_to_shared_vad(self) -> bool:
        """Subscribe to the streamer's VAD pass when the scorer is shared; True if so."""
        listen = getattr(self.vad, "listen", None)
        if listen is None:
            return False
        listen(self._on_probs_guarded)
        return True

    def _listen_to_speculation(self) -> None:
        """With a streamer that finalizes during the hold: `voxcli.chat.preempt` handles its events."""
        subscribe = getattr(self.asr, "subscribe", None)
        if subscribe is not None:
            subscribe(self._on_asr_event)

    def feed(self, samples: np.ndarray) -> None:
        """Mic audio (float32 16 kHz mono), as it is captured."""
        if self._closed.is_set():
            return
        if self.config.half_duplex and self.speaking:
            return  # mic closed while the assistant speaks
        a = np.asarray(samples, dtype=np.float32).reshape(-1)
        now = self.clock()
        with self._lock:  # the shared VAD maps samples to wall time from the streamer's thread
            self._fed += a.size
            self._feed_clock.record(self._fed, now)
        self.asr.send(a, block=False)  # live mic: drop-behind (counted in asr.stats.dropped_s), never stall capture
        if not self._shared_vad:
            self._on_probs(self.vad.probs(a))

    def _on_probs_guarded(self, probs: np.ndarray) -> None:
        if self._closed.is_set():
            return
        try:
            self._on_probs(probs)
        except BaseException as e:  # noqa: BLE001 - never into the streamer's worker: handed to the caller
            if self.error is None:
                self.error = e

    def _on_probs(self, probs: np.ndarray) -> None:
        """Speech run, endpointer events and barge-in for a batch of frame probabilities."""
        now = self.clock()
        hi, lo = self._vad_config.threshold, self._vad_config.low
        for p in probs:
            p = float(p)
            # speech run with hysteresis: grows on speech, survives the grey zone, resets on silence
            self._run_frames = self._run_frames + 1 if p >= hi else (0 if p < lo else self._run_frames)
            if p >= hi and self._gate.holding:
                self._gate.speech_frame()  # the user may be going on after a mid-phrase pause
            ev = self._ep.feed(p)
            if ev is None:
                continue
            with self._lock:
                if ev.kind == "start":
                    self._utts.append(Utterance(self._wall_of(ev.sample), overlapped=self._turn_running))
                    del self._utts[:-UTTERANCES_KEPT]
                    self._gate.speech_resumed()
                else:
                    if self._utts:  # the last speech sample when the endpointer knows it, else the hold's start
                        end = ev.sample if getattr(ev, "speech_end", None) is None else ev.speech_end
                        self._utts[-1].speech_end, self._utts[-1].endpoint = self._wall_of(end), now
                    self._gate.speech_ended()
        self._maybe_barge_in()

    def busy(self) -> bool:
        """User speaking, an utterance awaiting its transcript, a turn held or running."""
        with self._lock:
            ends = [u.endpoint for u in self._utts if u.endpoint is not None]
            pending_ep = bool(ends) and self.clock() - ends[-1] < 10.0
            return (self._ep.in_speech or pending_ep or self._turn_running or not self._turns.empty()
                    or self._gate.holding)

    def _maybe_barge_in(self) -> None:
        cfg = self.config
        if cfg.half_duplex or self._run_frames * FRAME * 1000 < cfg.barge_in_ms * SAMPLE_RATE:
            return
        with self._lock:
            reply = self._reply
            if reply is None or reply.barged or not self._turn_running:
                return
            fresh = non_echo_words(self._utt_words, self._recent)
            if not fresh:
                return
            reply.barged = True
            if self._utts:
                self._utts[-1].barged = True
            self.llm.cancel()
            reply.tts.cancel()
            played = self.speaker.stop()
            reply.heard_at_barge = heard_text(reply.spans, played, self.speaker.sample_rate)
        self.on_event(BargeIn(reply.turn, reply.heard_at_barge, " ".join(fresh)))

    def _wall_of(self, sample: int) -> float:
        with self._lock:
            return self._feed_clock.wall_of(sample, SAMPLE_RATE)
