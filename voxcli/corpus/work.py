"""The worker side: load a model once per process, then turn one item into an `Outcome`.

Why a per-process cache keyed by the spec: a pool worker or a Ray actor
lives for the whole batch, and loading the model per file would cost more
than decoding a short one. Each worker uses ONE onnxruntime thread
(`WorkerSpec.threads`), so N workers use N cores without oversubscription,
and the numbers come out the same whatever N is (the same kernels in the
same order), which is why `--jobs 4` equals `--jobs 1` to the character.

Nothing here writes an output file: the driver alone does, so workers need
only read access to the inputs (or none, with bytes shipped to them).
"""
from __future__ import annotations

import os
import re
import socket
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import numpy as np

from voxcli.asr.models import DEFAULT_ASR

SR = 16000


@dataclass(frozen=True)
class WorkerSpec:
    """What every worker loads: the same for all items of a batch (hashable: the cache key)."""

    kind: Literal["asr", "tts"]
    model: str | None = None
    """ASR model or TTS voice name (None: the default)."""
    endpoint_ms: int = 500
    offline: bool | None = None
    threads: int = 1


@dataclass(frozen=True)
class Task:
    """One item as sent to a worker."""

    key: str
    source: str
    """A path the worker reads, or the text to speak."""
    suffix: str = ""
    """The input's suffix, so shipped bytes decode with the right format."""


@dataclass
class Outcome:
    """A worker's answer for one task: a result or the one-line error."""

    key: str
    ok: bool
    error: str | None = None
    audio_s: float = 0.0
    work_s: float = 0.0
    result: Any = None
    """ASR: list of `Utterance`; TTS: (float32 audio, sample rate, normalized text)."""
    worker: str = ""
    extra: dict[str, Any] = field(default_factory=dict)


_LOADED: dict[WorkerSpec, Any] = {}


def model_name(spec: WorkerSpec) -> str:
    """The name recorded in the manifest (resolved the way the loaders resolve it)."""
    return spec.model or (DEFAULT_ASR if spec.kind == "asr" else "default-voice")


def check_model(spec: WorkerSpec) -> None:
    """Resolve (and if allowed, pull) the model once in the driver: a wrong name is one error, exit 3,
    not N worker processes dying in their initializers and every file failing."""
    from voxcli.hub.resolve import resolve_model

    name = spec.model or (DEFAULT_ASR if spec.kind == "asr" else None)
    resolve_model(name, kind=spec.kind, offline=spec.offline)


def load(spec: WorkerSpec) -> Any:
    """The loaded model(s) for `spec`, once per process."""
    if spec not in _LOADED:
        if spec.kind == "asr":
            from voxcli.asr.models import load_asr

            # Unnamed: the fast tier, never this process's own `default_asr()` (a pool process or Ray node
            # may have another tier record); the batch's driver names the default (`asr_job.transcribe_events`).
            _LOADED[spec] = load_asr(spec.model or DEFAULT_ASR, offline=spec.offline, threads=spec.threads)
        else:
            from voxcli.tts.streamer import load_voice

            _LOADED[spec] = load_voice(spec.model, offline=spec.offline, threads=spec.threads)
    return _LOADED[spec]


def _transcribe(spec: WorkerSpec, path: str) -> tuple[list[Any], float]:
    from voxcli.audio.files import iter_audio
    from voxcli.audio.pcm import sanitize
    from voxcli.asr.batch import transcribe_blocks
    from voxcli.asr.endpointer import VADConfig

    asr, vad = load(spec)
    seen = [0]

    def blocks() -> Any:
        for b in iter_audio(path, SR):
            seen[0] += b.size
            yield sanitize(b)[0]

    utts = list(transcribe_blocks(asr, vad, blocks(), VADConfig(endpoint_ms=spec.endpoint_ms)))
    return utts, seen[0] / SR


def _speak(spec: WorkerSpec, text: str) -> tuple[tuple[np.ndarray, int, str], float]:
    from voxcli.tts.normalize import normalize_text

    voice = load(spec)
    audio = voice.synthesize(text)
    if not audio.size:
        raise ValueError("nothing speakable in this line")
    return (audio, voice.sample_rate, normalize_text(text)), audio.size / voice.sample_rate


def run(spec: WorkerSpec, task: Task, data: bytes | None = None) -> Outcome:
    """Run one task; any failure of the item (corrupt file, unreadable) is an Outcome, never an exception."""
    t0 = time.perf_counter()
    who = f"{socket.gethostname()}:{os.getpid()}"
    try:
        if spec.kind == "tts":
            result, audio_s = _speak(spec, task.source)
        elif data is not None:
            with tempfile.TemporaryDirectory(prefix="voxcli-shipped-") as d:
                p = Path(d) / f"input{task.suffix}"
                p.write_bytes(data)
                result, audio_s = _transcribe(spec, str(p))
        else:
            result, audio_s = _transcribe(spec, task.source)
    except Exception as e:  # noqa: BLE001 - the item failed, the batch goes on
        msg = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        if data is not None:  # name the input, not the worker's temp copy of its bytes
            msg = re.sub(r"[^\s']*voxcli-shipped-[^/\s]+/input" + re.escape(task.suffix), lambda m: task.source, msg)
        return Outcome(task.key, False, error=msg, work_s=time.perf_counter() - t0, worker=who)
    return Outcome(task.key, True, audio_s=audio_s, work_s=time.perf_counter() - t0, result=result, worker=who)
