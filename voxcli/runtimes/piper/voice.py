"""Piper (VITS) voice on onnxruntime, vocoded in blocks for intra-sentence streaming.

`prepare()` phonemizes (espeak-ng, like piper-tts) and runs the front part of
the graph (text encoder, duration predictor, prior sampling) up to `z_p`;
`blocks()` then runs the flow (`z_p` -> `z`) and the HiFi-GAN decoder a block
of frames at a time. Both are convolutional along the frames, so a block
decoded with enough context on each side (`flow_context` frames of `z_p` for
the flow, `lookback`/`lookahead` frames of `z` for the decoder) is the whole
decode's audio to within float rounding (>= 110 dB SNR on en_US-joe-medium;
tests/tts/test_split_exact.py holds >= 90 dB). The first audio of a long
sentence exists after the front part plus one small block: the sentence never
has to be cut to get it early. Voices whose graph cannot be split (see
graph_split) fall back to whole-sentence synthesis.
"""
from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

import numpy as np

from voxcli.errors import IntegrityError, ModelNotFoundError
from voxcli.runtimes.onnx import default_threads, keep_arena, session, sessions
from voxcli.runtimes.piper.graph_split import SplitError, load_or_split
from voxcli.runtimes.piper.probe_record import probed
from voxcli.runtimes.piper.phonemize import EspeakPhonemizer, phonemes_to_ids

_LOG = logging.getLogger(__name__)

# Measured (benchmarks/bench_piper_split.py, 2 cores, quiet machine): 2 threads decode ~2.5x faster
# than 1; under heavy contention 1 thread degrades less, so callers sharing the CPU (the chat
# loop runs ASR at the same time) may pass threads=1.
DEFAULT_MAX_THREADS: Final = 2
_PROBE_TEXT: Final = "Hello there."
_FLOW_AHEAD: Final = 2
"""The flow runs over this many times the window a block asks for (see `PiperVoice.latent`)."""


@dataclass(frozen=True)
class StreamConfig:
    """Block sizes, in latent frames (one frame = hop_length samples, 11.6 ms at 22,050 Hz).

    Context measured on en_US-joe-medium (42-word sentence, 40-frame blocks,
    SNR against one whole decode): the decoder's receptive field is +-10 frames
    (10: 123 dB, 9: 79 dB, 8: 65 dB, 6: 49 dB), the flow's about +-26 (28: 130 dB
    decoded audio, 24: 100 dB, 16: 42 dB). With them blocks need no cross-fade.
    """

    first_frames: int = 16
    """First block of a sentence: small, so the first audio comes quickly (~186 ms)."""
    frames: int = 256
    """Largest later block (~3 s), and the least the flow computes ahead at a time: each block
    re-decodes lookback + lookahead frames, so large blocks keep the total CPU near a whole decode."""
    lookback: int = 10
    """Context frames of `z` decoded before a block and discarded."""
    lookahead: int = 10
    """Context frames of `z` decoded after a block and discarded."""
    overlap: int = 0
    """Frames cross-faded between consecutive blocks (0: exact blocks join without a seam)."""
    flow_context: int = 28
    """Context frames of `z_p` on each side of a flow segment."""


@dataclass
class Prepared:
    """One espeak sentence, ready to vocode."""

    text: str
    phonemes: str
    ids: list[int]
    frames: int
    """Latent length in frames (0 when the voice is not split)."""
    latent: np.ndarray | None
    """[1, C, frames] when the voice is split, else None."""
    audio: np.ndarray | None
    """Whole-sentence audio when the voice cannot be split, else None."""
    prepare_s: float
    """Seconds spent on this sentence (its share of phonemizing + the front part)."""
    durations: np.ndarray | None = None
    """Frames per id (int64, len(ids), summing to `frames`): the duration predictor's output,
    read from the split front part; None when the voice gives none (word times are then
    estimated, see voxcli.tts.words)."""
    words: Any = None
    """Set by the TTS layer after `prepare` (voxcli.tts.words.SentenceWords: the sentence's words,
    their written characters and frames); the runtime never reads it."""
    z: np.ndarray | None = field(default=None, repr=False)
    """The flow's output for frames [0, z.shape[2]), exact; grown by `render` as blocks need it."""


@dataclass(frozen=True)
class VoiceConfig:
    """What we read from a Piper `.onnx.json`."""

    sample_rate: int
    espeak_voice: str
    phoneme_id_map: dict[str, list[int]]
    noise_scale: float
    length_scale: float
    noise_w: float
    hop_length: int = 256
    num_speakers: int = 1
    vowel_clusters: list[list[str]] | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def read(cls, path: Path) -> VoiceConfig:
        try:
            raw = json.loads(Path(path).read_text(encoding="utf-8"))
            inference = raw.get("inference", {})
            return cls(
                sample_rate=int(raw["audio"]["sample_rate"]),
                espeak_voice=str(raw["espeak"]["voice"]),
                phoneme_id_map={k: list(v) for k, v in raw["phoneme_id_map"].items()},
                noise_scale=float(inference.get("noise_scale", 0.667)),
                length_scale=float(inference.get("length_scale", 1.0)),
                noise_w=float(inference.get("noise_w", 0.8)),
                hop_length=int(raw.get("hop_length", 256)),
                num_speakers=int(raw.get("num_speakers", 1)),
                vowel_clusters=raw.get("vowel_clusters") or None,
            )
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise ModelNotFoundError(f"cannot read voice config {path}: {exc}") from exc


class PiperVoice:
    """A Piper voice: text -> sentences -> latent -> audio blocks (float32 mono)."""

    def __init__(self, name: str, voice_config: VoiceConfig, phonemizer: EspeakPhonemizer,
                 front: Any | None, decoder: Any | None, whole: Any | None,
                 stream_config: StreamConfig, *, flow: Any | None = None, mask: str | None = None) -> None:
        self.name = name
        self.voice_config = voice_config
        self.sample_rate = voice_config.sample_rate
        self.hop_length = voice_config.hop_length
        self.config = stream_config
        self.phonemizer = phonemizer
        self.normalize = True
        """Apply `normalizer` before phonemizing (a per-call `normalize=` overrides this)."""
        self.normalizer: Callable[[str], str] | None = None
        """Text -> words to speak (prices, times, Dr., markup...). Given by the caller
        (`voxcli.tts.streamer.load_voice` passes `voxcli.tts.normalize.normalize_text`):
        text rules belong to the TTS layer, the runtime only phonemizes. None: text as is."""
        self.scales = np.array([voice_config.noise_scale, voice_config.length_scale, voice_config.noise_w],
                               dtype=np.float32)
        self._front, self._decoder, self._whole = front, decoder, whole
        self._flow, self._mask = flow, mask
        # Constant per voice, so looked up once, not per sentence or block (each get_inputs() builds
        # NodeArg objects); `_ones` is the flow's all-ones frame mask, grown as needed and sliced.
        self._prior_name = front.get_outputs()[0].name if front is not None else ""
        self._flow_input = flow.get_inputs()[0].name if flow is not None else ""
        self._decoder_input = decoder.get_inputs()[0].name if decoder is not None else ""
        self._ones = np.ones((1, 1, 0), np.float32)
        self.can_stream = front is not None and flow is not None and decoder is not None
        self.threads: int | None = None
        """Intra-op threads of each session (set by `load`)."""
        self.durations_output: str | None = None
        """Name of the front part's duration output (graph_split.find_durations), if it has one."""

    def sessions(self) -> tuple[Any, ...]:
        """The onnxruntime sessions in use: (front, flow, decoder) when streaming, else (whole,)."""
        return (self._front, self._flow, self._decoder) if self.can_stream else (self._whole,)

    @classmethod
    def load(cls, onnx_path: Path, config_path: Path | None = None, derived_dir: Path | None = None,
             stream_config: StreamConfig | None = None, *, threads: int | None = None,
             normalizer: Callable[[str], str] | None = None) -> PiperVoice:
        """Load once: phonemizer, then the split graph (cached in derived_dir) or the whole graph.

        `threads`: intra-op threads of each session (default: the cores, at most DEFAULT_MAX_THREADS);
        `normalizer`: see the attribute.
        """
        onnx_path = Path(onnx_path)
        config_path = Path(config_path) if config_path else onnx_path.with_name(onnx_path.name + ".json")
        if not onnx_path.is_file():
            raise ModelNotFoundError(f"voice model not found: {onnx_path}")
        with _load_errors(onnx_path):
            return cls._load(onnx_path, config_path, derived_dir, stream_config, threads, normalizer)

    @classmethod
    def _load(cls, onnx_path: Path, config_path: Path, derived_dir: Path | None, stream_config: StreamConfig | None,
              threads: int | None, normalizer: Callable[[str], str] | None) -> PiperVoice:
        vc = VoiceConfig.read(config_path)
        phonemizer = EspeakPhonemizer(vc.espeak_voice, vc.vowel_clusters)
        threads = threads or default_threads(DEFAULT_MAX_THREADS)
        name = onnx_path.name.removesuffix(".onnx")
        front = flow = decoder = split = None
        try:
            split = load_or_split(onnx_path, derived_dir)
            front, flow, decoder = keep_arena(*sessions([split.front, split.flow, split.decoder], threads=threads))  # type: ignore[list-item]
        except SplitError as exc:
            _LOG.info("voice %s cannot stream inside sentences (%s): whole sentences", name, exc)
        voice = cls(name, vc, phonemizer, front, decoder, None, stream_config or StreamConfig(),
                    flow=flow, mask=split.mask if split is not None else None)
        if front is not None and split.durations in {o.name for o in front.get_outputs()}:
            voice.durations_output = split.durations
        voice.normalizer = normalizer
        voice.threads = threads
        if voice.can_stream and not probed(split, voice._probe):  # a cold start probes a split once, not per run
            voice._front = voice._flow = voice._decoder = None
            voice.can_stream = False
        if not voice.can_stream:
            voice._whole = keep_arena(session(onnx_path, threads=threads))[0]
        return voice

    def _probe(self) -> bool:
        """Warm the sessions up and check the split: flow + decoder give frames * hop samples."""
        try:
            p = self.prepare(_PROBE_TEXT, normalize=False)[0]
            audio = self.render(p, 0, p.frames)
        except Exception as exc:  # a graph that splits but does not run: fall back
            _LOG.warning("split voice %s failed its probe (%s): whole sentences", self.name, exc)
            return False
        ok = p.latent is not None and p.latent.ndim == 3 and audio.size == p.frames * self.hop_length
        if not ok:
            _LOG.warning("split voice %s: %d samples for %d frames; whole sentences", self.name,
                         audio.size, p.frames)
        return ok

    # -- text -> latent ----------------------------------------------------------------------

    def sentences(self, text: str, normalize: bool | None = None) -> list[tuple[str, list[str], list[int]]]:
        """(sentence text, phonemes, ids) per sentence, split where Piper splits."""
        if self.normalizer is not None and (self.normalize if normalize is None else normalize):
            text = self.normalizer(text)
        out = []
        for s in self.phonemizer.phonemize(text):
            out.append((s.text, s.phonemes, phonemes_to_ids(s.phonemes, self.voice_config.phoneme_id_map)))
        return out

    def prepare(self, text: str, normalize: bool | None = None) -> list[Prepared]:
        """Phonemize `text` (may hold several sentences) and run the front part for each."""
        return list(self.iter_prepare(text, normalize))

    def iter_prepare(self, text: str, normalize: bool | None = None) -> Iterator[Prepared]:
        """`prepare`, one sentence at a time: the front part of sentence k+1 runs at the next `next()`.

        The streamer's front stage hands each sentence to the decoder as soon as
        it is ready instead of after the last sentence of the text.
        """
        t0 = time.perf_counter()
        sentences = self.sentences(text, normalize)
        share = (time.perf_counter() - t0) / max(1, len(sentences))
        for sentence_text, phonemes, ids in sentences:
            t = time.perf_counter()
            if self.can_stream:
                latent, durations = self._run_front(ids)
                prepared = Prepared(sentence_text, "".join(phonemes), ids, int(latent.shape[2]), latent, None, 0.0,
                                    durations)
            else:
                audio = self._whole.run(None, self._inputs(ids))[0]  # type: ignore[union-attr]
                prepared = Prepared(sentence_text, "".join(phonemes), ids, 0, None,
                                    np.asarray(audio, np.float32).reshape(-1), 0.0)
            prepared.prepare_s = share + time.perf_counter() - t
            yield prepared

    def _run_front(self, ids: list[int]) -> tuple[np.ndarray, np.ndarray | None]:
        """The latent and, when the front part outputs them, the frames per id (ints)."""
        wanted = [self._prior_name, self.durations_output] if self.durations_output else [self._prior_name]
        outs = self._front.run(wanted, self._inputs(ids))  # type: ignore[union-attr]
        latent = np.ascontiguousarray(outs[0], dtype=np.float32)
        durations = np.rint(np.asarray(outs[1]).reshape(-1)).astype(np.int64) if len(outs) > 1 else None
        return latent, durations

    def _inputs(self, ids: list[int]) -> dict[str, np.ndarray]:
        feeds = {
            "input": np.asarray([ids], dtype=np.int64),
            "input_lengths": np.asarray([len(ids)], dtype=np.int64),
            "scales": self.scales,
        }
        if self.voice_config.num_speakers > 1:
            feeds["sid"] = np.asarray([0], dtype=np.int64)
        return feeds

    # -- latent -> audio ---------------------------------------------------------------------

    def _decode(self, latent: np.ndarray) -> np.ndarray:
        audio = self._decoder.run(None, {self._decoder_input: latent})[0]  # type: ignore[union-attr]
        return np.asarray(audio, dtype=np.float32).reshape(-1)

    def _run_flow(self, p: Prepared, start: int, stop: int) -> np.ndarray:
        """`z` of frames [start, stop): the flow over `z_p` with `flow_context` frames each side, trimmed."""
        c = self.config.flow_context
        a, b = max(0, start - c), min(p.frames, stop + c)
        feeds = {self._flow_input: p.latent[:, :, a:b]}  # type: ignore[index]
        if self._mask:
            if self._ones.shape[2] < b - a:
                self._ones = np.ones((1, 1, max(b - a, 2 * self._ones.shape[2])), np.float32)
            feeds[self._mask] = self._ones[:, :, :b - a]  # one unpadded sentence: every frame counts
        z = self._flow.run(None, feeds)[0]  # type: ignore[union-attr]
        return np.ascontiguousarray(z[:, :, start - a:stop - a], dtype=np.float32)

    def latent(self, p: Prepared, start: int, stop: int) -> np.ndarray:
        """`z` of frames [start, stop), exact; in-order callers extend the cache `p.z`.

        Why ahead: each flow call pays 2 x flow_context frames of context, so after the first
        block (alone: it decides the first audio) the flow runs over 2x the window asked for:
        a block then costs at most ~1.5x its decoder call (the flow costs ~0.27x the decoder per
        frame), so the block scheduler's estimate holds. A caller that jumps ahead is not cached.
        """
        have = 0 if p.z is None else p.z.shape[2]
        if stop <= have:
            return p.z[:, :, start:stop]  # type: ignore[index]
        if start > have:
            return self._run_flow(p, start, stop)
        upto = stop if have == 0 else max(stop, start + _FLOW_AHEAD * (stop - start))
        if have and p.frames - upto < 4 * self.config.flow_context:
            upto = p.frames  # a short rest would pay more context than frames
        new = self._run_flow(p, have, upto)
        p.z = new if p.z is None else np.concatenate([p.z, new], axis=2)
        return p.z[:, :, start:stop]

    def render(self, p: Prepared, start: int, stop: int) -> np.ndarray:
        """Audio of frames [start, stop), decoded with lookback/lookahead context then trimmed."""
        if p.latent is None:
            audio = p.audio if p.audio is not None else np.zeros(0, np.float32)
            return audio[start * self.hop_length:stop * self.hop_length]
        start, stop = max(0, start), min(p.frames, stop)
        if stop <= start:
            return np.zeros(0, np.float32)
        a = max(0, start - self.config.lookback)
        b = min(p.frames, stop + self.config.lookahead)
        audio = self._decode(self.latent(p, a, b))
        hop = self.hop_length
        return audio[(start - a) * hop:(stop - a) * hop]

    def blocks(self, p: Prepared, sizes: Callable[[int], int] | None = None) -> Iterator[np.ndarray]:
        """Consecutive blocks covering the sentence exactly (frames * hop samples in all).

        Block k covers `sizes(k)` frames (default first_frames, then frames);
        it is decoded `overlap` frames longer and that tail is cross-faded
        into the head of block k+1, so no sample is lost or duplicated.
        """
        if p.latent is None:
            if p.audio is not None and p.audio.size:
                yield p.audio
            return
        cfg, hop = self.config, self.hop_length
        smallest = max(1, cfg.overlap)
        start, k = 0, 0
        tail = np.zeros(0, np.float32)
        while start < p.frames:
            wanted = sizes(k) if sizes is not None else (cfg.first_frames if k == 0 else cfg.frames)
            stop = min(p.frames, start + max(smallest, int(wanted)))
            if p.frames - stop < max(smallest, 2 * (cfg.lookback + cfg.lookahead)):
                stop = p.frames  # a rest this short is cheaper inside this block than with its own context
            audio = self.render(p, start, min(p.frames, stop + cfg.overlap))
            body = audio[:(stop - start) * hop].copy()
            if tail.size:
                n = min(tail.size, body.size)
                ramp = (np.arange(n, dtype=np.float32) + 0.5) / n
                body[:n] = tail[:n] * (1.0 - ramp) + body[:n] * ramp
            tail = audio[(stop - start) * hop:]
            yield body
            start, k = stop, k + 1

    def synthesize(self, text: str, normalize: bool | None = None) -> np.ndarray:
        """The whole text at once (the --no-stream / batch baseline), sentences concatenated."""
        parts = [self.whole(p) for p in self.prepare(text, normalize)]
        return np.concatenate(parts) if parts else np.zeros(0, np.float32)

    def whole(self, p: Prepared) -> np.ndarray:
        """The sentence decoded in one call (flow, then decoder): what `blocks` must join up to."""
        if p.latent is None:
            return p.audio if p.audio is not None else np.zeros(0, np.float32)
        return self._decode(self._run_flow(p, 0, p.frames))


_DAMAGED: Final = frozenset({"DecodeError", "InvalidProtobuf", "InvalidGraph"})
"""protobuf / onnxruntime error classes raised by a truncated or corrupt .onnx file."""


@contextmanager
def _load_errors(onnx_path: Path) -> Iterator[None]:
    """Name the voice file when it vanishes or turns out corrupt while loading.

    Why: the file is checked when the model is resolved, but it can be removed
    (a `voxcli rm`, a cache cleaner) or rot between that check and the load; the
    protobuf/onnxruntime/FileNotFoundError that followed was reported as an
    internal error. Missing -> ModelNotFoundError (exit 3), damaged ->
    IntegrityError (exit 4), each with the path and the fix.
    """
    try:
        yield
    except FileNotFoundError as e:
        raise ModelNotFoundError(f"voice model file disappeared while loading: {e.filename or onnx_path}",
                                 hint="reinstall it with `voxcli pull --force NAME`") from None
    except Exception as e:  # noqa: BLE001 - re-raised unless it is a damaged-file error
        if type(e).__name__ == "NoSuchFile":
            raise ModelNotFoundError(f"voice model file disappeared while loading: {onnx_path}",
                                     hint="reinstall it with `voxcli pull --force NAME`") from None
        if type(e).__name__ not in _DAMAGED:
            raise
        raise IntegrityError(f"voice model {onnx_path} is damaged and cannot be loaded ({type(e).__name__})",
                             hint="`voxcli doctor` lists damaged models; reinstall it with `voxcli pull --force NAME`") from None
