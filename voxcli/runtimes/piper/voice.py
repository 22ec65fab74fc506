"""Piper (VITS) voice on onnxruntime, vocoded in blocks for intra-sentence streaming.

`prepare()` phonemizes (espeak-ng, like piper-tts) and runs the front part of
the graph (text encoder, duration predictor, flow) up to the latent `z`;
`blocks()` then vocodes `z` a block at a time with the HiFi-GAN decoder, each
block decoded with `lookback`/`lookahead` frames of context that are thrown
away and cross-faded over `overlap` frames with its neighbour. The first
audio of a long sentence therefore exists after the front part plus one
small block instead of after the whole sentence. Voices whose graph cannot
be split (see graph_split) fall back to whole-sentence synthesis.
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
from voxcli.runtimes.onnx import default_threads, session
from voxcli.runtimes.piper.graph_split import SplitError, load_or_split
from voxcli.runtimes.piper.phonemize import EspeakPhonemizer, phonemes_to_ids

_LOG = logging.getLogger(__name__)

# Measured (benchmarks/bench_piper_split.py, 2 cores, quiet machine): 2 threads decode ~2.5x faster
# than 1; under heavy contention 1 thread degrades less, so callers sharing the CPU (the chat
# loop runs ASR at the same time) may pass threads=1.
DEFAULT_MAX_THREADS: Final = 2
_PROBE_TEXT: Final = "Hello there."


@dataclass(frozen=True)
class StreamConfig:
    """Block sizes, in latent frames (one frame = hop_length samples, 11.6 ms at 22,050 Hz).

    Defaults measured with benchmarks/bench_piper_split.py: +-8 frames of
    context keep blocked decoding within ~56 dB SNR of decoding the whole
    sentence at once (4 frames: ~31 dB, none: ~11 dB, audible clicks).
    """

    first_frames: int = 16
    """First block of a sentence: small, so the first audio comes quickly (~186 ms)."""
    frames: int = 64
    """Later blocks (~743 ms): fewer decoder calls, more context reuse."""
    lookback: int = 8
    """Context frames decoded before a block and discarded."""
    lookahead: int = 8
    """Context frames decoded after a block and discarded."""
    overlap: int = 2
    """Frames cross-faded between consecutive blocks (hides any residual seam)."""


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
                 stream_config: StreamConfig) -> None:
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
        self.can_stream = front is not None and decoder is not None
        self.threads: int | None = None
        """Intra-op threads of each session (set by `load`)."""

    def sessions(self) -> tuple[Any, ...]:
        """The onnxruntime sessions in use: (front, decoder) when streaming, else (whole,)."""
        return (self._front, self._decoder) if self.can_stream else (self._whole,)

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
        front = decoder = None
        try:
            split = load_or_split(onnx_path, derived_dir)
            front = session(split.front, threads=threads)
            decoder = session(split.decoder, threads=threads)
        except SplitError as exc:
            _LOG.info("voice %s cannot stream inside sentences (%s): whole sentences", name, exc)
        voice = cls(name, vc, phonemizer, front, decoder, None, stream_config or StreamConfig())
        voice.normalizer = normalizer
        voice.threads = threads
        if voice.can_stream and not voice._probe():
            voice._front = voice._decoder = None
            voice.can_stream = False
        if not voice.can_stream:
            voice._whole = session(onnx_path, threads=threads)
        return voice

    def _probe(self) -> bool:
        """Warm the sessions up and check the split: decoder(latent) gives frames * hop samples."""
        try:
            p = self.prepare(_PROBE_TEXT, normalize=False)[0]
            audio = self._decode(p.latent)  # type: ignore[arg-type]
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
                latent = self._front.run(None, self._inputs(ids))[0]  # type: ignore[union-attr]
                latent = np.ascontiguousarray(latent, dtype=np.float32)
                prepared = Prepared(sentence_text, "".join(phonemes), ids, int(latent.shape[2]), latent, None, 0.0)
            else:
                audio = self._whole.run(None, self._inputs(ids))[0]  # type: ignore[union-attr]
                prepared = Prepared(sentence_text, "".join(phonemes), ids, 0, None,
                                    np.asarray(audio, np.float32).reshape(-1), 0.0)
            prepared.prepare_s = share + time.perf_counter() - t
            yield prepared

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
        name = self._decoder.get_inputs()[0].name  # type: ignore[union-attr]
        audio = self._decoder.run(None, {name: latent})[0]  # type: ignore[union-attr]
        return np.asarray(audio, dtype=np.float32).reshape(-1)

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
        audio = self._decode(p.latent[:, :, a:b])
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
            if p.frames - stop < smallest:
                stop = p.frames  # never leave a sliver shorter than the cross-fade
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
        parts = []
        for p in self.prepare(text, normalize):
            parts.append(self._decode(p.latent) if p.latent is not None else
                         (p.audio if p.audio is not None else np.zeros(0, np.float32)))
        return np.concatenate(parts) if parts else np.zeros(0, np.float32)


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
