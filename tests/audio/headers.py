"""Hand-written audio headers for tests: well-formed files that say what an attacker wants."""
from __future__ import annotations

import struct
from pathlib import Path

import numpy as np


def wav_with_header(path: Path, rate: int, channels: int = 1, frames: int = 1000) -> None:
    """A PCM_16 WAV of silence whose header says `rate` Hz (libsndfile refuses to write some of these itself)."""
    data = np.zeros(frames * channels, "<i2").tobytes()
    fmt = struct.pack("<HHIIHH", 1, channels, rate, rate * channels * 2, channels * 2, 16)
    body = b"WAVE" + b"fmt " + struct.pack("<I", len(fmt)) + fmt + b"data" + struct.pack("<I", len(data)) + data
    path.write_bytes(b"RIFF" + struct.pack("<I", len(body)) + body)
