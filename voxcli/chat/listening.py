"""The agent's ears: mic audio in, utterance stamps and barge-in out.

Kept apart from the turn loop (`voxcli.chat.agent`): this is the part that
runs for every 32 ms frame. `feed()` hands the mic audio to the ASR streamer;
the speech probabilities of that audio reach `_on_probs` either from the
streamer's own VAD pass (`voxcli.chat.shared_vad.SharedVAD`: one Silero run
per frame for the whole conversation, delivered on the streamer's worker
thread) or, with a plain scorer, from a pass made here in `feed`. They drive
the speech run (hysteresis) that barge-in needs. The echo canceller's
double-talk onsets (`voxcli.audio.doubletalk`) arrive at `near_speech` on the
capture thread and pause the reply before that run completes; with the detector
wired (`hear_double_talk`), a barge-in also needs one of its onsets, recent: the
speech run and an echo word the ASR misheard are not enough. A pause on an onset
also gives the ASR back the user's first word, which AEC3 lost under the reply:
the raw microphone with the reply's echo subtracted by a linear fit made at that
moment (`voxcli.audio.echo_path`), or masked by the detector's echo bound where no
fit can be trusted (`voxcli.audio.echo_mask`), patched into the streamer's buffer
(`voxcli.chat.first_word`).

When an utterance starts and ends is the streamer's decision, not a second
endpointer's: its `UtteranceEdge` events (`subscribe`) stamp each `Utterance`
(speech start; last speech sample; endpoint) in wall time through the
`FeedClock`, keyed by the utterance number its captions carry, and tell the
turn gate when speech resumes or ends. So the endpoint the user experiences
is the streamer's, including its `hold_from="speech"` (the hold counted from
the last speech sample, not from Silero's later silence frame), and a final
caption finds its stamps by number, never by timing. A streamer that
finalizes during the hold (`SpeculativeFinal`) has its text scored by the
semantic detector at once, so the final finds the score ready.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from voxcli.asr.endpointer import FRAME, SAMPLE_RATE
from voxcli.audio.echo_mask import POST_S, TRAIL_S
from voxcli.chat.first_word import FirstWordMixin
from voxcli.chat.heard import heard_text, non_echo_words
from voxcli.chat.turn import Utterance
from voxcli.events import BargeIn

LATE_ECHO_MAX_S = 0.4
"""The span after the pause reaches at most this much further for an echo later than the stamps (the
echo delay measurement's own reach, `echo_delay.MAX_DELAY_S`)."""
UTTERANCES_KEPT = 8
"""Utterances awaiting their transcript that the agent remembers (older ones were empty to the ASR)."""
PAUSE_MIN_S = 0.8
"""Longest a pause waits, once its run has ended, for a decode (the ASR's first decode of a short word comes late)."""
PAUSE_MAX_S = 2.0
"""Longest the reply stays paused on speech without a word that is not its echo (then it plays on)."""
PAUSE_EXPIRES_S = PAUSE_MAX_S + 0.5
"""The speaker ends the pause by itself after this long: when no VAD batch or caption comes to end it."""
ONSET_WAIT_S = 0.6
"""Audio after a pause on the echo canceller's double-talk onset (`near_speech`) in which the VAD must
see speech, else it plays on: the paused reply leaves AEC3 nothing to suppress, so a user shows in
~0.1-0.3 s. Counted in audio the VAD scored, not wall time: its scores come in batches, after the ASR's
decode in progress, 0.5-1 s late on a loaded box."""
NEAR_RECENT_S = 3.0
"""With the double-talk detector wired, a barge-in needs one of its onsets within this much fed audio: a
user who talks over the reply, or over the paused reply, gives one at each word after a gap (~0.1-0.3 s
after it); the reply's echo gave none in 20 replies heard back at full level, while its residue made 3
speech runs that a misheard echo word ("sure", "way", "i will") turned into barge-ins
(benchmarks/bench_barge_in.py --self-turns 20). Counted in fed samples: the words come late, the onsets not."""
ONSET_GAP_FRAMES = 8
"""Silent VAD frames (256 ms) that end the speech an onset pause waits on: a pause that early comes
before the first word is decoded, and a gap between words must not play the reply on."""


class ListeningMixin(FirstWordMixin):
    """Mic side of `voxcli.chat.agent.Agent` (it provides the state these methods use)."""

    vad: Any
    asr: Any
    _paused_at: float | None = None
    """When the reply was paused on a speech run that no word has confirmed yet (None: not paused)."""
    _paused_reply: Any = None
    """The reply that had its one unconfirmed pause already (a second run does not pause it)."""
    _run_over = False
    """The paused run has ended (the VAD saw silence since the pause)."""
    _silent_frames = 0
    """Consecutive VAD frames below the low threshold."""
    _by_onset = False
    """The pause came from the double-talk onset (before the VAD run)."""
    _run_seen = False
    """The VAD saw a speech frame since the pause (a pause on the run: from the start; on an onset: not
    yet). Set per frame in `_on_probs`: a batch that ends on silence still had the user's speech."""
    _fed = 0
    """Samples fed (the agent's count)."""
    _scored = 0
    """Samples whose VAD scores reached `_on_probs` (the shared VAD scores the fed samples, in order)."""
    _pause_sample = 0
    """The fed sample at which the pause began: speech scored before it is no reason to hold it."""
    _double_talk = False
    """The echo canceller's double-talk detector reports here (`hear_double_talk`): a barge-in needs its onset."""
    _near_sample: int | None = None
    """The fed sample at the detector's last onset (None: none yet)."""
    _masking: Any = None
    """The canceller whose `mask` rebuilds the first word after a pause on an onset (None: not done)."""

    def hear_double_talk(self, canceller: Any) -> None:
        """Wire a `voxcli.audio.aec.EchoCanceller`'s double-talk onsets to `near_speech` (chat with AEC).

        From then on the reply is stopped only with an onset within `NEAR_RECENT_S`: what the run
        on the cancelled signal hears without one is the reply's residue (a pause it resumes from).
        A canceller without a detector (`AECConfig(double_talk=False)`) changes nothing.
        """
        canceller.on_near_speech = self.near_speech
        self._double_talk = getattr(canceller, "detector", None) is not None
        has_patch = getattr(getattr(self, "asr", None), "patch", None) is not None
        self._masking = canceller if getattr(canceller, "mask", None) is not None and has_patch else None

    def _listen_to_shared_vad(self) -> bool:
        """Subscribe to the streamer's VAD pass when the scorer is shared; True if so."""
        listen = getattr(self.vad, "listen", None)
        if listen is None:
            return False
        listen(self._on_probs_guarded)
        return True

    def _listen_to_streamer(self) -> None:
        """The streamer's utterance edges (`_on_edge`) and speculative finals (`voxcli.chat.preempt`)."""
        subscribe = getattr(self.asr, "subscribe", None)
        if subscribe is None:
            raise TypeError("the chat agent needs an ASR streamer with subscribe() (voxcli.asr.streamer.ASRStreamer)")
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
        if self._fitting is not None:
            self._post_first_word()
        if self._mask_at is not None and self._fed >= self._mask_at[0] + self._mask_at[2] + int(TRAIL_S * SAMPLE_RATE):
            self._patch_first_word()
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
        """Speech run and barge-in for a batch of frame probabilities."""
        hi, lo = self._vad_config.threshold, self._vad_config.low
        with self._lock:
            at = self._scored + self._skipped()  # the sample of this batch's first frame
            self._scored += len(probs) * FRAME
        last_speech = -1
        for i, p in enumerate(probs):
            p = float(p)
            # speech run with hysteresis: grows on speech, survives the grey zone, resets on silence
            self._run_frames = self._run_frames + 1 if p >= hi else (0 if p < lo else self._run_frames)
            last_speech = at + i * FRAME if p >= hi else last_speech  # per frame: a batch may end on silence
            self._silent_frames = self._silent_frames + 1 if p < lo else 0
            if p >= hi and self._gate.holding:
                self._gate.speech_frame()  # the user may be going on after a mid-phrase pause
        with self._lock:  # against `_pause` on the capture thread: only speech after *this* pause counts
            if self._paused_at is not None and last_speech >= self._pause_sample:
                self._run_seen = True
        self._maybe_barge_in()

    def _skipped(self) -> int:
        """Fed samples the shared VAD never scores: the ASR's inbox dropped them (drop-behind)."""
        if not getattr(self, "_shared_vad", False):
            return 0
        return int(round(getattr(getattr(self.asr, "stats", None), "dropped_s", 0.0) * SAMPLE_RATE))

    def _on_edge(self, ev: Any) -> None:
        """The streamer's `UtteranceEdge` (on its worker thread): stamp the utterance, tell the gate."""
        now = self.clock()
        with self._lock:
            if ev.kind == "start":
                self._in_speech = True
                self._utts[ev.utterance] = Utterance(self._wall_of(_samples(ev.sample)), overlapped=self._turn_running)
                for k in sorted(self._utts)[:-UTTERANCES_KEPT]:
                    del self._utts[k]
                self._gate.speech_resumed()
                return
            self._in_speech = False
            u = self._utts.get(ev.utterance)
            if u is not None:  # speech end: the last speech sample (the streamer refines it from the audio)
                end = ev.speech_end if ev.speech_end is not None else ev.sample
                u.speech_end, u.endpoint = self._wall_of(_samples(end)), now
            self._gate.speech_ended()

    def _take_utterance(self, n: int) -> Utterance | None:
        """The stamps of utterance `n`, whose final caption arrived (older ones had no words); under the lock."""
        utt = self._utts.pop(n, None)
        for k in [k for k in self._utts if k < n]:
            del self._utts[k]
        if utt is not None and utt.endpoint is None:
            self._in_speech = False  # finalized at the end of the input: no end edge comes
        return utt

    def busy(self) -> bool:
        """User speaking, an utterance awaiting its transcript, a turn held or running."""
        with self._lock:
            ends = [u.endpoint for u in self._utts.values() if u.endpoint is not None]
            pending_ep = bool(ends) and self.clock() - max(ends) < 10.0
            return (self._in_speech or pending_ep or self._turn_running or not self._turns.empty()
                    or self._gate.holding)

    def _maybe_barge_in(self, decoded: bool = False) -> None:
        """Speech over the reply: pause it at once on the VAD run, barge in on the first word that is
        not its echo, play on when none came (`_hold_or_resume`). `decoded`: called for a caption.

        Why pause first: the words come with the ASR's first decode, 0.5 s or more after the
        run, and a user who talks over the reply must not hear it go on meanwhile; a run that was
        the reply's own echo (or a cough) ends when the reply pauses, and the reply resumes. What
        barges in is unchanged (a run of `barge_in_ms` and a fresh word at the same time): the
        pause only silences the reply while that is being decided. Only where the run cannot be
        the reply's own echo (`speaker.can_pause()`), and once per reply.
        """
        cfg = self.config
        if cfg.half_duplex:
            return
        # The pause takes the barge-in's own run: a 128 ms run paused 3-13 times per reply on the
        # echo's residue (null sink, benchmarks/bench_barge_in.py --self-turns), against ~1 in 20.
        run = self._run_frames * FRAME * 1000 >= cfg.barge_in_ms * SAMPLE_RATE
        with self._lock:
            if not run and self._paused_at is None:
                return
            reply = self._reply
            if reply is None or reply.barged or not self._turn_running:
                self._resume()
                return
            fresh = non_echo_words(self._utt_words, self._recent) if run else []  # the run AND a word, as ever
            if not fresh or not self._near_recent():
                self._hold_or_resume(run, reply, decoded)
                return
            self._paused_at = None  # stop() below drops the paused audio too
            reply.barged = True
            if self._utts:
                self._utts[max(self._utts)].barged = True
            self.llm.cancel()
            reply.tts.cancel()
            played = self.speaker.stop()
            reply.heard_at_barge = heard_text(reply.spans, played, self.speaker.sample_rate, written=reply.received)
        self.on_event(BargeIn(reply.turn, reply.heard_at_barge, " ".join(fresh)))

    def _near_recent(self) -> bool:
        """No detector wired, or its last onset is within `NEAR_RECENT_S` of fed audio (under the lock)."""
        if not self._double_talk:
            return True
        return self._near_sample is not None and self._fed - self._near_sample <= NEAR_RECENT_S * SAMPLE_RATE

    def near_speech(self) -> None:
        """The echo canceller heard the user start over the reply (`voxcli.audio.doubletalk`): pause it.

        Why: during double talk AEC3 hides the user for 0.1-1 s, so the VAD run that pauses the
        reply otherwise completes 0.4-2 s after the user's first word; the detector sees the onset
        on the raw microphone, 0.1-0.3 s after it (benchmarks/bench_barge_in.py). What stops the
        reply is unchanged (a run and a fresh word, on the cancelled signal); the once-per-reply
        rule is shared with the run's pause; a pause no speech follows within `ONSET_WAIT_S` plays
        on. Called on the capture thread.
        """
        if self.config.half_duplex or self._closed.is_set():
            return
        try:
            with self._lock:
                self._near_sample = self._fed  # also while paused: the stop needs a recent one
                reply = self._reply
                if reply is not None and not reply.barged and self._turn_running and self._paused_at is None:
                    self._pause(reply, run_seen=self._run_frames > 0, by_onset=True)
                    c = self._masking
                    if self._paused_at is not None and c is not None:  # the span ends with this frame
                        post = (POST_S + min(0.2, float(getattr(self.speaker, "output_latency_s", 0.0) or 0.0))
                                + min(LATE_ECHO_MAX_S, max(0.0, float(getattr(c, "late_echo_s", 0.0)))))
                        self._mask_at = (self._fed + c.mask.count * c.mask.frame - c.returned, self._dropped(),
                                         int(round(post * SAMPLE_RATE)))
                        expect = getattr(self.asr, "expect_patch", None)
                        if expect is not None:  # no word of what the span replaces may turn stable meanwhile
                            expect()
        except Exception as e:  # noqa: BLE001 - never into the capture loop: handed to the caller
            if self.error is None:
                self.error = e

    def _pause(self, reply: Any, run_seen: bool, by_onset: bool = False) -> None:
        """Pause the reply (under the lock) where its echo cannot be what was heard, once per reply."""
        pause, can = getattr(self.speaker, "pause", None), getattr(self.speaker, "can_pause", None)
        if self._paused_reply is not reply and pause is not None and can is not None and can():
            pause(PAUSE_EXPIRES_S)  # first: if it raises, the reply is not paused and nothing says it is
            self._paused_at, self._paused_reply, self._run_over, self._run_seen = self.clock(), reply, False, run_seen
            self._by_onset, self._pause_sample = by_onset, self._fed

    def _hold_or_resume(self, run: bool, reply: Any, decoded: bool) -> None:
        """No fresh word (under the lock): pause on a run, resume a pause nothing confirmed.

        A pause ends as soon as a decode that comes after its run ended brings no fresh word
        (the ASR's worker runs the VAD pass, so that decode covers the run), else `PAUSE_MIN_S`
        after the pause at most once the run is over, or `PAUSE_MAX_S` while it lasts; a pause on
        an onset (`near_speech`) ends once the VAD scored `ONSET_WAIT_S` of audio after it with no
        speech in it.
        """
        if self._paused_at is None:
            if run:
                self._pause(reply, run_seen=True)
            return
        ended = self._run_frames == 0 and (not self._by_onset or self._silent_frames >= ONSET_GAP_FRAMES)
        self._run_over = self._run_over or (self._run_seen and ended)
        held = self.clock() - self._paused_at
        heard = self._scored + self._skipped() - self._pause_sample  # audio scored since the pause
        if ((self._run_over and (decoded or held >= PAUSE_MIN_S)) or held > PAUSE_MAX_S
                or (not self._run_seen and heard >= ONSET_WAIT_S * SAMPLE_RATE)):
            self._resume()

    def _resume(self) -> None:
        if self._paused_at is not None:
            self._paused_at = None
            getattr(self.speaker, "resume", lambda: None)()

    def _end_pause(self) -> None:
        """Play on now (end of input, close): no VAD batch or caption may come to end the pause."""
        with self._lock:
            self._resume()

    def _wall_of(self, sample: int) -> float:
        """Wall time at which the streamer's sample `sample` was captured (its samples are the fed ones)."""
        with self._lock:
            return self._feed_clock.wall_of(sample, SAMPLE_RATE)


def _samples(seconds: float) -> int:
    return int(round(seconds * SAMPLE_RATE))
