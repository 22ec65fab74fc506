"""The TTS producer in two stages: the front part of sentence k+1 runs while sentence k is decoded.

Why two stages (issue 13 item 5): with one thread, the front part of the next
sentence (phonemize, text encoder, durations, flow) started only after the
last decoder block of the current one, so at every sentence boundary the
audio already queued had to cover front(k+1) + first block(k+1), and a long
next sentence opened a gap. Now a front stage thread prepares up to `ahead`
sentences into a bounded hand-off (`Sentences`) while the decoder thread
vocodes; at a boundary the decoder pays for one small block only.

The stream's first sentence is prepared in the decoder's own thread (no
hand-off between threads before the first audio: under load a thread
wake-up costs milliseconds), then the front stage takes over the text.
It competes with the decoder for the cores only while the
player has at least `hold_s` of audio queued (or the decoder has nothing to
do): a block the player is waiting for, like the stream's first, is never
slowed by the next sentence's front part. Measured before this rule (2
loaded cores, bench paragraph, 12 interleaved runs): TTFA the same, but 2
underruns vs 0 with one stage, the second block slowed by the front part
started right after the first audio.

Order is kept (one front thread, one FIFO, one decoder); both stages check
the halt flag between model calls and every wait has a timeout, so
`cancel()` stops them after their current model call.
"""
from __future__ import annotations

import threading
import time
from collections import deque
from typing import Any, Callable, Iterator

import numpy as np

from voxcli.audio.pcm import sanitize
from voxcli.events import AudioChunk
from voxcli.tts.blocks import BlockScheduler
from voxcli.tts.intake import TextIntake
from voxcli.tts.normalize import speakable
from voxcli.tts.outbox import POLL_S, Cancelled, Outbox
from voxcli.tts.playback import PlaybackClock
from voxcli.tts.words import PieceWords, attach

Item = tuple[Any, float]
"""A prepared sentence (the voice's `Prepared`) and the seconds its front part took."""


def prepared(intake: TextIntake, engine: Any, halt: threading.Event, spoken: list[int],
             clock: Callable[[], float] = time.perf_counter) -> Iterator[Item]:
    """Every sentence of the stream, prepared, in order (runs in the thread that iterates it).

    `spoken[0]` counts the speakable characters taken. Only the model work is
    timed: waiting for text is not synthesis. Each sentence gets its words (`p.words`, voxcli.tts.words),
    with spans of the text sent: the chunker's pieces concatenate to exactly that text.
    """
    offset = 0
    while (text := intake.next_text(halt)) is not None:
        clean = speakable(text)  # the one normalization pass: the voice's own is switched off below
        piece_at, offset = offset, offset + len(text)
        if not clean:
            continue
        spoken[0] += len(clean)
        words = PieceWords(text, clean, piece_at)
        step = getattr(engine, "iter_prepare", None) or engine.prepare
        t = clock()
        sentences = iter(step(clean, normalize=False))
        while True:
            p = next(sentences, None)
            dt = clock() - t
            if p is None:
                break
            if halt.is_set():
                raise Cancelled
            attach(p, engine, words.sentence(p.text))
            yield p, dt
            t = clock()  # the consumer's time between sentences is not this stage's


class Sentences:
    """Bounded FIFO of prepared sentences from the front stage to the decoder."""

    def __init__(self, maxsize: int, may_run: Callable[[], bool]) -> None:
        self._may_run = may_run  # enough audio is queued ahead of the player to run beside the decoder
        self._items: deque[Item] = deque()
        self._cond = threading.Condition()
        self._maxsize = max(1, maxsize)
        self._done = False
        self._error: BaseException | None = None
        self._idle = False  # the decoder waits for a sentence

    def put(self, item: Item, halt: threading.Event) -> None:
        with self._cond:
            while len(self._items) >= self._maxsize and not halt.is_set():
                self._cond.wait(POLL_S)
            if halt.is_set():
                raise Cancelled
            self._items.append(item)
            self._cond.notify_all()

    def end(self, error: BaseException | None = None) -> None:
        """The front stage is done (or failed: the decoder re-raises `error` after the queued sentences)."""
        with self._cond:
            self._done, self._error = True, error
            self._cond.notify_all()

    def drain(self, halt: threading.Event) -> Iterator[Item]:
        """The sentences in order until the front stage ends (for the decoder)."""
        while (item := self._get(halt)) is not None:
            yield item

    def _get(self, halt: threading.Event) -> Item | None:
        with self._cond:
            self._idle = True
            self._cond.notify_all()
            try:
                while not self._items:
                    if halt.is_set():
                        raise Cancelled
                    if self._done:
                        if self._error is not None:
                            raise self._error
                        return None
                    self._cond.wait(POLL_S)
                item = self._items.popleft()
                self._cond.notify_all()
                return item
            finally:
                self._idle = False

    def poke(self) -> None:
        """The decoder queued audio: a holding front stage looks again."""
        with self._cond:
            self._cond.notify_all()

    def hold(self, halt: threading.Event) -> None:
        """Front stage: wait until enough audio is queued ahead of the player, or the decoder has nothing to do."""
        with self._cond:
            while not (self._idle and not self._items) and not self._may_run():
                if halt.is_set():
                    raise Cancelled
                self._cond.wait(POLL_S)


def run_front(source: Iterator[Item], sentences: Sentences, halt: threading.Event) -> None:
    """The front stage's thread: prepare sentences ahead of the decoder, in order."""
    try:
        while True:
            sentences.hold(halt)  # before each front part: never beside a block the player waits for
            item = next(source, None)
            if item is None:
                break
            sentences.put(item, halt)
        sentences.end()
    except Cancelled:
        sentences.end()
    except BaseException as e:  # noqa: BLE001 - the decoder hands it to the consumer
        sentences.end(e)


class Decoder:
    """Vocodes prepared sentences block by block into the outbox, with the stream's counters."""

    def __init__(self, engine: Any, scheduler: BlockScheduler, outbox: Outbox, halt: threading.Event,
                 elapsed: Callable[[], float], sample_rate: int, clock: Callable[[], float]) -> None:
        self._engine, self._scheduler, self._out, self._halt = engine, scheduler, outbox, halt
        self._elapsed, self._now, self.sample_rate = elapsed, clock, sample_rate
        self.playback = PlaybackClock()
        self.ttfa: float | None = None
        self.synth_s = 0.0
        self.audio_samples = 0
        self.chunks = 0
        self.on_audio: Callable[[], None] | None = None
        """Called after each chunk was queued."""

    def speak(self, p: Any, prepare_s: float) -> None:
        """One prepared sentence: blocks sized by the scheduler; its front time goes to the first block."""
        self._check()
        timing, base, pos = getattr(p, "words", None), self.audio_samples, 0  # words: stream samples before
        if getattr(p, "latent", None) is None and getattr(p, "audio", None) is not None:
            audio = np.asarray(p.audio, np.float32).reshape(-1)
            words = timing.take(0, audio.size, base, self.sample_rate, last=True) if timing else ()
            self.emit(audio, p.text, prepare_s, words)  # voice cannot stream
            return
        blocks = self._engine.blocks(p, self._block_size)
        first = True
        while True:
            self._check()
            t = self._now()
            block = next(blocks, None)
            dt = self._now() - t
            if block is None:
                return
            block = np.asarray(block, np.float32).reshape(-1)
            self._scheduler.observe(round(block.size / self._engine.hop_length), dt)
            words = timing.take(pos, pos + block.size, base, self.sample_rate) if timing else ()  # words:
            self.emit(block, p.text if first else "", dt + prepare_s, words)
            first, prepare_s, pos = False, 0.0, pos + block.size

    def _check(self) -> None:
        if self._halt.is_set():
            raise Cancelled

    def _block_size(self, k: int) -> int:
        # Sizes are asked for lazily: spend the audio already queued ahead of the player.
        return self._scheduler.next_frames(self.playback.buffered(self._elapsed()))

    def emit(self, audio: np.ndarray, text: str, synth_s: float, words: tuple = ()) -> None:
        if audio.size == 0:
            return
        audio, _ = sanitize(audio)
        t = self._elapsed()
        if self.ttfa is None:
            self.ttfa = t
        self.playback.add(t, audio.size / float(self.sample_rate))
        chunk = AudioChunk(audio, self.sample_rate, self.chunks, text=text, t_emit=t, synth_s=synth_s,
                           words=words)
        self.synth_s += synth_s
        self.audio_samples += audio.size
        self.chunks += 1
        if not self._out.put(chunk, self._halt):
            raise Cancelled
        if self.on_audio is not None:
            self.on_audio()

    def buffered(self) -> float:
        """Seconds of audio queued ahead of the (simulated) player now."""
        return self.playback.buffered(self._elapsed())
