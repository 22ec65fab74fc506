"""Audio files: read anything soundfile reads, write atomically.

Writers never leave a half-written file at the destination: audio goes to a
temp file in the same directory (same filesystem, so the final `os.replace`
is atomic) and is only moved into place when the stream completed.
"""
from __future__ import annotations

import os
import tempfile
from pathlib import Path
from types import TracebackType

import numpy as np

from voxcli.audio.pcm import resample
from voxcli.errors import UsageError

_FORMATS = {".wav": ("WAV", "PCM_16"), ".flac": ("FLAC", "PCM_16"), ".ogg": ("OGG", "VORBIS")}


def _umask() -> int:
    """The process umask, read without changing it where the OS allows (threads may be creating files)."""
    try:
        with open("/proc/self/status", encoding="ascii") as f:
            for line in f:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def read_audio(path: str | os.PathLike[str], rate: int | None = None) -> tuple[np.ndarray, int]:
    """Read a file as mono float32; resample to `rate` when given. Returns (audio, rate)."""
    import soundfile as sf

    p = Path(path)
    if not p.exists():
        raise UsageError(f"{p}: no such file")
    if p.is_dir():
        raise UsageError(f"{p}: is a directory, not an audio file")
    try:
        data, sr = sf.read(str(p), dtype="float32", always_2d=True)
    except Exception as e:  # soundfile raises LibsndfileError / RuntimeError / TypeError
        reason = str(e).strip().splitlines()[-1] if str(e).strip() else type(e).__name__
        raise UsageError(f"{p}: cannot read audio ({reason})", hint="supported: WAV, FLAC, OGG, MP3 (whatever libsndfile reads)") from None
    audio = data.mean(axis=1).astype(np.float32) if data.shape[1] > 1 else data[:, 0].copy()
    if rate is not None and rate != sr:
        audio, sr = resample(audio, sr, rate), rate
    return audio, int(sr)


def audio_format_for(path: str | os.PathLike[str]) -> tuple[str, str]:
    suffix = Path(path).suffix.lower()
    if suffix not in _FORMATS:
        raise UsageError(f"{path}: unsupported output format {suffix or '(none)'}", hint="use a .wav, .flac or .ogg file name")
    return _FORMATS[suffix]


class AtomicAudioWriter:
    """Stream float32 chunks into an audio file that appears only on success."""

    def __init__(self, path: str | os.PathLike[str], sample_rate: int) -> None:
        import soundfile as sf

        self.path = Path(path)
        self.sample_rate = sample_rate
        fmt, subtype = audio_format_for(self.path)
        parent = self.path.parent if str(self.path.parent) else Path(".")
        if not parent.is_dir():
            raise UsageError(f"{self.path}: directory {parent} does not exist")
        fd, tmp = tempfile.mkstemp(prefix=f".{self.path.name}.", suffix=".part", dir=parent)
        os.close(fd)
        self._tmp = Path(tmp)
        self._file = sf.SoundFile(tmp, "w", samplerate=sample_rate, channels=1, format=fmt, subtype=subtype)
        self.frames = 0
        self._done = False

    def write(self, chunk: np.ndarray) -> None:
        a = np.clip(np.asarray(chunk, dtype=np.float32), -1.0, 1.0)
        if a.size:
            self._file.write(a)
            self.frames += a.size

    def commit(self) -> Path:
        """Close and move into place; returns the final path."""
        if not self._done:
            self._file.close()
            os.chmod(self._tmp, 0o666 & ~_umask())  # mkstemp made it 0600; a new file follows the umask
            os.replace(self._tmp, self.path)
            self._done = True
        return self.path

    def abort(self) -> None:
        """Close and delete the temp file; the destination is untouched."""
        if not self._done:
            try:
                self._file.close()
            finally:
                self._tmp.unlink(missing_ok=True)
                self._done = True

    def __enter__(self) -> "AtomicAudioWriter":
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        if exc_type is None:
            self.commit()
        else:
            self.abort()
