"""ASRStreamer: speech in, live captions out, with a serial re-decode worker.

Audio from `send()` goes into a bounded queue (`asr/inbox.py`). One worker
thread takes it a step at a time: Silero VAD finds utterances; inside one, the worker re-decodes the whole utterance buffer each step and
feeds the words to LocalAgreement-n, so the caption's stable prefix grows
while its volatile tail may still change. At an endpoint the utterance is
decoded once more and committed as final; the next one starts empty.

Two rules keep it real time over hours:
- bounded buffer: past `max_buffer_s` without a pause long enough to end the
  utterance, the head of the buffer is decoded alone up to the quietest
  frame in the already-stable region, committed, and cut off;
- when the worker is behind (more than a step of audio pending) it skips the
  intermediate re-decode and only ingests (VAD), reporting the lag; the
  final decode at each endpoint always runs, so no audio is lost.
`lockstep=True` decodes at every step regardless (deterministic: unpaced
files, tests, benchmarks).

Back-pressure, when input comes faster than the worker: `send(a)` (block=True,
files and pipes) waits for room, so unpaced input is consumed at the worker's
speed, memory stays bounded and nothing is lost; `send(a, block=False)` (live
input: a mic callback must never stall) never waits, and past `max_pending_s`
drops the OLDEST waiting audio (drop-behind: captions stay near "now"),
counted in `stats.dropped_s`. `Caption.t_audio` counts the audio heard.
"""
from __future__ import annotations

import queue
import threading
import time
from dataclasses import asdict, dataclass
from typing import Iterator, Protocol

import numpy as np

from voxcli.asr.agreement import LocalAgreement
from voxcli.asr.inbox import AudioInbox
from voxcli.asr.models import load_asr
from voxcli.config import DEFAULT_AGREEMENT, DEFAULT_ENDPOINT_MS, DEFAULT_STEP_MS
from voxcli.asr.endpointer import FRAME, SAMPLE_RATE, Endpointer, FrameScorer, VADConfig
from voxcli.errors import Cancelled, UsageError
from voxcli.events import Caption, Word


class ASREngine(Protocol):
    """What the streamer needs from a model (DESIGN.md)."""

    sample_rate: int

    def transcribe(self, audio: np.ndarray, prompt: str | None = None) -> list[Word]: ...


@dataclass
class ASRStats:
    """Worker figures of one stream (also the `--json` final record)."""

    audio_s: float = 0.0
    """Audio received."""
    decode_s: float = 0.0
    """Worker seconds spent in the model (re-decodes, cuts, finals)."""
    decodes: int = 0
    """Model calls (re-decodes, cuts and finals)."""
    skipped: int = 0
    """Re-decodes skipped because the worker was behind."""
    max_lag_s: float = 0.0
    """Most audio left waiting behind the worker (0 in lockstep mode)."""
    max_buffer_s: float = 0.0
    """Longest utterance buffer decoded at once (bounded by `max_buffer_s` of the streamer)."""
    cuts: int = 0
    """Times the buffer was cut inside an utterance (no pause long enough)."""
    utterances: int = 0
    """Utterances committed with text."""
    total_s: float = 0.0
    """Wall time of the worker, first audio to end."""
    dropped_s: float = 0.0
    """Live audio dropped unheard because the worker fell `max_pending_s` behind (`send(block=False)`)."""

    def to_dict(self) -> dict:
        d = {"event": "asr_stats", **asdict(self), "rtf": self.rtf}
        return {k: round(v, 4) if isinstance(v, float) else v for k, v in d.items()}

    @property
    def rtf(self) -> float:
        """Real-time factor of the model work (decode seconds per audio second)."""
        return self.decode_s / self.audio_s if self.audio_s else 0.0


class ASRStreamer:
    """Push 16 kHz float32 audio with `send`, read `captions`, end with `finish`."""

    def __init__(
        self,
        model: ASREngine,
        vad: FrameScorer,
        *,
        agreement: int = DEFAULT_AGREEMENT,
        step_ms: int = DEFAULT_STEP_MS,
        vad_config: VADConfig | None = None,
        max_buffer_s: float = 20.0,
        lockstep: bool = False,
        max_pending_s: float = 10.0,
    ) -> None:
        if getattr(model, "sample_rate", SAMPLE_RATE) != SAMPLE_RATE:
            raise UsageError("the ASR model must take 16 kHz audio")
        if step_ms < 100:
            raise UsageError("--step-ms must be at least 100")
        self.model, self.vad = model, vad
        self.vad_config = vad_config or VADConfig()
        self.step = int(step_ms * SAMPLE_RATE / 1000)
        self.max_buffer = int(max_buffer_s * SAMPLE_RATE)
        if self.max_buffer < 4 * SAMPLE_RATE:
            raise UsageError("max buffer must be at least 4 s")
        self.lockstep = lockstep
        self.agreement = LocalAgreement(agreement)
        self.stats = ASRStats()
        self.utterances: list[str] = []
        self._captions: queue.Queue = queue.Queue()
        if max_pending_s <= 0:
            raise UsageError("max pending audio must be positive")
        self._inbox = AudioInbox(int(max_pending_s * SAMPLE_RATE))
        self._pending_n = 0  # what the worker left waiting at its last take
        self._send_lock = threading.Lock()
        self._finished = False
        self._error: BaseException | None = None
        self._t0: float | None = None
        vad.reset()
        self._ep = Endpointer(self.vad_config)
        # Audio kept by the worker: `_buf` starts at absolute sample `_buf_start`.
        self._buf = np.zeros(0, dtype=np.float32)
        self._buf_start = 0
        self._probs: list[float] = []  # VAD score per frame, frame k = samples [512k, 512k+512)
        self._utt_start: int | None = None  # absolute sample where the current utterance begins
        self._last_decode_at = 0
        self._last_caption: tuple[str, str] | None = None
        self._utt_index = 0
        self._thread = threading.Thread(target=self._run, name="voxcli-asr", daemon=True)
        self._thread.start()

    # ---- caller side -------------------------------------------------
    def send(self, audio: np.ndarray, *, block: bool = True) -> None:
        """Queue float32 mono 16 kHz samples (any length); see "Back-pressure" above.

        `block=True` waits while `max_pending_s` is waiting (nothing is lost);
        `block=False` never waits and drops the oldest waiting audio instead.
        Ignored after `cancel()`; a UsageError after `finish()`.
        """
        a = np.asarray(audio, dtype=np.float32).reshape(-1)
        if self._inbox.cancelled:
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
        return "\n".join(self.utterances)

    def cancel(self) -> None:
        """Stop at the next model call; captions end; nothing more is committed."""
        with self._send_lock:
            self._finished = True
        self._inbox.close(cancel=True)

    @property
    def pending_s(self) -> float:
        """Audio sent but not yet taken by the worker (its lag behind the input)."""
        return self._inbox.pending / SAMPLE_RATE

    @property
    def text(self) -> str:
        return "\n".join(self.utterances)

    # ---- worker side -------------------------------------------------
    def _elapsed(self) -> float:
        return time.monotonic() - (self._t0 or time.monotonic())

    def _take(self) -> tuple[np.ndarray | None, bool]:
        """Up to one step of pending audio; (None, True) when input is over."""
        chunk, self._pending_n = self._inbox.take(self.step)
        if chunk is None:
            return None, True
        if not self.lockstep:  # in lockstep the pending audio is a file fed unpaced, not lag
            self.stats.max_lag_s = max(self.stats.max_lag_s, self._pending_n / SAMPLE_RATE)
        return chunk, False

    def _run(self) -> None:
        t_start = time.monotonic()
        try:
            while True:
                chunk, done = self._take()
                if done:
                    break
                self._ingest(chunk)
                if self._utt_start is not None and self._buf_end - self._last_decode_at >= self.step:
                    if self.lockstep or self._pending_n < self.step:
                        self._redecode()
                    else:
                        self.stats.skipped += 1
                        self._last_decode_at = self._buf_end
            if self._utt_start is not None:
                self._finalize(self._buf_end)
        except Cancelled:
            pass
        except BaseException as e:  # noqa: BLE001 - handed to the caller in finish()/captions
            self._error = e
        finally:
            self.stats.total_s = time.monotonic() - t_start
            self._captions.put(None)

    @property
    def _buf_end(self) -> int:
        return self._buf_start + self._buf.size

    def _ingest(self, chunk: np.ndarray) -> None:
        bad = ~np.isfinite(chunk)
        if bad.any():  # NaN/inf would poison the VAD state and the encoder: treat as silence
            chunk = np.where(bad, 0.0, chunk).astype(np.float32)
        chunk = np.clip(chunk, -1.0, 1.0)
        self._buf = np.concatenate([self._buf, chunk])
        for p in self.vad.probs(chunk):
            self._probs.append(float(p))
            ev = self._ep.feed(float(p))
            if ev is None:
                continue
            if ev.kind == "start" and self._utt_start is None:
                self._utt_start = max(self._buf_start, ev.sample - self.vad_config.pad_samples)
                self._last_decode_at = self._utt_start
            elif ev.kind == "end" and self._utt_start is not None:
                self._finalize(min(self._buf_end, ev.sample + self.vad_config.pad_samples))
        if self._utt_start is None:
            # Between utterances keep only the pre-roll (plus a frame of slack).
            self._drop_before(self._buf_end - self.vad_config.pad_samples - FRAME - self._ep_candidate_span())
        elif self._buf_end - self._utt_start > self.max_buffer:
            self._cut()
        self.stats.max_buffer_s = max(self.stats.max_buffer_s, self._utt_span() / SAMPLE_RATE)

    def _ep_candidate_span(self) -> int:
        # Keep the audio of a not-yet-confirmed speech start (min_speech_ms) too.
        c = self._ep.candidate_sample
        return 0 if c is None else max(0, self._buf_end - c)

    def _utt_span(self) -> int:
        return 0 if self._utt_start is None else self._buf_end - self._utt_start

    def _drop_before(self, sample: int) -> None:
        cut = min(max(0, sample - self._buf_start), self._buf.size)
        if cut:
            self._buf = self._buf[cut:].copy()
            self._buf_start += cut
        first_frame = self._buf_start // FRAME
        drop = first_frame - (self._ep.frame_index - len(self._probs))
        if drop > 0:
            del self._probs[:drop]

    def _audio(self, start: int, end: int) -> np.ndarray:
        return self._buf[start - self._buf_start : end - self._buf_start]

    def _decode(self, start: int, end: int, prompt: bool = True) -> list[str]:
        # The stable words of this buffer are forced as the decoder prefix: cheaper, and consistent.
        text = " ".join(self.agreement.stable[self.agreement.frozen :]) if prompt else ""
        t = time.monotonic()
        words = self.model.transcribe(self._audio(start, end), prompt=text or None)
        self.stats.decode_s += time.monotonic() - t
        self.stats.decodes += 1
        return [w.text for w in words]

    def _emit(self, is_final: bool) -> None:
        pair = (self.agreement.stable_text, self.agreement.volatile_text)
        if not is_final and pair == self._last_caption:
            return
        self._last_caption = pair
        self._captions.put(
            Caption(
                stable=pair[0],
                volatile=pair[1],
                is_final=is_final,
                t_audio=self._buf_end / SAMPLE_RATE,
                t_emit=self._elapsed(),
                utterance=self._utt_index,
            )
        )

    def _redecode(self) -> None:
        assert self._utt_start is not None
        words = self._decode(self._utt_start, self._buf_end)
        self._last_decode_at = self._buf_end
        self.agreement.update(words)
        self._emit(False)

    def _finalize(self, end: int) -> None:
        """Endpoint (or end of input): decode the whole utterance once more and commit it."""
        assert self._utt_start is not None
        end = max(end, self._utt_start)
        words = self._decode(self._utt_start, end) if end > self._utt_start else []
        self.agreement.finalize(words)
        text = self.agreement.stable_text
        if text or self._last_caption is not None:
            self._emit(True)
        if text:
            self.utterances.append(text)
            self.stats.utterances += 1
        self._utt_index += 1 if (text or self._last_caption is not None) else 0
        self.agreement.reset()
        self._last_caption = None
        self._utt_start = None
        self._drop_before(end)

    def _cut(self) -> None:
        """Bound the buffer: decode its head up to the quietest frame in the stable region, commit, drop."""
        assert self._utt_start is not None
        start, end = self._utt_start, self._buf_end
        span = end - start
        hyp = len(self.agreement.stable) - self.agreement.frozen + len(self.agreement.volatile)
        stable_frac = (len(self.agreement.stable) - self.agreement.frozen) / hyp if hyp else 0.0
        lo = start + 2 * SAMPLE_RATE
        hi = start + int(span * stable_frac)
        if hi - lo < 2 * SAMPLE_RATE:  # little is stable: search the middle of the buffer instead
            lo, hi = start + span // 2, end - SAMPLE_RATE
        cut = self._quietest(lo, hi)
        segment = self._decode(start, cut, prompt=False)
        self.agreement.cut(segment)
        self.stats.cuts += 1
        self._emit(False)
        self._utt_start = cut
        self._last_decode_at = max(self._last_decode_at, cut)
        self._drop_before(cut)

    def _quietest(self, lo: int, hi: int) -> int:
        """Middle of the lowest-scoring frame (3-frame average) in [lo, hi); the latest on ties."""
        first = self._ep.frame_index - len(self._probs)
        k0, k1 = max(lo // FRAME, first + 1), min(hi // FRAME, self._ep.frame_index - 1)
        if k1 <= k0:
            return (lo + hi) // 2
        p = np.asarray(self._probs, dtype=np.float32)
        smooth = np.convolve(p, np.ones(3, dtype=np.float32) / 3, mode="same")
        window = smooth[k0 - first : k1 - first]
        k = k0 + (len(window) - 1 - int(np.argmin(window[::-1])))
        return k * FRAME + FRAME // 2


def open_asr_streamer(
    model: str | None = None,
    language: str = "en",
    agreement: int = DEFAULT_AGREEMENT,
    step_ms: int = DEFAULT_STEP_MS,
    *,
    endpoint_ms: float = DEFAULT_ENDPOINT_MS,
    lockstep: bool = False,
    max_buffer_s: float = 20.0,
    max_pending_s: float = 10.0,
    offline: bool | None = None,
    threads: int | None = None,
) -> ASRStreamer:
    """The library entry point: resolve the models by name and start a streamer.

    `threads`: the ASR model's intra-op threads (None: the session policy's default).
    """
    if language not in ("en", "english"):
        raise UsageError(f"language {language!r} is not supported by Moonshine tiny (English only)")
    asr, vad = load_asr(model, offline=offline, threads=threads)
    return ASRStreamer(
        asr, vad, agreement=agreement, step_ms=step_ms, vad_config=VADConfig(endpoint_ms=endpoint_ms),
        max_buffer_s=max_buffer_s, lockstep=lockstep, max_pending_s=max_pending_s,
    )
