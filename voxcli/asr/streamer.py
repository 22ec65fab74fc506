"""ASRStreamer: speech in, live captions out, with a serial re-decode worker.

Audio from `send()` goes into a bounded queue (`asr/inbox.py`). One worker thread takes it a step at a time: Silero
VAD finds utterances; inside one, the worker re-decodes the whole utterance buffer each step (forced to start with the
stable words, without their punctuation) and feeds the words to LocalAgreement-n, so the caption's stable prefix grows
while its volatile tail may still change. The final decode of an utterance is unforced (the batch decode of the same
audio; it may re-punctuate the stable words; where it disagrees with one the shown word stays, and where it cannot be
lined up with them it is decoded again forced with them) and starts at silence onset, during the endpoint hold
(`asr/speculation.py`): committed without decoding again when the hold confirms the endpoint, dropped if speech
resumes. The next utterance starts empty. Unforced decodes (final, cut) take the caption at the hold's onset as a
draft (`asr/drafting.py`; faster on a model with `drafts`): the final is then not bit-identical to the batch decode (a
near-tie word can flip) and, paced, depends on that caption.

Two rules keep it real time over hours:
- bounded buffer: past `max_buffer_s` without a pause long enough to end the utterance, the head of the buffer
  is decoded alone up to the quietest frame in the already-stable region, committed, and cut off;
- when the worker is behind (more than a step of audio pending) it skips the intermediate re-decode and only
  ingests (VAD), reporting the lag; the final decode at each endpoint always runs, so no audio is lost.
`lockstep=True` decodes at every step regardless, and every step is a whole `step_ms` of audio
(deterministic however threads interleave: unpaced files, tests, benchmarks).

Back-pressure: `send(a)` (files, pipes) waits for room: unpaced input is consumed at the worker's speed,
bounded, lossless; `send(a, block=False)` (a mic callback must never stall) drops the OLDEST waiting audio
past `max_pending_s` (drop-behind, `stats.dropped_s`). `Caption.t_audio`: audio heard. `patch(sample, a)`:
audio sent earlier, corrected since (`asr/buffer.py`); `expect_patch()` announces one. An utterance that
begins at a patch is decoded after `PATCH_LEAD_S` of silence and commits after `PATCH_COMMIT_S`.
`final_model` (two passes): a second model decodes the finals and cuts (forced with the stable words where its
words cannot be lined up with them); the re-decodes stay on the first. Words the captions committed stay where
it disagrees (the ratchet); an utterance that begins at a patch then commits nothing before its final."""
from __future__ import annotations

import queue
import threading
import time
from typing import Iterator

import numpy as np

from voxcli.asr.agreement import LocalAgreement
from voxcli.asr.buffer import PATCH_COMMIT_S, PATCH_LEAD_S, WorkerBuffer
from voxcli.asr.drafting import OnsetDraft
from voxcli.asr.engine import ASREngine, HoldFrom
from voxcli.asr.inbox import AudioInbox, Patch
from voxcli.asr.speculation import Speculation, Speculator, Subscriber
from voxcli.asr.stats import ASRStats
from voxcli.config import DEFAULT_AGREEMENT, DEFAULT_STEP_MS
from voxcli.asr.endpointer import FRAME, SAMPLE_RATE, Endpointer, FrameScorer, VADConfig, last_speech_sample
from voxcli.errors import Cancelled, UsageError
from voxcli.events import Caption

__all__ = ["ASREngine", "ASRStats", "ASRStreamer", "HoldFrom"]


class ASRStreamer:
    """Push 16 kHz float32 audio with `send`, read `captions`, end with `finish`."""

    def __init__(self, model: ASREngine, vad: FrameScorer, *, agreement: int | None = None, step_ms: int | None = None,
                 vad_config: VADConfig | None = None, max_buffer_s: float = 20.0, lockstep: bool = False,
                 max_pending_s: float = 10.0, speculative: bool = True, hold_from: HoldFrom = "vad",
                 tail_from_speech: bool = False, final_model: ASREngine | None = None) -> None:
        if getattr(model, "sample_rate", SAMPLE_RATE) != SAMPLE_RATE:
            raise UsageError("the ASR model must take 16 kHz audio")
        if (step_ms := step_ms or getattr(model, "step_ms", None) or DEFAULT_STEP_MS) < 100:  # None: the model's
            raise UsageError("--step-ms must be at least 100")
        self.model, self.vad, self.final_model = model, vad, final_model  # final_model: see `_decode`
        self.vad_config, self._b = vad_config or VADConfig(), WorkerBuffer(max_buffer_s)  # checks max_buffer_s
        self.step = int(step_ms * SAMPLE_RATE / 1000)
        self.lockstep, self.speculative, self.hold_from, self.tail_from_speech = (
            lockstep, speculative, hold_from, tail_from_speech)  # tail: the final's end pad counts from the speech too
        if hold_from not in ("vad", "speech") or (hold_from == "speech" and not speculative) or (
                tail_from_speech and hold_from != "speech"):
            raise UsageError("hold_from is 'vad' or 'speech' (which needs speculative=True; tail_from_speech needs it)")
        self._spec, self._draft = Speculator(SAMPLE_RATE), OnsetDraft()
        self.agreement = LocalAgreement(  # None: the model's (catalog `agreement`); 0 is an error, not "default"
            agreement if agreement is not None else (getattr(model, "agreement", None) or DEFAULT_AGREEMENT))
        self.stats = ASRStats()
        self.utterances: list[str] = []
        self._captions: queue.Queue = queue.Queue()
        self._inbox = AudioInbox.of_seconds(max_pending_s, SAMPLE_RATE)
        self._pending_n = 0  # what the worker left waiting at its last take
        self._send_lock, self._finished = threading.Lock(), False
        self._error: BaseException | None = None
        self._t0: float | None = None
        vad.reset()
        self._ep = Endpointer(self.vad_config)
        self._utt_start: int | None = None  # absolute sample where the current utterance begins
        self._lead_at: int | None = None  # where an utterance that began at a patched span starts (`PATCH_LEAD_S`)
        self._final_due: int | None = None  # an endpoint's final end, waiting for an announced patch
        self._last_decode_at = 0
        self._last_caption: tuple[str, str] | None = None
        self._utt_index = 0
        self._thread = threading.Thread(target=self._run, name="voxcli-asr", daemon=True)
        self._thread.start()

    # ---- caller side -------------------------------------------------
    def send(self, audio: np.ndarray, *, block: bool = True) -> None:
        """Queue float32 mono 16 kHz samples (any length); see "Back-pressure" above. `block=True` waits while
        `max_pending_s` is waiting (nothing is lost); `block=False` never waits and drops the oldest waiting audio
        instead. Ignored after `cancel()`; a UsageError after `finish()`."""
        a = np.asarray(audio, dtype=np.float32).reshape(-1)
        if self._inbox.cancelled:  # dropped
            return
        with self._send_lock:
            if self._finished:
                raise UsageError("send() after finish()")
            if self._t0 is None:
                self._t0 = time.monotonic()
            self.stats.audio_s += a.size / SAMPLE_RATE
        dropped = self._inbox.put(a, block=block, alive=self._thread.is_alive)
        if dropped:
            with self._send_lock:
                self.stats.dropped_s += dropped / SAMPLE_RATE

    def patch(self, sample: int, audio: np.ndarray) -> None:
        """Replace samples [sample, sample + len(audio)) of what was sent with `audio`, as speech.

        In order with `send`; the worker replaces what it holds or can take back (`WorkerBuffer.patch`), and
        the utterance that starts soon after (or runs with no stable word yet) begins at it (`PatchedSpeech`).
        `sample` numbers the samples the worker took: those sent minus any dropped (`stats.dropped_s`);
        ignored after `finish()` or `cancel()`."""
        if self._finished or self._inbox.cancelled:
            return
        self._inbox.put_patch(Patch(int(sample), np.array(audio, dtype=np.float32).reshape(-1)))  # a copy

    def expect_patch(self) -> None:
        """A `patch` will follow: no re-decode nor speculative final until it comes (an empty one ends the wait),
        so no word it replaces turns stable (`WorkerBuffer.announce`; an endpoint's final waits for it too)."""
        if not (self._finished or self._inbox.cancelled):
            self._inbox.put_patch(Patch(-1, np.zeros(0, np.float32), announce=True))  # in order with the samples

    def subscribe(self, fn: Subscriber) -> None:
        """Call `fn(event)` with each `UtteranceEdge`, `SpeculativeFinal` and `SpeculationEnd` (asr/speculation.py),
        on the worker thread: it must return at once; its exceptions are ignored. Subscribe before sending audio."""
        self._spec.subscribe(fn)

    @property
    def captions(self) -> Iterator[Caption]:
        """Caption events until the stream ends (after `finish()` or an error)."""
        while True:
            item = self._captions.get()
            if item is None:
                if self._error is not None:
                    raise self._error
                return
            yield item

    def finish(self, timeout: float | None = None) -> str:
        """End the input; wait for the last decode; return the transcript (utterances, one per line)."""
        with self._send_lock:
            self._finished = True
        self._inbox.close()
        self._thread.join(timeout)
        if self._error is not None:
            raise self._error
        return self.text

    def cancel(self) -> None:
        """Stop at the next model call; captions end; nothing more is committed."""
        with self._send_lock:
            self._finished = True
        self._inbox.close(cancel=True)

    @property
    def pending_s(self) -> float:
        """Audio sent but not yet taken by the worker (its lag behind the input)."""
        return self._inbox.pending / SAMPLE_RATE

    text = property(lambda self: "\n".join(self.utterances), doc="The transcript so far, one utterance per line.")

    # ---- worker side -------------------------------------------------
    def _elapsed(self) -> float:
        return time.monotonic() - (self._t0 or time.monotonic())

    def _take(self) -> tuple[np.ndarray | None, bool]:
        """Up to one step of pending audio (patches applied on the way); (None, True) when input is over."""
        while isinstance((got := self._inbox.take(self.step, whole=self.lockstep))[0], Patch):
            self._patch(got[0])  # type: ignore[arg-type]
            self._settle_final()  # a final waiting for this patch runs now, not after the next step's audio
        chunk, self._pending_n = got  # what was waiting when this step was taken, as before patches existed
        if chunk is not None and not self.lockstep:  # in lockstep the pending audio is a file fed unpaced, not lag
            self.stats.max_lag_s = max(self.stats.max_lag_s, self._pending_n / SAMPLE_RATE)
        return chunk, chunk is None

    def _run(self) -> None:
        t_start = time.monotonic()
        try:
            while True:
                chunk, done = self._take()
                if done:
                    break
                self._ingest(chunk)
                self._settle_final()  # or its wait ended with this chunk
                # in the hold the final decode runs instead (speculation); an announced patch is waited for
                holding = (self.speculative and self._ep.silence_onset is not None) or self._b.patch_due
                if self._utt_start is not None and self._buf_end - self._last_decode_at >= self.step and not holding:
                    if self.lockstep or self._pending_n < self.step:
                        self._redecode()
                    else:
                        self.stats.skipped += 1
                        self._last_decode_at = self._buf_end
            if self._utt_start is not None:
                self._finalize(self._buf_end if self._final_due is None else self._final_due)
        except Cancelled:
            pass
        except BaseException as e:  # noqa: BLE001 - handed to the caller in finish()/captions
            self._error = e
        finally:
            self.stats.total_s = time.monotonic() - t_start
            self._captions.put(None)

    @property
    def _heard_s(self) -> float:
        """Audio the worker had scored when it decided (the VAD frames fed: an endpoint fires mid-chunk)."""
        return min(self._buf_end, self._ep.frame_index * FRAME) / SAMPLE_RATE

    _buf_end = property(lambda self: self._b.end, doc="Absolute sample where the kept audio ends.")

    def _patch(self, p: Patch) -> None:
        if p.announce:
            return self._b.announce()
        span = self._b.patch(p.sample, p.audio)
        if span is None or self._utt_start is None:
            return
        if self._final_due is not None and span[0] >= self._final_due:
            return  # past an ended utterance waiting for its final: the span is kept for the next one
        if self._spec.pending is not None and span[1] > self._utt_start:  # it decoded the audio as first sent
            self._spec.end("dropped", self._elapsed())
            self.stats.speculations_dropped += 1
        start = self._b.utterance_start(self._utt_start, self._utt_start)  # a running utterance takes it now
        if not self.agreement.stable and start != self._utt_start:  # its stable words stay first
            self._utt_start = self._lead_at = start
            self.agreement.reset()  # its hypotheses were of the audio the patch replaced

    def _ingest(self, chunk: np.ndarray) -> None:
        chunk = self._b.append(chunk)
        for p in self.vad.probs(chunk):
            self._b.probs.append(float(p))
            ev = self._ep.feed(float(p))
            self._draft.observe(self._ep.silence_onset, self._ep.in_speech, self.agreement.words)
            if ev is not None and self._final_due is not None:
                self._settle_final(force=True)  # speech again: the utterance waiting on a patch ends as it is
            if ev is None:
                if (self.speculative and self._utt_start is not None and not self._b.patch_due
                        and self._final_due is None):
                    self._speculate()
                continue
            if ev.kind == "start" and self._utt_start is None:
                own = max(self._b.start, ev.sample - self.vad_config.pad_samples)
                self._utt_start = self._b.utterance_start(own, ev.sample)
                self._lead_at = self._utt_start if self._utt_start != own else None  # it joined a patched span
                self._last_decode_at = self._utt_start
                self._spec.edge("start", self._utt_index, ev.sample, None, self._elapsed())
            elif ev.kind == "end" and self._utt_start is not None:
                spec = self._spec.pending  # the end is announced before the final caption:
                end = spec.speech_end if spec and spec.onset == ev.sample else self._speech_end(ev.sample)
                self._spec.edge("end", self._utt_index, ev.sample, end, self._elapsed())
                tail = end if self.tail_from_speech else ev.sample
                self._final_due = min(self._buf_end, tail + self.vad_config.pad_samples, self._ep.frame_index * FRAME)
                self._settle_final()  # now, unless an announced patch is due: then once it came (`_settle_final`)
        if self._utt_start is None:
            self._b.trim_idle(self.vad_config, self._ep.candidate_sample, self._ep.frame_index)
        elif self._buf_end - self._utt_start > self._b.max_span and self._final_due is None:
            self._cut()
        span = 0 if self._utt_start is None else self._buf_end - self._utt_start
        self.stats.max_buffer_s = max(self.stats.max_buffer_s, span / SAMPLE_RATE)

    def _decode(self, start: int, end: int, prompt: bool = True, final: bool = False) -> list[str]:
        # Stable words (no punctuation) forced as the prefix: cheaper, consistent. Unforced decodes (finals, cuts)
        # and a forced `final` run on `final_model` if given (read once: a caller may swap it between utterances).
        text, fm = (self.agreement.prompt if prompt else ""), self.final_model
        model = fm if fm is not None and (final or not prompt) else self.model
        draft = {} if prompt else self._draft.draft_for(model, self.agreement.words)  # finals and cuts only
        t = time.monotonic()
        audio = self._b.span(start, end)
        if start == self._lead_at:  # a patched span opens the utterance: the decoder gets the silence before it
            audio = np.concatenate([np.zeros(int(PATCH_LEAD_S * SAMPLE_RATE), np.float32), audio])
        words = model.transcribe(audio, prompt=text or None, **draft)
        self.stats.decode_s += time.monotonic() - t
        self.stats.decodes += 1
        return [w.text for w in words]

    def _emit(self, is_final: bool) -> None:
        self.stats.retractions, self.stats.flicker_words = self.agreement.retractions, self.agreement.flicker_words
        pair = (self.agreement.stable_text, self.agreement.volatile_text)
        if not is_final and pair == self._last_caption:
            return
        self._last_caption = pair
        self._captions.put(Caption(stable=pair[0], volatile=pair[1], is_final=is_final, t_audio=self._heard_s,
                                   t_emit=self._elapsed(), utterance=self._utt_index))

    def _redecode(self) -> None:
        assert self._utt_start is not None
        words = self._decode(self._utt_start, self._buf_end)
        self._last_decode_at = self._buf_end
        self._hear(words)
        self._emit(False)

    def _hear(self, words: list[str]) -> None:
        """A hypothesis for the captions; one of a patched utterance shorter than `PATCH_COMMIT_S` (any, with a
        `final_model`: the fast model's guess at a first word rebuilt from under the echo would outvote it) is shown."""
        short = self._lead_at is not None and (
            self.final_model is not None or self._buf_end - self._utt_start < PATCH_COMMIT_S * SAMPLE_RATE)
        (self.agreement.show if short else self.agreement.update)(words)

    def _speculate(self) -> None:
        """Each VAD frame inside an utterance: drop a stale speculation; start one once the pad is heard."""
        assert self._utt_start is not None
        onset, spec = self._ep.silence_onset, self._spec.pending
        if spec is not None and (spec.onset != onset or spec.start != self._utt_start):
            self._spec.end("dropped", self._elapsed())  # speech resumed (or the buffer was cut)
            self.stats.speculations_dropped += 1
            spec = None
        if onset is not None and self.hold_from == "speech" and not self._ep.backdated:
            self._speech_end(onset)  # the hold counts from the speech at once (a hold shorter than the pad too)
        base = self._ep.hold_start if self.tail_from_speech else onset  # where the end pad counts from
        end = None if onset is None or base is None else base + self.vad_config.pad_samples
        if spec is not None or end is None or self._ep.frame_index * FRAME < end or end <= self._utt_start:
            return
        words = self._final_decode(end)  # exactly as the final decode
        frozen = self.agreement.stable[: self.agreement.frozen]
        speech_end = base if self.tail_from_speech else self._speech_end(onset)  # else: a finer noise floor
        self.stats.speculations += 1
        self._spec.start(
            Speculation(self._utt_index, self._spec.next_attempt(), onset, self._utt_start, end,
                        tuple(frozen), tuple(words), " ".join([*frozen, *words]), speech_end),
            t_audio=self._heard_s, t_emit=self._elapsed())
        # It is also this step's hypothesis: the captions go on while the hold counts.
        self._hear(words)
        self._emit(False)

    def _speech_end(self, onset: int) -> int:
        """The last speech sample before silence onset `onset`; with hold_from="speech" the hold counts from it."""
        end = last_speech_sample(self._b.audio, self._b.start, min(onset, self._ep.last_speech), onset)
        if self.hold_from == "speech":
            self._ep.backdate(end)
        return end

    def _final_words(self, end: int) -> list[str]:
        """The final decode of [utterance start, end): the speculative one if it was made from the same."""
        spec = self._spec.pending
        if spec is not None and spec.matches(self._utt_start, end, self.agreement.stable[: self.agreement.frozen]):
            self._spec.end("confirmed", self._elapsed())
            return list(spec.words)
        if spec is not None:
            self._spec.end("dropped", self._elapsed())
            self.stats.speculations_dropped += 1
        return self._final_decode(end) if end > self._utt_start else []

    def _final_decode(self, end: int) -> list[str]:
        """Unforced; forced with the shown words when it cannot be lined up with them (`lines_up`)."""
        assert self._utt_start is not None
        words = self._decode(self._utt_start, end, prompt=False)
        return words if self.agreement.lines_up(words) else self._decode(self._utt_start, end, final=True)

    def _settle_final(self, force: bool = False) -> None:
        """The endpoint's final decode, when one is waiting, unless an announced patch is due (`force`: now).

        Why: an utterance that ends before its patch lands (a short "Stop." said over the reply, whose
        span is all of it) would otherwise be committed from the audio the patch replaces."""
        if self._final_due is not None and (force or not self._b.patch_due):
            end, self._final_due = self._final_due, None
            self._finalize(end)

    def _finalize(self, end: int) -> None:
        """Endpoint (or end of input): commit the utterance's final decode (unforced; the ratchet still holds)."""
        assert self._utt_start is not None
        end = max(end, self._utt_start)
        self.agreement.finalize(self._final_words(end))
        text = self.agreement.stable_text
        if text or self._last_caption is not None:
            self._emit(True)
        if text:
            self.utterances.append(text)
            self.stats.utterances += 1
        self._utt_index += 1 if (text or self._last_caption is not None) else 0
        self._spec.next_utterance()
        self.agreement.reset()
        self._draft.reset()
        self._last_caption = None
        self._utt_start = self._lead_at = None
        self._b.commit(end, self._ep.frame_index)

    def _cut(self) -> None:
        """Bound the buffer: decode its head up to the quietest frame in the stable region, commit, drop."""
        assert self._utt_start is not None
        start, a = self._utt_start, self.agreement
        cut = self._b.cut_point(start, len(a.stable) - a.frozen, len(a.volatile), self._ep.frame_index)
        segment = self._decode(start, cut, prompt=False)
        self.agreement.cut(segment)
        self.stats.cuts += 1
        self._emit(False)
        self._utt_start, self._lead_at = cut, None  # the head with the lead-in was decoded and committed
        self._last_decode_at = max(self._last_decode_at, cut)
        self._b.commit(cut, self._ep.frame_index)

