"""Silero VAD on onnxruntime: one speech probability per 32 ms frame of 16 kHz audio.

Silero scores 512-sample frames with a recurrent state; each call also sees
the last 64 samples of the previous frame, which is how the model was trained
(without them scores drift). What to make of the scores (hysteresis, holds,
utterance boundaries) is `voxcli.asr.endpointer`'s business, not the model's.
"""
from __future__ import annotations

from pathlib import Path
from typing import Final

import numpy as np

from voxcli.errors import ModelNotFoundError
from voxcli.runtimes.onnx import session

SAMPLE_RATE: Final = 16000
FRAME: Final = 512
"""Samples per scored frame (32 ms)."""
CONTEXT: Final = 64
"""Samples of the previous frame prepended to each call."""
VAD_FILE: Final = "silero_vad.onnx"
MODEL_NAME: Final = "silero-vad"
THREADS: Final = 1
"""A 576-sample frame gains nothing from a thread pool; one thread leaves the cores to the others."""


class SileroVAD:
    """Streaming frame scorer: `probs(chunk)` returns one probability per completed frame."""

    def __init__(self, session) -> None:
        self.session = session
        self.reset()

    @classmethod
    def load(cls, path: Path) -> "SileroVAD":
        """Load `silero_vad.onnx` (or the file of that name in directory `path`)."""
        path = Path(path)
        if path.is_dir():
            path = path / VAD_FILE
        if not path.is_file():
            raise ModelNotFoundError(f"{MODEL_NAME}: missing {path}", hint=f"voxcli pull {MODEL_NAME}")
        return cls(session(path, threads=THREADS))

    @classmethod
    def resolve(cls, *, offline: bool | None = None) -> "SileroVAD":
        """Find the model through the registry (installed package or cache) and load it."""
        from voxcli.hub.resolve import resolve_model

        return cls.load(resolve_model(MODEL_NAME, kind="vad", offline=offline).file(VAD_FILE))

    def reset(self) -> None:
        """Forget the stream: recurrent state, context and any partial frame."""
        self._state = np.zeros((2, 1, 128), dtype=np.float32)
        self._context = np.zeros(CONTEXT, dtype=np.float32)
        self._pending = np.zeros(0, dtype=np.float32)
        self._sr = np.array(SAMPLE_RATE, dtype=np.int64)

    def frame_prob(self, frame: np.ndarray) -> float:
        """Score exactly one 512-sample frame, advancing the recurrent state."""
        x = np.concatenate([self._context, frame]).astype(np.float32)[None, :]
        out, self._state = self.session.run(None, {"input": x, "state": self._state, "sr": self._sr})
        self._context = frame[-CONTEXT:].astype(np.float32)
        return float(out[0, 0])

    def probs(self, chunk: np.ndarray) -> np.ndarray:
        """Probabilities of the frames completed by `chunk`; a partial frame waits for the next call."""
        data = np.concatenate([self._pending, np.asarray(chunk, dtype=np.float32).reshape(-1)])
        n = data.size // FRAME
        out = np.empty(n, dtype=np.float32)
        for k in range(n):
            out[k] = self.frame_prob(data[k * FRAME : (k + 1) * FRAME])
        self._pending = data[n * FRAME :]
        return out
