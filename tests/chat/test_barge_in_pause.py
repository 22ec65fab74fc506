"""Barge-in in two steps: the reply pauses on the user's speech run, and the first word that is not its
echo stops it; a run nothing confirms (the reply's own echo, a cough) resumes it, once per reply,
and only on a speaker whose echo cannot be a speech run (`can_pause()`).

The decision (`voxcli.chat.listening.ListeningMixin._maybe_barge_in`) is driven here frame by
frame with a scripted clock, VAD run and caption, so every step is deterministic; the speaker
is the real `VirtualSpeaker` play head with the pause/resume a device speaker has.
"""
from __future__ import annotations

import threading
from types import SimpleNamespace
from typing import Iterator

import numpy as np

from voxcli.asr.endpointer import FRAME, SAMPLE_RATE, VADConfig
from voxcli.audio.virtual import VirtualSpeaker
from voxcli.chat.agent import Agent, AgentConfig
from voxcli.chat.listening import (NEAR_RECENT_S, ONSET_GAP_FRAMES, ONSET_WAIT_S, PAUSE_EXPIRES_S, PAUSE_MAX_S,
                                   PAUSE_MIN_S, ListeningMixin)
from voxcli.chat.turn import Reply
from voxcli.chat.turnlog import TurnClock
from voxcli.events import AudioChunk, BargeIn, Spoken

RUN = 10  # 32 ms frames: 320 ms, past the 300 ms barge-in run


class PausingSpeaker(VirtualSpeaker):
    """The virtual play head plus the pause/resume of `voxcli.audio.virtual.DeviceSpeaker`, recorded."""

    def __init__(self, can: bool = True) -> None:
        super().__init__(16000)
        self.calls: list[str] = []
        self.max_s: list[float | None] = []
        self.can = can

    def can_pause(self) -> bool:
        return self.can  # an echo canceller past its warm-up, or an output the mic does not hear

    def pause(self, max_s: float | None = None) -> None:
        self.calls.append("pause")
        self.max_s.append(max_s)

    def resume(self) -> None:
        self.calls.append("resume")

    def stop(self) -> int:
        self.calls.append("stop")
        return super().stop()


class Ears(ListeningMixin):
    """The state the mixin reads from the agent, with a clock the test moves."""

    def __init__(self, speaker: VirtualSpeaker, half_duplex: bool = False) -> None:
        self.config = AgentConfig(half_duplex=half_duplex, log_turns=False)
        self._vad_config = VADConfig()
        self.now = 10.0
        self.clock = lambda: self.now
        self.speaker = speaker
        self.events: list[object] = []
        self.on_event = self.events.append
        self._lock = threading.RLock()
        self._utts: dict = {}
        self._run_frames = 0
        self._utt_words = ""
        self._recent = "the weather tomorrow looks bright with a gentle breeze".split()
        self.llm = SimpleNamespace(cancel=lambda: None)
        self._reply = Reply(turn=0, tts=SimpleNamespace(cancel=lambda: None), clock=TurnClock())
        self._turn_running = True
        self._gate = SimpleNamespace(holding=False, speech_frame=lambda: None)
        self._closed = threading.Event()

    def frames(self, probs: list[float], dt: float = 0.032) -> None:
        """Frames fed and scored at once (the VAD keeps up)."""
        for p in probs:
            self.now += dt
            self._fed += FRAME
            self._on_probs(np.array([p]))

    def hear(self, seconds: float) -> None:
        """Audio fed that the VAD has not scored yet (the ASR worker is busy decoding)."""
        self.now += seconds
        self._fed += int(seconds * SAMPLE_RATE)

    def batch(self, probs: list[float]) -> None:
        """The scores of the oldest audio fed and not yet scored, arriving at once (no time passes)."""
        self._on_probs(np.array(probs))

    def caption(self, text: str) -> None:
        self._utt_words = text
        self._maybe_barge_in(decoded=True)

    def next_reply(self) -> None:
        self._reply = Reply(turn=self._reply.turn + 1, tts=SimpleNamespace(cancel=lambda: None), clock=TurnClock())


def test_the_reply_pauses_on_the_run_and_stops_on_a_fresh_word() -> None:
    ears = Ears(sp := PausingSpeaker())
    ears.frames([0.9] * (RUN - 1))
    assert sp.calls == []
    ears.frames([0.9])
    assert sp.calls == ["pause"] and sp.max_s == [PAUSE_EXPIRES_S]  # at once, before any word; it expires
    ears.caption("the weather")  # the reply's echo: still paused, not stopped
    ears.frames([0.9] * 5)
    assert sp.calls == ["pause"]
    ears.caption("wait stop")
    assert sp.calls == ["pause", "stop"]
    assert [e.user_words for e in ears.events if isinstance(e, BargeIn)] == ["stop"]  # "wait" ~ "with": echo-like


def test_a_decode_with_no_fresh_word_resumes_at_once_and_the_reply_pauses_only_once() -> None:
    ears = Ears(sp := PausingSpeaker())
    ears.frames([0.9] * RUN + [0.0])  # an echo blip: the run ends at once
    assert sp.calls == ["pause"]  # held for the ASR's first decode
    ears.caption("the weather")  # the decode after the run: its echo, nothing fresh
    assert sp.calls == ["pause", "resume"]
    ears.frames([0.0] + [0.9] * RUN)  # another run in the same reply: no second unconfirmed pause
    assert sp.calls == ["pause", "resume"]
    ears.caption("stop now")  # but a fresh word still barges in
    assert sp.calls == ["pause", "resume", "stop"] and ears._reply.barged


def test_without_a_decode_the_pause_ends_by_pause_min_s_after_its_run() -> None:
    ears = Ears(sp := PausingSpeaker())
    ears.frames([0.9] * RUN + [0.0])
    ears.frames([0.0] * int(PAUSE_MIN_S / 0.032 - 3))
    assert sp.calls == ["pause"]
    ears.frames([0.0] * 5)
    assert sp.calls == ["pause", "resume"] and not ears.events
    ears.next_reply()  # the next reply may pause once again
    ears.frames([0.9] * RUN)
    assert sp.calls == ["pause", "resume", "pause"]


def test_a_decode_during_the_run_keeps_the_pause() -> None:
    ears = Ears(sp := PausingSpeaker())
    ears.frames([0.9] * RUN)
    ears.caption("the")  # a decode of the run's start: the user may be saying more
    ears.frames([0.9] * 3)
    assert sp.calls == ["pause"]


def test_a_fresh_word_before_the_run_waits_for_the_run() -> None:
    ears = Ears(sp := PausingSpeaker())
    ears.frames([0.9] * 4)
    ears.caption("stop")  # a word, but 128 ms of speech: not a barge-in, nor a pause, yet
    assert sp.calls == [] and not ears._reply.barged
    ears.frames([0.9] * (RUN - 4))
    assert sp.calls == ["stop"] and ears._reply.barged


def test_what_barges_in_is_unchanged_a_word_after_its_run_only_resumes() -> None:
    ears = Ears(sp := PausingSpeaker())
    ears.frames([0.9] * RUN + [0.0] * 5)  # 320 ms of speech, then silence before the decode
    ears.caption("stop")  # a word, but no run any more: as without the pause, no barge-in; it plays on
    assert sp.calls == ["pause", "resume"] and not ears._reply.barged and not ears.events


def test_a_run_that_outlasts_the_pause_plays_on_and_does_not_pause_again() -> None:
    ears = Ears(sp := PausingSpeaker())
    ears.frames([0.9] * (RUN + int(PAUSE_MAX_S / 0.032) + 2))  # speech the ASR finds nothing new in
    assert sp.calls == ["pause", "resume"]
    ears.frames([0.9] * 20)
    assert sp.calls == ["pause", "resume"]
    ears.frames([0.0] + [0.9] * RUN)  # a new run in the same reply: its pause was spent
    assert sp.calls == ["pause", "resume"]


def test_a_pause_ends_with_the_reply() -> None:
    ears = Ears(sp := PausingSpeaker())
    ears.frames([0.9] * RUN)
    ears._turn_running, ears._reply = False, None  # the reply's last audio played meanwhile
    ears.frames([0.9])
    assert sp.calls == ["pause", "resume"]


def test_ending_the_input_ends_the_pause() -> None:
    ears = Ears(sp := PausingSpeaker())
    ears.frames([0.9] * RUN)
    ears._end_pause()  # Agent.finish / close: no VAD batch will come to end it
    assert sp.calls == ["pause", "resume"]
    ears._end_pause()
    assert sp.calls == ["pause", "resume"]


def test_an_echo_that_is_a_speech_run_does_not_pause_the_reply() -> None:
    ears = Ears(sp := PausingSpeaker(can=False))  # --no-aec on speakers, or the canceller warming up
    ears.frames([0.9] * (RUN + 40))
    assert sp.calls == []
    ears.caption("stop")
    assert sp.calls == ["stop"] and ears._reply.barged


def test_a_write_after_the_barge_in_flush_is_dropped() -> None:
    """`_play` checks `reply.barged`, then writes: a flush landing between must not play the cut-off reply."""
    now = [0.0]
    sp = VirtualSpeaker(16000, clock=lambda: now[0])
    a = np.full(1600, 0.5, np.float32)

    def output() -> Iterator[AudioChunk]:
        yield AudioChunk(a, 16000, 0, text="One.")
        sp.stop()  # the barge-in's flush, after `_play` looked at `reply.barged` (still False)
        yield AudioChunk(a, 16000, 1, text="Two.")
        yield AudioChunk(np.zeros(0, np.float32), 16000, 2, is_final=True, kind="final")

    events: list[object] = []
    host = SimpleNamespace(speaker=sp, _closed=threading.Event(), clock=lambda: now[0], _lock=threading.RLock(),
                           config=AgentConfig(log_turns=False), _recent=[], on_event=events.append)
    reply = Reply(turn=0, tts=SimpleNamespace(output=output()), clock=TurnClock())
    Agent._play(host, reply)  # type: ignore[arg-type]
    now[0] = 5.0
    assert [e.text for e in events if isinstance(e, Spoken)] == ["One."]
    assert sp.played_samples() == 0  # nothing of the cut-off reply was played after the flush


def test_without_pause_or_in_half_duplex_the_old_rules_hold() -> None:
    plain = Ears(VirtualSpeaker(16000))  # no pause(): barge-in needs the run and a fresh word together
    plain.frames([0.9] * RUN + [0.0])
    plain.caption("stop")
    assert not plain._reply.barged
    plain.frames([0.9] * RUN)
    plain.caption("stop")
    assert plain._reply.barged
    half = Ears(sp := PausingSpeaker(), half_duplex=True)
    half.frames([0.9] * RUN)
    half.caption("stop")
    assert sp.calls == [] and not half._reply.barged


# -- the echo canceller's double-talk onset (`near_speech`, voxcli.audio.doubletalk) ----------------


def test_an_onset_pauses_at_once_and_the_run_and_a_fresh_word_stop_the_reply() -> None:
    ears = Ears(sp := PausingSpeaker())
    ears.near_speech()  # the user over the reply, before any VAD frame
    assert sp.calls == ["pause"] and sp.max_s == [PAUSE_EXPIRES_S]
    ears.near_speech()  # the same onset told again: one pause
    ears.frames([0.9] * RUN)
    ears.caption("the weather")  # echo: still paused
    assert sp.calls == ["pause"]
    ears.caption("wait stop")
    assert sp.calls == ["pause", "stop"] and ears._reply.barged


def test_an_onset_no_speech_follows_plays_on_after_onset_wait_s_and_spends_the_pause() -> None:
    ears = Ears(sp := PausingSpeaker())
    ears.near_speech()
    ears.frames([0.0] * int(ONSET_WAIT_S / 0.032 - 2))
    assert sp.calls == ["pause"]
    ears.frames([0.0] * 3)
    assert sp.calls == ["pause", "resume"] and not ears.events
    ears.frames([0.9] * RUN)  # a run in the same reply: the one unconfirmed pause is spent
    ears.near_speech()
    assert sp.calls == ["pause", "resume"]
    ears.caption("stop now")  # a fresh word still barges in
    assert sp.calls == ["pause", "resume", "stop"]


def test_speech_in_a_vad_batch_that_ends_on_silence_keeps_an_onset_pause() -> None:
    """The ASR worker delivers scores in batches: speech inside one counts even if it ends on silence;
    the pause then ends on the first decode after `ONSET_GAP_FRAMES` of silence (not before, not without)."""
    ears = Ears(sp := PausingSpeaker())
    ears.frames([0.0] * 5)
    ears.near_speech()
    ears.hear(ONSET_WAIT_S + 0.05)  # the worker was busy decoding meanwhile
    ears.batch([0.0] * 4 + [0.9] * 14 + [0.0] * 2)  # that audio's scores: more than ONSET_WAIT_S of it
    assert sp.calls == ["pause"]  # the user spoke: wait for their words
    ears.caption("the weather")  # a decode in a gap between words (two silent frames): still paused
    assert sp.calls == ["pause"]
    ears.frames([0.0] * ONSET_GAP_FRAMES, dt=0.0)  # the speech has ended (dt=0: PAUSE_MIN_S stays out of it)
    assert sp.calls == ["pause"]  # a frame is no decode: still waiting for the words
    ears.caption("the weather")  # the next decode with no fresh word plays on
    assert sp.calls == ["pause", "resume"]


def test_the_onset_wait_counts_audio_scored_after_the_pause_not_wall_time() -> None:
    """Under load the VAD's scores come late: wall time past `ONSET_WAIT_S` with no score of the audio
    after the pause is no evidence that the user was silent."""
    ears = Ears(sp := PausingSpeaker())
    ears.frames([0.0] * 5)
    ears.hear(0.3)  # fed, not yet scored: the worker is decoding
    ears.near_speech()
    ears.hear(ONSET_WAIT_S + 0.1)
    ears.batch([0.0] * 9)  # the scores of the 0.3 s before the pause arrive, 0.7 s after it
    assert sp.calls == ["pause"]
    ears.batch([0.0] * 3 + [0.9] * RUN)  # then the audio after it: the user
    assert sp.calls == ["pause"]
    ears.caption("wait stop")
    assert sp.calls == ["pause", "stop"] and ears._reply.barged


def test_silence_scored_after_an_onset_plays_on_and_speech_scored_before_it_does_not_count() -> None:
    ears = Ears(sp := PausingSpeaker())
    ears.hear(0.1)
    ears.near_speech()
    ears.batch([0.9, 0.0, 0.0])  # echo residue from before the onset, scored after it: not the user
    ears.now += 1.0  # wall time alone ends nothing (PAUSE_MAX_S is the backstop)
    ears.frames([0.0] * int(ONSET_WAIT_S * SAMPLE_RATE / FRAME - 2), dt=0.0)
    assert sp.calls == ["pause"]
    ears.frames([0.0] * 3, dt=0.0)  # ONSET_WAIT_S of silence scored after the pause
    assert sp.calls == ["pause", "resume"]


def test_an_onset_does_nothing_without_a_pausable_reply() -> None:
    ears = Ears(sp := PausingSpeaker(can=False))
    ears.near_speech()  # the canceller's warm-up is not over: its echo may be what was heard
    ears._turn_running = False
    ears.speaker = sp2 = PausingSpeaker()
    ears.near_speech()  # no reply playing
    half = Ears(sp3 := PausingSpeaker(), half_duplex=True)
    half.near_speech()
    assert sp.calls == sp2.calls == sp3.calls == []


def test_a_failing_pause_on_an_onset_goes_to_the_agent_not_into_the_capture_loop() -> None:
    class Broken(PausingSpeaker):
        def pause(self, max_s: float | None = None) -> None:
            raise RuntimeError("the stream is gone")

    ears = Ears(Broken())
    ears.error = None
    ears.near_speech()  # called by the echo canceller inside the microphone's read loop: must not raise
    assert isinstance(ears.error, RuntimeError)


# -- with the detector wired (`hear_double_talk`), a barge-in needs a recent onset ---------------------


def wired(ears: Ears) -> SimpleNamespace:
    """Wire a canceller that has a double-talk detector, as `voxcli chat` does with AEC on."""
    canceller = SimpleNamespace(detector=object(), on_near_speech=None)
    ears.hear_double_talk(canceller)
    assert canceller.on_near_speech == ears.near_speech
    return canceller


def test_with_the_detector_wired_a_run_and_a_misheard_echo_word_only_pause_the_reply() -> None:
    """The reply's residue made a speech run and the ASR misheard an echo word: no onset, no barge-in."""
    ears = Ears(sp := PausingSpeaker())
    wired(ears)
    ears.frames([0.9] * RUN)
    ears.caption("sure")  # not the reply's word, but the detector heard nobody
    assert sp.calls == ["pause"] and not ears._reply.barged
    ears.frames([0.0])  # the reply paused, its residue is gone: the run ends
    ears.caption("sure")
    assert sp.calls == ["pause", "resume"] and not ears.events


def test_with_the_detector_wired_its_onset_lets_the_run_and_a_fresh_word_stop_the_reply() -> None:
    ears = Ears(sp := PausingSpeaker())
    wired(ears)
    ears.frames([0.9] * RUN)  # the run paused first (the detector had not seen the user yet)
    ears.caption("wait stop")
    assert sp.calls == ["pause"]
    ears.near_speech()  # then, the reply silent, the detector sees the user: no second pause
    assert sp.calls == ["pause"]
    ears.frames([0.9])
    assert sp.calls == ["pause", "stop"] and ears._reply.barged


def test_an_onset_older_than_near_recent_s_does_not_stop_the_reply() -> None:
    ears = Ears(sp := PausingSpeaker())
    wired(ears)
    ears.near_speech()
    ears.frames([0.0] * int(ONSET_WAIT_S / 0.032 + 1))  # nobody: the onset pause plays on
    assert sp.calls == ["pause", "resume"]
    ears.hear(NEAR_RECENT_S)
    ears.frames([0.9] * RUN)
    ears.caption("wait stop")
    assert sp.calls == ["pause", "resume"] and not ears._reply.barged
    ears.near_speech()  # a fresh onset: the pause is spent, the stop is not
    ears.caption("wait stop")
    assert sp.calls == ["pause", "resume", "stop"] and ears._reply.barged


def test_a_canceller_without_a_detector_keeps_the_run_and_word_rule() -> None:
    ears = Ears(sp := PausingSpeaker())
    ears.hear_double_talk(SimpleNamespace(detector=None, on_near_speech=None))  # AECConfig(double_talk=False)
    ears.frames([0.9] * RUN)
    ears.caption("wait stop")
    assert sp.calls == ["pause", "stop"]
