"""Push-based streaming TTS: text deltas in, audio chunks out, while more text arrives.

Why one producer thread: the caller keeps sending text (from an LLM or a pipe)
and keeps playing audio; the producer runs ahead of playback, so while block k
plays, block k+1 or the next sentence is being phonemized, encoded and
vocoded. Queues are bounded (audio is the memory that matters), every wait has
a timeout and checks the cancel flag, and `cancel()` ends the output at once
with one `cancelled` sentinel while the producer stops after its current model
call.

    s = open_tts_streamer()
    s.send("Hello "); s.send("world. More text"); s.finish()
    for chunk in s.output: ...          # AudioChunk ..., then one final/cancelled sentinel

Text is bounded too (issue 18: `speak -` fed endless text): the text not yet
synthesized is kept under `max_pending_chars`, and a sender over it waits
(`send(block=True)`, the default) or gets a BufferError (`block=False`).
"""
from __future__ import annotations

import inspect
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator, Protocol

import numpy as np

from voxcli.audio.pcm import sanitize
from voxcli.errors import ModelNotFoundError
from voxcli.events import AudioChunk, StreamStats
from voxcli.tts.blocks import BlockScheduler
from voxcli.tts.chunker import ChunkerConfig, TextChunker
from voxcli.tts.normalize import normalize_text, speakable
from voxcli.tts.outbox import POLL_S, Outbox
from voxcli.tts.playback import PlaybackClock, rtf

_SLICE = 4096  # characters handed to the chunker at a time (it re-scans its buffer: keep it short)


class VoiceEngine(Protocol):
    """What the streamer needs from a voice (voxcli.runtimes.piper.voice.PiperVoice)."""

    sample_rate: int
    hop_length: int
    config: Any  # StreamConfig: first_frames, frames, ...

    def prepare(self, text: str, normalize: bool | None = None) -> list[Any]: ...
    def blocks(self, p: Any, sizes: Callable[[int], int] | None = None) -> Iterator[np.ndarray]: ...
    def synthesize(self, text: str) -> np.ndarray: ...


@dataclass(frozen=True)
class StreamerConfig:
    """Knobs of a TTSStreamer; the defaults are the measured good ones."""

    chunker: ChunkerConfig = field(default_factory=ChunkerConfig)
    max_queued_chunks: int = 8
    """Audio chunks the producer may run ahead of the consumer (bounded memory)."""
    first_frames: int | None = 8
    """First block of the stream in latent frames (None: the voice's StreamConfig.first_frames).

    8 frames (93 ms) instead of the voice's 16 took warm TTFA p50 from 61 to 46 ms
    with 0 underruns: the scheduler grows the following blocks from measured RTF."""
    max_frames: int | None = None
    """Largest block (None: the voice's StreamConfig.frames)."""
    safety: float = 2.0
    """Spend at most 1/safety of the buffered audio on computing the next block."""
    max_pending_chars: int = 16384
    """Text received but not yet synthesized before `send()` pushes back (about 15 min of speech)."""


class _Stop(Exception):
    """Internal: the stream was cancelled; unwind the producer."""


class TTSStreamer:
    """Streaming synthesis of text that arrives in pieces. Use `open_tts_streamer()`."""

    def __init__(self, voice: "Voice | VoiceEngine", config: StreamerConfig | None = None,
                 *, clock: Callable[[], float] = time.perf_counter) -> None:
        self.voice = voice if isinstance(voice, Voice) else Voice(voice)
        self.config = config or StreamerConfig()
        self.sample_rate = self.voice.sample_rate
        self._engine = self.voice.engine
        self._now = clock
        self._chunker = TextChunker(self.config.chunker)
        self._texts: deque[str] = deque()
        self._texts_chars = 0
        self._lock = threading.Condition()
        self._cancel = threading.Event()
        self._finished = False
        self._t0: float | None = None
        self._out = Outbox(self.config.max_queued_chunks)
        self._playback = PlaybackClock()
        vcfg = getattr(self._engine, "config", None)
        hop = getattr(self._engine, "hop_length", 256)
        self._scheduler = BlockScheduler(
            first_frames=self.config.first_frames or getattr(vcfg, "first_frames", 16),
            max_frames=self.config.max_frames or getattr(vcfg, "frames", 64),
            frame_s=hop / float(self.sample_rate),
            safety=self.config.safety,
        )
        self._ttfa: float | None = None
        self._synth_s = 0.0
        self._audio_samples = 0
        self._chunks = 0
        self._text_chars = 0
        self._spoken_chars = 0
        self._output = self._iterate()
        self._thread = threading.Thread(target=self._run, name="voxcli-tts", daemon=True)
        self._thread.start()

    # -- caller side -----------------------------------------------------------------

    def send(self, delta: str, *, block: bool = True) -> None:
        """Add text. Ignored after cancel().

        Back-pressure: while `max_pending_chars` wait to be synthesized, `block=True`
        waits (checking cancel every POLL_S), `block=False` raises BufferError. With
        room the delta is taken whole: at most budget + one delta is held, and one
        big send to a fresh streamer never waits (send, then read output: no deadlock).
        """
        with self._lock:
            while self.pending_chars >= self.config.max_pending_chars and not self._cancel.is_set():
                if not block:
                    raise BufferError(f"{self.pending_chars} characters wait to be spoken: send(block=True) waits")
                if not self._thread.is_alive():
                    break  # the producer failed: its error ends the output
                self._lock.wait(POLL_S)
            if self._cancel.is_set():
                return
            if self._finished:
                raise RuntimeError("send() after finish()")
            if self._t0 is None:
                self._t0 = self._now()
            self._text_chars += len(delta)
            for i in range(0, len(delta), _SLICE):
                self._queue(self._chunker.feed(delta[i : i + _SLICE]))
            self._lock.notify_all()

    def _queue(self, texts: list[str]) -> None:
        self._texts.extend(texts)
        self._texts_chars += sum(map(len, texts))

    def finish(self) -> None:
        """No more text: speak what is buffered, then end the output with the final sentinel."""
        with self._lock:
            if self._finished or self._cancel.is_set():
                return
            if self._t0 is None:
                self._t0 = self._now()
            self._queue(self._chunker.finish())
            self._finished = True
            self._lock.notify_all()

    def cancel(self) -> None:
        """Drop pending text and queued audio; the output ends now with one `cancelled` chunk."""
        with self._lock:
            if self._cancel.is_set():
                return
            self._cancel.set()
            self._texts.clear()
            self._texts_chars = 0
            self._lock.notify_all()
        self._out.close(self._cancelled_sentinel, replace=True)

    @property
    def output(self) -> Iterator[AudioChunk]:
        """AudioChunk events, ending with exactly one `final` or `cancelled` sentinel."""
        return self._output

    def __iter__(self) -> Iterator[AudioChunk]:
        return self._output

    @property
    def cancelled(self) -> bool:
        return self._cancel.is_set()

    @property
    def pending_chars(self) -> int:
        """Characters received but not yet taken by the producer (bounded: see `send`)."""
        return len(self._chunker.pending) + self._texts_chars

    @property
    def text_chars(self) -> int:
        """Characters received so far."""
        return self._text_chars

    @property
    def spoken_chars(self) -> int:
        """Characters of speakable text synthesized so far (0 for whitespace/emoji-only input)."""
        return self._spoken_chars

    def join(self, timeout: float | None = None) -> bool:
        """Wait for the producer thread to end; True if it did."""
        self._thread.join(timeout)
        return not self._thread.is_alive()

    def close(self, timeout: float = 10.0) -> None:
        """Cancel unless the stream already ended, and wait for the producer to stop.

        Waiting matters at process exit: a daemon thread still inside an
        onnxruntime call while the interpreter shuts down aborts the process.
        """
        self.cancel()
        self.join(timeout)

    def __enter__(self) -> "TTSStreamer":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _iterate(self) -> Iterator[AudioChunk]:
        while True:
            item = self._out.get()
            if item is None:
                continue
            if isinstance(item, BaseException):
                raise item
            yield item
            if item.kind != "audio":
                return

    # -- producer --------------------------------------------------------------------

    def _elapsed(self) -> float:
        return self._now() - (self._t0 if self._t0 is not None else self._now())

    def _sentinel(self, kind: str, chunks: int | None = None, samples: int = 0, synth_s: float = 0.0) -> AudioChunk:
        """The end of the output; `chunks`/`samples`/`synth_s`: what the consumer got (default: all made)."""
        if chunks is None:
            chunks, samples, synth_s = self._chunks, self._audio_samples, self._synth_s
        audio_s = samples / float(self.sample_rate)
        stats = StreamStats(ttfa_s=self._ttfa if chunks else None, rtf=rtf(synth_s, audio_s), audio_s=audio_s,
                            total_s=self._elapsed(), chunks=chunks, underruns=self._playback.underruns,
                            underrun_s=self._playback.underrun_s)
        return AudioChunk(np.zeros(0, np.float32), self.sample_rate, chunks, is_final=True,
                          kind=kind, t_emit=stats.total_s, stats=stats)  # type: ignore[arg-type]

    def _cancelled_sentinel(self) -> AudioChunk:
        # Dropped audio never reached the consumer: the stats describe what it received.
        return self._sentinel("cancelled", *self._out.taken)

    def _next_text(self) -> str | None:
        with self._lock:
            while not self._texts:
                if self._cancel.is_set():
                    raise _Stop
                if self._finished:
                    return None
                self._lock.wait(POLL_S)
            text = self._texts.popleft()
            self._texts_chars -= len(text)
            self._lock.notify_all()  # room for a waiting sender
            return text

    def _run(self) -> None:
        try:
            while (text := self._next_text()) is not None:
                self._speak(text)
            self._out.close(self._sentinel("final"))
        except _Stop:
            pass  # cancel() already queued the sentinel
        except BaseException as e:  # noqa: BLE001 - hand it to the consumer thread
            self._out.close(e)

    def _check(self) -> None:
        if self._cancel.is_set():
            raise _Stop

    def _speak(self, text: str) -> None:
        clean = speakable(text)  # the one normalization pass: the voice's own is switched off below
        if not clean:
            return
        t = self._now()
        prepared = self._engine.prepare(clean, normalize=False)
        prepare_s = self._now() - t
        self._synth_s += prepare_s
        self._spoken_chars += len(clean)
        shares = [getattr(p, "prepare_s", 0.0) or 0.0 for p in prepared]
        scale = prepare_s / sum(shares) if sum(shares) > 0 else 0.0
        for i, p in enumerate(prepared):
            self._check()
            # Attribute the wall time of prepare() to each sentence's first block, in proportion.
            prepare_s = shares[i] * scale if scale else (prepare_s if i == 0 else 0.0)
            if getattr(p, "latent", None) is None and getattr(p, "audio", None) is not None:
                self._emit(np.asarray(p.audio, np.float32).reshape(-1), p.text, prepare_s)  # voice cannot stream
                prepare_s = 0.0
                continue
            blocks = self._engine.blocks(p, self._block_size)
            first = True
            while True:
                self._check()
                t = self._now()
                block = next(blocks, None)
                dt = self._now() - t
                if block is None:
                    break
                self._synth_s += dt
                block = np.asarray(block, np.float32).reshape(-1)
                self._scheduler.observe(round(block.size / self._engine.hop_length), dt)
                self._emit(block, p.text if first else "", dt + prepare_s)
                first, prepare_s = False, 0.0

    def _block_size(self, k: int) -> int:
        # Sizes are asked for lazily: spend the audio already queued ahead of the player.
        return self._scheduler.next_frames(self._playback.buffered(self._elapsed()))

    def _emit(self, audio: np.ndarray, text: str, synth_s: float) -> None:
        if audio.size == 0:
            return
        audio, _ = sanitize(audio)
        t = self._elapsed()
        if self._ttfa is None:
            self._ttfa = t
        self._playback.add(t, audio.size / float(self.sample_rate))
        chunk = AudioChunk(audio, self.sample_rate, self._chunks, text=text, t_emit=t, synth_s=synth_s)
        self._audio_samples += audio.size
        self._chunks += 1
        if not self._out.put(chunk, self._cancel):
            raise _Stop


class Voice:
    """A loaded voice: one-shot `stream(text)` / `synthesize(text)`, or `open_stream()`."""

    def __init__(self, engine: VoiceEngine, name: str | None = None) -> None:
        self.engine = engine
        self.name = name or getattr(engine, "name", "voice")
        self.sample_rate = int(engine.sample_rate)
        self._synthesize_takes_normalize = "normalize" in inspect.signature(engine.synthesize).parameters

    def open_stream(self, config: StreamerConfig | None = None) -> TTSStreamer:
        return TTSStreamer(self, config)

    def stream(self, text: str, config: StreamerConfig | None = None) -> Iterator[AudioChunk]:
        """Chunks of `text` as soon as each is ready (ends with the final sentinel)."""
        streamer = TTSStreamer(self, config)
        try:
            streamer.send(text, block=False)  # a fresh streamer takes one delta whole, never raises
            streamer.finish()
            yield from streamer.output
        finally:
            streamer.close()  # a no-op once the sentinel was delivered

    def synthesize(self, text: str) -> np.ndarray:
        """The whole text at once (the --no-stream baseline); empty if nothing is speakable."""
        clean = speakable(text)
        if not clean:
            return np.zeros(0, np.float32)
        if self._synthesize_takes_normalize:  # already normalized: do not strip and rewrite twice
            audio = self.engine.synthesize(clean, normalize=False)  # type: ignore[call-arg]
        else:
            audio = self.engine.synthesize(clean)
        audio, _ = sanitize(np.asarray(audio, np.float32).reshape(-1))
        return audio


_VOICES: dict[Path, Voice] = {}
_VOICES_LOCK = threading.Lock()


def load_voice(name: str | None = None, *, offline: bool | None = None, threads: int | None = None) -> Voice:
    """Resolve a TTS model by name (default voice if None) and load it once per process.

    `threads` is the voice's share of the cores (chat splits them between its
    models); None = the session policy's default. The first load of a voice wins.
    """
    from voxcli.hub.resolve import resolve_model

    bundle = resolve_model(name, kind="tts", offline=offline)
    onnx = [p for p in bundle.find(".onnx")]
    if not onnx:
        raise ModelNotFoundError(f"voice {bundle.name!r} has no .onnx file in {bundle.path}")
    onnx_path = onnx[0]
    config_path = onnx_path.with_name(onnx_path.name + ".json")
    if not config_path.exists():
        raise ModelNotFoundError(f"voice {bundle.name!r} has no {config_path.name}")
    with _VOICES_LOCK:
        voice = _VOICES.get(onnx_path)
        if voice is None:
            from voxcli.runtimes.piper.voice import PiperVoice

            # The voice normalizes text given to it directly; the streamer normalizes once itself.
            engine = PiperVoice.load(onnx_path, config_path, derived_dir=bundle.derived_dir,
                                     threads=threads, normalizer=normalize_text)
            voice = _VOICES[onnx_path] = Voice(engine, bundle.name)
        return voice


def open_tts_streamer(voice: "str | Voice | VoiceEngine | None" = None,
                      config: StreamerConfig | None = None) -> TTSStreamer:
    """A push-based streamer: `send()` text, `finish()` or `cancel()`, iterate `output`."""
    if voice is None or isinstance(voice, str):
        voice = load_voice(voice)
    return TTSStreamer(voice, config)
