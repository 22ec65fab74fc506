"""Push-based streaming TTS: text deltas in, audio chunks out, while more text arrives.

Why a producer that runs ahead: the caller keeps sending text (from an LLM
or a pipe) and keeps playing audio; while block k plays, block k+1 or the
next sentence is being computed. It runs in two stages (`voxcli.tts.producer`):
a front stage phonemizes and encodes sentence k+1 while the decoder vocodes
sentence k. Queues are bounded (audio is the memory that matters), every
wait has a timeout and checks the cancel flag, and `cancel()` ends the output
at once with one `cancelled` sentinel while the stages stop after their
current model call.

    s = open_tts_streamer()
    s.send("Hello "); s.send("world. More text"); s.finish()
    for chunk in s.output: ...          # AudioChunk ..., then one final/cancelled sentinel
    s2 = open_tts_streamer(); s2.send(whole_text, final=True)   # known up front: whole sentences

Text is bounded too (issue 18: `speak -` fed endless text): the text not yet
synthesized is kept under `max_pending_chars`, and a sender over it waits
(`send(block=True)`, the default) or gets a BufferError (`block=False`).
Text that stalls mid-clause is spoken after `max_buffer_flush_ms`
(`voxcli.tts.intake`).
"""
from __future__ import annotations

import inspect
import threading
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Callable, Iterator, Protocol

import numpy as np

from voxcli.audio.pcm import sanitize
from voxcli.config import DEFAULTS
from voxcli.errors import ModelNotFoundError
from voxcli.events import AudioChunk, StreamStats
from voxcli.tts.blocks import BlockScheduler
from voxcli.tts.chunker import ChunkerConfig
from voxcli.tts.intake import TextIntake
from voxcli.tts.normalize import normalize_text, speakable
from voxcli.tts.outbox import Cancelled, Outbox
from voxcli.tts.playback import rtf
from voxcli.tts.producer import Decoder, Sentences, prepared, run_front


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
    max_buffer_flush_ms: float = DEFAULTS["tts.max_buffer_flush_ms"]
    """Speak text that waited this long without a boundary (at least `chunker.flush_min_words`
    words, cut where no word, number or abbreviation breaks); 0 = only at boundaries.

    1500 ms: above the p99 (1,477 ms) of how long on-device LLM replies wait for a
    boundary while TTS runs (benchmarks/bench_tts.py --flush: 6 replies, 29 deltas/s,
    2 loaded cores); 1000 ms cut 6 pieces of those normal replies mid-sentence, 2000 ms 1."""
    front_ahead: int = 2
    """Sentences the front stage may prepare ahead of the decoder (0: one thread, the front
    part of a sentence after the last block of the one before)."""
    front_hold_s: float = 0.5
    """The front stage runs beside the decoder only while this much audio is queued ahead
    of the player (or the decoder is idle): it never slows a block the player waits for."""
    blocks: Any = None
    """This stream's block knobs (a voice `StreamConfig`: first_frames, frames, lookback,
    lookahead, overlap; build one with `voxcli.tts.profile.knobs_config`); None: the voice's.
    When given, its first_frames and frames size the blocks instead of the two fields above."""


class TTSStreamer:
    """Streaming synthesis of text that arrives in pieces. Use `open_tts_streamer()`."""

    def __init__(self, voice: "Voice | VoiceEngine", config: StreamerConfig | None = None,
                 *, clock: Callable[[], float] = time.perf_counter) -> None:
        self.voice = voice if isinstance(voice, Voice) else Voice(voice)
        self.config = cfg = config or StreamerConfig()
        self.sample_rate = self.voice.sample_rate
        self._engine = _with_blocks(self.voice.engine, cfg.blocks)
        self._now = clock
        self._cancel = threading.Event()  # cancel() was called
        self._halt = threading.Event()  # the stages stop: cancelled, or one of them failed
        self._intake = TextIntake(cfg.chunker, max_pending_chars=cfg.max_pending_chars,
                                  flush_ms=cfg.max_buffer_flush_ms, clock=clock)
        self._out = Outbox(cfg.max_queued_chunks)
        vcfg = getattr(self._engine, "config", None)
        hop = getattr(self._engine, "hop_length", 256)
        knobs = cfg.blocks or cfg  # the stream's own knobs size the blocks, else this config's
        scheduler = BlockScheduler(
            first_frames=knobs.first_frames or getattr(vcfg, "first_frames", 16),
            max_frames=getattr(knobs, "frames", None) or cfg.max_frames or getattr(vcfg, "frames", 64),
            frame_s=hop / float(self.sample_rate),
            safety=cfg.safety,
            context=getattr(vcfg, "lookback", 0) + getattr(vcfg, "lookahead", 0),
        )
        self._decoder = Decoder(self._engine, scheduler, self._out, self._halt, self._elapsed,
                                self.sample_rate, clock)
        self._spoken = [0]
        self._front: threading.Thread | None = None
        self._output = self._iterate()
        self._thread = threading.Thread(target=self._run, name="voxcli-tts", daemon=True)
        self._thread.start()

    # -- caller side -----------------------------------------------------------------

    def send(self, delta: str, *, block: bool = True, final: bool = False) -> None:
        """Add text. Ignored after cancel(). `final=True`: this is the last text (then `finish()`).

        Text sent whole with `final=True` (the first and last send) is known up
        front: its sentences are spoken whole, never cut after a few words or at
        a clause (the voice decodes inside the sentence in blocks for the early
        first audio). Incremental text (several sends: an LLM, a pipe) starts
        with a short first piece instead, since the rest of its sentence may not
        have been written yet.

        Back-pressure: while `max_pending_chars` wait to be synthesized, `block=True`
        waits (checking cancel every POLL_S), `block=False` raises BufferError. With
        room the delta is taken whole: at most budget + one delta is held, and one
        big send to a fresh streamer never waits (send, then read output: no deadlock).
        """
        self._intake.send(delta, block=block, cancel=self._cancel, alive=self._thread.is_alive, final=final)

    def finish(self) -> None:
        """No more text: speak what is buffered, then end the output with the final sentinel."""
        if not self._cancel.is_set():
            self._intake.finish()

    def cancel(self) -> None:
        """Drop pending text and queued audio; the output ends now with one `cancelled` chunk."""
        if self._cancel.is_set():
            return
        self._cancel.set()
        self._halt.set()
        self._intake.clear()
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
        return self._intake.pending_chars

    @property
    def text_chars(self) -> int:
        """Characters received so far."""
        return self._intake.text_chars

    @property
    def spoken_chars(self) -> int:
        """Characters of speakable text synthesized so far (0 for whitespace/emoji-only input)."""
        return self._spoken[0]

    @property
    def t0(self) -> float | None:
        """Clock time of the first send() or finish(): chunks' `t_emit` count from it."""
        return self._intake.t_first

    @property
    def flushes(self) -> int:
        """Pieces spoken because their text waited `max_buffer_flush_ms` without a boundary."""
        return self._intake.flushes

    def join(self, timeout: float | None = None) -> bool:
        """Wait for the producer threads to end; True if they did."""
        deadline = None if timeout is None else time.monotonic() + timeout
        for thread in (self._thread, self._front):
            if thread is not None:
                thread.join(None if deadline is None else max(0.0, deadline - time.monotonic()))
        return not any(t is not None and t.is_alive() for t in (self._thread, self._front))

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
        t0 = self._intake.t_first
        return self._now() - t0 if t0 is not None else 0.0

    def _sentinel(self, kind: str, chunks: int | None = None, samples: int = 0, synth_s: float = 0.0) -> AudioChunk:
        """The end of the output; `chunks`/`samples`/`synth_s`: what the consumer got (default: all made)."""
        d = self._decoder
        if chunks is None:
            chunks, samples, synth_s = d.chunks, d.audio_samples, d.synth_s
        audio_s = samples / float(self.sample_rate)
        stats = StreamStats(ttfa_s=d.ttfa if chunks else None, rtf=rtf(synth_s, audio_s), audio_s=audio_s,
                            total_s=self._elapsed(), chunks=chunks, underruns=d.playback.underruns,
                            underrun_s=d.playback.underrun_s)
        return AudioChunk(np.zeros(0, np.float32), self.sample_rate, chunks, is_final=True,
                          kind=kind, t_emit=stats.total_s, stats=stats)  # type: ignore[arg-type]

    def _cancelled_sentinel(self) -> AudioChunk:
        # Dropped audio never reached the consumer: the stats describe what it received.
        return self._sentinel("cancelled", *self._out.taken)

    def _run(self) -> None:
        """The decoder's thread (and the front stage's, when `front_ahead` is 0)."""
        try:
            items = prepared(self._intake, self._engine, self._halt, self._spoken, self._now)
            first = next(items, None) if self.config.front_ahead > 0 else None
            if first is not None:  # the first sentence in this thread, then the front stage takes over
                hold_s = self.config.front_hold_s
                sentences = Sentences(self.config.front_ahead, lambda: self._decoder.buffered() >= hold_s)
                self._decoder.on_audio = sentences.poke
                self._front = threading.Thread(target=run_front, args=(items, sentences, self._halt),
                                               name="voxcli-tts-front", daemon=True)
                self._front.start()
                self._decoder.speak(*first)
                items = sentences.drain(self._halt)
            for p, prepare_s in items:
                self._decoder.speak(p, prepare_s)
            self._out.close(self._sentinel("final"))
        except Cancelled:
            pass  # cancel() already queued the sentinel
        except BaseException as e:  # noqa: BLE001 - hand it to the consumer thread
            self._halt.set()  # the front stage stops too
            self._out.close(e)


class Voice:
    """A loaded voice: one-shot `stream(text)` / `synthesize(text)`, or `open_stream()`."""

    def __init__(self, engine: VoiceEngine, name: str | None = None) -> None:
        self.engine = engine
        self.name = name or getattr(engine, "name", "voice")
        self.sample_rate = int(engine.sample_rate)
        self._synthesize_takes_normalize = "normalize" in inspect.signature(engine.synthesize).parameters

    def open_stream(self, config: StreamerConfig | None = None, *,
                    max_buffer_flush_ms: float | None = None) -> TTSStreamer:
        """A push-based streamer on this voice; `max_buffer_flush_ms` overrides the config's."""
        return TTSStreamer(self, _with_flush(config, max_buffer_flush_ms))

    def stream(self, text: str, config: StreamerConfig | None = None) -> Iterator[AudioChunk]:
        """Chunks of `text` as soon as each is ready (ends with the final sentinel)."""
        streamer = TTSStreamer(self, config)
        try:
            # a fresh streamer takes one delta whole, never raises; known text: whole sentences
            streamer.send(text, block=False, final=True)
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
                      config: StreamerConfig | None = None, *,
                      max_buffer_flush_ms: float | None = None) -> TTSStreamer:
    """A push-based streamer: `send()` text, `finish()` or `cancel()`, iterate `output`.

    `max_buffer_flush_ms`: speak text that waited this long without a sentence or
    clause boundary (0 = off; None = the config's, `tts.max_buffer_flush_ms` by default).
    """
    if voice is None or isinstance(voice, str):
        voice = load_voice(voice)
    return TTSStreamer(voice, _with_flush(config, max_buffer_flush_ms))


def _with_blocks(engine: Any, blocks: Any) -> Any:
    """The engine as this stream sees it: a shallow copy whose `config` is `blocks` (sessions shared)."""
    if blocks is None:
        return engine
    import copy

    view = copy.copy(engine)
    view.config = blocks
    return view


def _with_flush(config: StreamerConfig | None, flush_ms: float | None) -> StreamerConfig | None:
    if flush_ms is None:
        return config
    if flush_ms < 0:
        raise ValueError(f"max_buffer_flush_ms must be >= 0 (0 = off), not {flush_ms}")
    return replace(config or StreamerConfig(), max_buffer_flush_ms=float(flush_ms))
