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
"""
from __future__ import annotations

import threading
import time
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator, Protocol

import numpy as np

from voxcli.audio.pcm import sanitize
from voxcli.tts.blocks import BlockScheduler
from voxcli.bench.metrics import PlaybackClock, rtf
from voxcli.tts.chunker import ChunkerConfig, TextChunker, speakable
from voxcli.errors import ModelNotFoundError
from voxcli.events import AudioChunk, StreamStats

_POLL_S = 0.05  # every wait wakes up this often to check the cancel flag


class VoiceEngine(Protocol):
    """What the streamer needs from a voice (voxcli.runtimes.piper.voice.PiperVoice)."""

    sample_rate: int
    hop_length: int
    config: Any  # StreamConfig: first_frames, frames, ...

    def prepare(self, text: str) -> list[Any]: ...
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


class _Stop(Exception):
    """Internal: the stream was cancelled; unwind the producer."""


class _Outbox:
    """Bounded audio queue ending in exactly one sentinel (or an error)."""

    def __init__(self, maxsize: int) -> None:
        self._items: deque[Any] = deque()
        self._cond = threading.Condition()
        self._maxsize = maxsize
        self._closed = False  # a sentinel (or error) has been queued
        self._delivered = False  # ... and the consumer took it
        self.taken = (0, 0, 0.0)  # audio chunks, samples and synth seconds the consumer took

    def put(self, chunk: AudioChunk, cancelled: threading.Event) -> bool:
        with self._cond:
            while len(self._items) >= self._maxsize and not (self._closed or cancelled.is_set()):
                self._cond.wait(_POLL_S)
            if self._closed or cancelled.is_set():
                return False
            self._items.append(chunk)
            self._cond.notify_all()
            return True

    def close(self, item: Any, *, replace: bool = False) -> bool:
        """Queue the end of the stream once; `replace` drops queued audio (and an unread final).

        `item` may be a callable, called under the lock (a sentinel whose stats
        count exactly the chunks the consumer received).
        """
        with self._cond:
            if self._delivered or (self._closed and not replace):
                return False
            if replace:
                self._items.clear()
            self._items.append(item() if callable(item) else item)
            self._closed = True
            self._cond.notify_all()
            return True

    def get(self) -> Any | None:
        with self._cond:
            if not self._items:
                self._cond.wait(_POLL_S)
            if not self._items:
                return None
            item = self._items.popleft()
            if not isinstance(item, AudioChunk) or item.kind != "audio":
                self._delivered = True
            else:
                n, samples, synth = self.taken
                self.taken = (n + 1, samples + item.audio.size, synth + item.synth_s)
            self._cond.notify_all()
            return item


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
        self._lock = threading.Condition()
        self._cancel = threading.Event()
        self._finished = False
        self._t0: float | None = None
        self._out = _Outbox(self.config.max_queued_chunks)
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

    def send(self, delta: str) -> None:
        """Add text; never blocks on the consumer. Ignored after cancel()."""
        with self._lock:
            if self._cancel.is_set():
                return
            if self._finished:
                raise RuntimeError("send() after finish()")
            if self._t0 is None:
                self._t0 = self._now()
            self._text_chars += len(delta)
            self._texts.extend(self._chunker.feed(delta))
            self._lock.notify_all()

    def finish(self) -> None:
        """No more text: speak what is buffered, then end the output with the final sentinel."""
        with self._lock:
            if self._finished or self._cancel.is_set():
                return
            if self._t0 is None:
                self._t0 = self._now()
            self._texts.extend(self._chunker.finish())
            self._finished = True
            self._lock.notify_all()

    def cancel(self) -> None:
        """Drop pending text and queued audio; the output ends now with one `cancelled` chunk."""
        with self._lock:
            if self._cancel.is_set():
                return
            self._cancel.set()
            self._texts.clear()
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

    def _sentinel(self, kind: str) -> AudioChunk:
        audio_s = self._audio_samples / float(self.sample_rate)
        stats = StreamStats(
            ttfa_s=self._ttfa,
            rtf=rtf(self._synth_s, audio_s),
            audio_s=audio_s,
            total_s=self._elapsed(),
            chunks=self._chunks,
            underruns=self._playback.underruns,
            underrun_s=self._playback.underrun_s,
        )
        return AudioChunk(np.zeros(0, np.float32), self.sample_rate, self._chunks, is_final=True,
                          kind=kind, t_emit=stats.total_s, stats=stats)  # type: ignore[arg-type]

    def _cancelled_sentinel(self) -> AudioChunk:
        # Dropped audio never reached the consumer: the stats describe what it received.
        chunks, samples, synth_s = self._out.taken
        audio_s = samples / float(self.sample_rate)
        stats = StreamStats(
            ttfa_s=self._ttfa if chunks else None,
            rtf=rtf(synth_s, audio_s),
            audio_s=audio_s,
            total_s=self._elapsed(),
            chunks=chunks,
            underruns=self._playback.underruns,
            underrun_s=self._playback.underrun_s,
        )
        return AudioChunk(np.zeros(0, np.float32), self.sample_rate, chunks, is_final=True,
                          kind="cancelled", t_emit=stats.total_s, stats=stats)

    def _next_text(self) -> str | None:
        with self._lock:
            while not self._texts:
                if self._cancel.is_set():
                    raise _Stop
                if self._finished:
                    return None
                self._lock.wait(_POLL_S)
            return self._texts.popleft()

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
        clean = speakable(text)
        if not clean:
            return
        t = self._now()
        prepared = self._engine.prepare(clean)
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

    def open_stream(self, config: StreamerConfig | None = None) -> TTSStreamer:
        return TTSStreamer(self, config)

    def stream(self, text: str, config: StreamerConfig | None = None) -> Iterator[AudioChunk]:
        """Chunks of `text` as soon as each is ready (ends with the final sentinel)."""
        streamer = TTSStreamer(self, config)
        try:
            streamer.send(text)
            streamer.finish()
            yield from streamer.output
        finally:
            streamer.close()  # a no-op once the sentinel was delivered

    def synthesize(self, text: str) -> np.ndarray:
        """The whole text at once (the --no-stream baseline); empty if nothing is speakable."""
        clean = speakable(text)
        if not clean:
            return np.zeros(0, np.float32)
        audio, _ = sanitize(np.asarray(self.engine.synthesize(clean), np.float32).reshape(-1))
        return audio


_VOICES: dict[Path, Voice] = {}
_VOICES_LOCK = threading.Lock()


def load_voice(name: str | None = None, *, offline: bool | None = None) -> Voice:
    """Resolve a TTS model by name (default voice if None) and load it once per process."""
    from voxcli.hub.registry import resolve_model

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

            engine = PiperVoice.load(onnx_path, config_path, derived_dir=bundle.derived_dir)
            voice = _VOICES[onnx_path] = Voice(engine, bundle.name)
        return voice


def open_tts_streamer(voice: "str | Voice | VoiceEngine | None" = None,
                      config: StreamerConfig | None = None) -> TTSStreamer:
    """A push-based streamer: `send()` text, `finish()` or `cancel()`, iterate `output`."""
    if voice is None or isinstance(voice, str):
        voice = load_voice(voice)
    return TTSStreamer(voice, config)
