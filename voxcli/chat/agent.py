"""The chat turn loop: mic -> streaming ASR -> LLM -> streaming TTS -> speaker, with barge-in.

Every stage streams: the user's final transcript (ASR endpoint) becomes the
user message; the LLM's deltas go straight into the TTS streamer's `send`, so
the first clause is spoken while the model still writes; the TTS output is
written to a speaker whose play head tells what the user has actually heard.

Barge-in: while the assistant speaks, the mic stays open. Sustained user
speech -- a VAD run of at least `barge_in_ms` AND at least one recognized
word that is not an echo of what the assistant just said -- cancels the TTS
and the LLM at once, drops the queued audio, and truncates the assistant's
history entry to the text that was heard (each AudioChunk's `text`, cut in
proportion for the chunk playing at the moment). `half_duplex` instead closes
the mic while the assistant speaks (no echo cancellation available).

When a turn ends: `voxcli.chat.turn_gate` (VAD hold, or the semantic detector);
a reply may start on the ASR's speculative final during the hold and play only
once the endpoint is confirmed (`voxcli.chat.preempt`). The history the LLM is
shown is bounded (`voxcli.chat.history`).

Threads: the caller feeds mic audio (`feed`); the VAD scores arrive from the
ASR streamer's worker (one pass per frame, `voxcli.chat.shared_vad`); one
thread reads ASR captions; one runs turns (LLM -> TTS `send`); one per turn
moves TTS audio to the speaker. Every wait has a timeout and checks `close`.

The turn log record (the contract with `voxcli ledger --measured`) is
documented in `voxcli.chat.turnlog`.
"""
from __future__ import annotations

import collections
import queue
import re
import threading
import time
from dataclasses import dataclass
from typing import Any, Callable

from voxcli.chat.first_word import FIT_WAIT_S
from voxcli.chat.heard import place, words_of
from voxcli.chat.history import History, budget_for
from voxcli.chat.listening import ListeningMixin
from voxcli.chat.preempt import PreemptMixin
from voxcli.chat.turn import FeedClock, PendingTurn, Reply, Speaker, Utterance, cut_off_reason
from voxcli.chat.turn_gate import TurnGate
from voxcli.chat.turnlog import TurnClock, TurnRecord, append_turn, asr_name, make_record, name_of
from voxcli.asr.endpointer import VADConfig
from voxcli.config import DEFAULT_BARGE_IN_MS, DEFAULT_ENDPOINT_MS
from voxcli.events import AudioChunk, BargeIn, Caption, Notice, Spoken, TurnStart
from voxcli.llm.base import paced_metrics

__all__ = ["Agent", "AgentConfig", "BargeIn", "Notice", "Spoken", "TurnStart", "Speaker"]

CUT_OFF_NOTICE = "Sorry, my answer was cut off."
RECORDS_KEPT = 64
"""Latest turn records kept in `Agent.records` (all of them went to the turn log and `on_event`)."""


@dataclass(frozen=True)
class AgentConfig:
    system: str | None = None
    barge_in_ms: float = DEFAULT_BARGE_IN_MS
    """Sustained user speech (VAD) needed before a barge-in may cancel the reply."""
    half_duplex: bool = False
    """Close the mic while the assistant speaks (for setups without echo cancellation)."""
    endpoint_ms: float = DEFAULT_ENDPOINT_MS
    """Silence that ends the user's turn, for an ASR without its own `vad_config` (else that one's hold)."""
    echo_words: int = 40
    """How many of the assistant's latest words count as possible echo."""
    cut_off_notice: str = CUT_OFF_NOTICE
    log_turns: bool = True
    max_history_chars: int | None = None
    """History kept for the LLM (`voxcli.chat.history`); None: sized to the LLM (`budget_for`)."""
    preemptive: bool = True
    """Start the reply on the ASR's speculative final, during the hold (`voxcli.chat.preempt`)."""


class Agent(ListeningMixin, PreemptMixin):
    """One conversation. `start()`, then `feed()` 16 kHz mic audio; `close()` ends it.

    `turn_detector` (`voxcli.chat.turn_detector.TurnDetector`) selects the semantic end of
    turn (`voxcli.chat.turn_gate`); None: every ASR final is a turn (VAD hold only).
    """

    def __init__(
        self,
        llm: Any,
        asr: Any,
        vad: Any,
        tts_factory: Callable[[], Any],
        speaker: Speaker,
        config: AgentConfig | None = None,
        on_event: Callable[[Any], None] | None = None,
        clock: Callable[[], float] = time.perf_counter,
        turn_detector: Any = None,
    ) -> None:
        self.llm, self.asr, self.vad, self.tts_factory, self.speaker = llm, asr, vad, tts_factory, speaker
        self.config = config or AgentConfig()
        self.on_event = on_event or (lambda e: None)
        self.clock = clock
        self.history = History(self.config.max_history_chars or budget_for(llm))
        """What the LLM is shown: bounded, oldest turns dropped first (`history.messages` is the list)."""
        self.records: collections.deque[TurnRecord] = collections.deque(maxlen=RECORDS_KEPT)
        self.turns_done = 0
        """Turns finished (records beyond RECORDS_KEPT are only counted)."""
        self.wasted_preemptive = 0
        """Preemptive replies cancelled because the user went on (`voxcli.chat.preempt`)."""
        self._wasted_logged = 0
        self._spec: Any = None  # the speculation a preemptive reply answers, until its final arrives
        self.error: BaseException | None = None
        # the streamer's VAD thresholds (barge-in's speech run); its endpointer times the turns (UtteranceEdge)
        self._vad_config = getattr(asr, "vad_config", None) or VADConfig(endpoint_ms=self.config.endpoint_ms)
        self._in_speech = False  # between the streamer's utterance start and end
        self._lock = threading.RLock()
        self._closed = threading.Event()
        self._turns: queue.Queue[PendingTurn] = queue.Queue()
        self._gate = TurnGate(self._turns.put, turn_detector, clock, heard=self._heard_until)  # holds: audio heard
        self._gate.start_early = self._start_early  # semantic: the LLM starts while the detector scores
        self._reply: Reply | None = None
        self._turn_running = False
        self._n_turns = 0
        self._fed = 0  # samples given to VAD/ASR
        self._feed_clock = FeedClock()
        self._utts: dict[int, Utterance] = {}  # by Caption.utterance: those whose final has not arrived yet
        self._run_frames = 0  # consecutive speech frames (hysteresis), for barge-in
        self._utt_words = ""  # current (non-final) caption text
        self._recent: list[str] = []  # the assistant's latest words
        self._shared_vad = self._listen_to_shared_vad()  # one VAD pass: the streamer's, when it is shared
        self._init_preempt()  # the LLM warm-up while the user speaks; the audio heard (voxcli.chat.preempt)
        self._listen_to_streamer()  # utterance edges and speculative finals
        self._threads = [
            threading.Thread(target=self._guard(self._caption_loop), name="voxcli-agent-asr", daemon=True),
            threading.Thread(target=self._guard(self._turn_loop), name="voxcli-agent-turns", daemon=True),
        ]

    # -- caller side --------------------------------------------------------------

    def start(self) -> "Agent":
        for t in self._threads:
            t.start()
        return self

    @property
    def speaking(self) -> bool:
        """A reply is in progress (from the LLM request until its audio has played)."""
        return self._turn_running

    @property
    def closed(self) -> bool:
        return self._closed.is_set()

    @property
    def reply_first_audio(self) -> float | None:
        r = self._reply
        return None if r is None else r.clock.first_audio

    def close(self) -> None:
        """Stop listening and speaking at once (Ctrl-C); nothing waits forever."""
        if self._closed.is_set():
            return
        self._closed.set()
        self._gate.close()
        self._end_pause()
        with self._lock:
            r = self._reply
        for fn in (getattr(self.llm, "cancel", None), getattr(r.tts, "cancel", None) if r else None,
                   self.speaker.stop, getattr(self.asr, "cancel", None)):
            if fn is not None:
                try:
                    fn()
                except Exception:  # noqa: BLE001 - best effort while shutting down
                    pass
        for t in [*self._threads, self._fitting]:
            if t is not None and t is not threading.current_thread():
                t.join(timeout=2.0)
        # Wait for the workers' model calls to end: a native call still running while the
        # interpreter exits aborts the process (onnxruntime's threads) instead of exiting 130.
        for wait in (getattr(r.tts, "join", None) if r else None, getattr(self.asr, "finish", None),
                     self._finish_warm):
            if wait is not None:
                try:
                    wait(2.0)
                except Exception:  # noqa: BLE001 - cancelled workers may report their cancel
                    pass

    def finish(self, timeout: float = 30.0) -> None:
        """End of input: let the ASR commit the last utterance, then wait for the turns."""
        self._input_over = True  # no more audio: holds are judged in wall time (voxcli.chat.turn_gate)
        self._end_pause()  # no VAD will come to end it
        self._post_first_word(wait=FIT_WAIT_S)  # a fit still running: its patch before the input ends
        try:
            self.asr.finish(timeout)
        except Exception:  # noqa: BLE001 - an ASR error surfaces through the caption loop
            pass
        self._threads[0].join(timeout)
        deadline = self.clock() + timeout
        while self.busy() and self.clock() < deadline and self.error is None:
            with self._lock:
                self._utts = {k: u for k, u in self._utts.items() if u.endpoint is None}
            time.sleep(0.02)

    # -- ASR side -----------------------------------------------------------------

    def _caption_loop(self) -> None:
        for cap in self.asr.captions:
            if self._closed.is_set():
                return
            self.on_event(cap)
            if not cap.is_final:
                self._utt_words = f"{cap.stable} {cap.volatile}"
                self._maybe_barge_in(decoded=True)
                self._warm_up_on(self._utt_words)
                continue
            self._utt_words = ""
            self._on_final(cap)

    def _on_final(self, cap: Caption) -> None:
        now = self.clock()
        with self._lock:
            utt = self._take_utterance(cap.utterance)  # by the number the streamer gave both
            speech_end, endpoint = (utt.speech_end, utt.endpoint) if utt else (None, None)
            text = cap.stable.strip()
            if not text:
                return
        if self._final_of_speculation(text, now):
            return  # its preemptive reply is under way already
        with self._lock:
            reply = self._reply
            # Speech that began while the assistant spoke and did not barge in is echo or a backchannel.
            ignored = (self._turn_running and reply is not None and not reply.barged) or (
                utt is not None and utt.overlapped and not utt.barged)
        if ignored:
            self.on_event(Notice("ignored", f"heard while speaking, not a barge-in: {text}"))
        else:  # outside the lock: a semantic gate runs the turn detector (~50 ms)
            self._gate.final(text, TurnClock(speech_end=speech_end, endpoint=endpoint, asr_final=now))

    def submit(self, text: str) -> None:
        """A user turn given as text (typed, or transcribed elsewhere): answered like a spoken one."""
        self._turns.put(PendingTurn(" ".join(text.split()), TurnClock(asr_final=self.clock())))

    # -- turns --------------------------------------------------------------------

    def _turn_loop(self) -> None:
        while not self._closed.is_set():
            due = self._gate.poll()  # a held (mid-phrase) turn whose longer hold has passed
            try:
                pending = self._turns.get(timeout=min(0.05, due) if due is not None else 0.05)
            except queue.Empty:
                continue
            with self._lock:
                self._turn_running = True
            try:
                self._run_turn(pending)
            finally:
                with self._lock:
                    self._turn_running = False
                    self._reply = None

    def _run_turn(self, pending: PendingTurn) -> None:
        """One reply: stream the LLM into the TTS while it plays, then record what was heard."""
        turn = self._n_turns
        self._n_turns += 1
        messages = self._messages(pending.text)
        reply = Reply(turn=turn, tts=self.tts_factory(), clock=pending.clock, speculation=pending.speculation)
        if reply.speculation is None:
            self._announce(reply, pending.text)
        with self._lock:
            self._reply = reply
            self._recent = []
        player = threading.Thread(target=self._guard(self._play, reply), name="voxcli-agent-play", daemon=True)
        player.start()
        try:
            metrics = self._speak_llm(reply, messages)
        except BaseException:
            reply.tts.cancel()
            player.join(2.0)
            raise
        if reply.speculation is not None and (not self._await_verdict(reply) or reply.dropped):
            reply.tts.cancel()  # the user went on: nothing of it was played, nothing is recorded
            player.join(2.0)
            self._n_turns -= 1
            return
        self._announce(reply, pending.text)
        cut_off = bool(metrics.get("cut_off"))
        self._end_reply(reply, player, cut_off_reason(metrics) if cut_off else None)
        self._record(pending, reply, metrics, cut_off)

    def _announce(self, reply: Reply, text: str) -> None:
        """TurnStart, once (a preemptive reply: when its endpoint is confirmed)."""
        with self._lock:
            if reply.announced:
                return
            reply.announced = True
        self.on_event(TurnStart(reply.turn, text))

    def _speak_llm(self, reply: Reply, messages: list[dict[str, str]]) -> dict[str, float]:
        """Send the LLM's deltas to the TTS as they come (until a barge-in); the final delta's metrics."""
        clock = reply.clock
        clock.llm_request = self.clock()
        self._finish_warm()  # its prefill is this request's prefix
        for d in self._reply_stream(reply, messages):  # its own generation: cancelled alone
            if d.is_final:
                return paced_metrics(d.metrics, getattr(reply.tts, "waited_s", 0.0))  # voxcli.chat.pacing
            if reply.speculation is not None and reply.speculation.dropped:
                break  # the user went on before this early reply's cancel could reach it (voxcli.chat.preempt)
            if not d.text:
                continue
            if clock.llm_first_token is None:
                clock.llm_first_token = self.clock()
            reply.received += d.text
            if not reply.barged:
                self._send(reply, d.text)
        return {}

    def _end_reply(self, reply: Reply, player: threading.Thread, cut_off: str | None) -> None:
        """Say that a cut-off answer was cut off (`cut_off`: why), end the TTS stream, wait until it has played."""
        if cut_off and not reply.barged:
            self.on_event(Notice("cut_off", cut_off))
            tail = "" if re.search(r"[.!?]\s*$", reply.received) or not reply.received.strip() else "."
            self._send(reply, f"{tail} {self.config.cut_off_notice}")
        if not reply.barged:
            try:
                reply.tts.finish()
            except Exception:  # noqa: BLE001 - cancelled by a barge-in in between
                if not reply.barged:
                    raise
        while player.is_alive() and not self._closed.is_set():
            player.join(0.05)
        if not reply.barged:
            while not self.speaker.drain(0.05):
                if self._closed.is_set() or reply.barged:
                    break
        reply.clock.end = self.clock()

    def _record(self, pending: PendingTurn, reply: Reply, metrics: dict[str, float], cut_off: bool) -> None:
        """History gets what the user heard; the turn log gets the timings."""
        heard = reply.heard_at_barge if reply.barged else " ".join(reply.received.split())
        self.history.append("user", pending.text)
        if heard:
            self.history.append("assistant", heard)
        wasted, self._wasted_logged = self.wasted_preemptive - self._wasted_logged, self.wasted_preemptive
        rec = make_record(reply.turn, reply.clock, user=pending.text, assistant=heard or "", interrupted=reply.barged,
                          cut_off=cut_off, llm=name_of(self.llm), asr=asr_name(self.asr),
                          llm_metrics=metrics, preemptive=reply.speculation is not None, wasted_preemptive=wasted,
                          detector=pending.detector)
        self.records.append(rec)
        self.turns_done += 1
        if self.config.log_turns and not self._closed.is_set():
            append_turn(rec)
        self.on_event(rec)

    def _play(self, reply: Reply) -> None:
        """Move TTS audio to the speaker, remembering which text each sample speaks."""
        epoch = getattr(self.speaker, "epoch", None)  # a write after a barge-in's stop() is dropped
        for chunk in reply.tts.output:
            if not isinstance(chunk, AudioChunk):
                continue
            if chunk.kind != "audio" or chunk.is_final:
                with self._lock:
                    if reply.spans and chunk.kind == "final":
                        reply.spans[-1].complete = True
                return  # final or cancelled sentinel
            if reply.barged or self._closed.is_set():
                continue  # drain the cancelled stream without playing it
            if reply.speculation is not None and not reply.announced:
                if not self._hold_audio(reply):  # stamps the audio ready, waits for the verdict
                    continue  # dropped: the user went on
                self._announce(reply, reply.speculation.text)
            at = self.speaker.write(chunk.audio) if epoch is None else self.speaker.write(chunk.audio, epoch=epoch)
            if at is None:
                continue
            if reply.clock.first_audio is None:
                reply.clock.first_audio = self.clock()
            with self._lock:
                place(reply.spans, chunk, at, chunk.sample_rate)  # sentence spans and word ends on the play head
                self._recent = (self._recent + words_of(chunk.text))[-self.config.echo_words :]
            if chunk.text:
                self.on_event(Spoken(reply.turn, chunk.text))

    # -- helpers ------------------------------------------------------------------

    @staticmethod
    def _send(reply: Reply, text: str) -> None:
        try:
            reply.tts.send(text)
        except Exception:  # noqa: BLE001 - a barge-in cancelled the streamer between check and send
            if not reply.barged:
                raise

    def _guard(self, fn: Callable[..., None], *args: Any) -> Callable[[], None]:
        def run() -> None:
            try:
                fn(*args)
            except BaseException as e:  # noqa: BLE001 - handed to the caller via .error
                if self.error is None and not self._closed.is_set():
                    self.error = e
                    if not isinstance(e, BrokenPipeError):  # the reader left: nothing to tell
                        self.on_event(Notice("error", str(e)))

        return run
