"""Audio files: read anything soundfile reads, in blocks; write atomically.

Readers trust nothing in a header before checking it (rate and channels are
bounded, frame counts are never used to size a buffer) and decode in blocks,
like ffmpeg and sox do: memory is flat in the file's length, so ten hours of
audio cost what ten seconds do. `read_audio` is the whole-file convenience
for short clips.

Writers never leave a half-written file at the destination: audio goes to a
`fsutil.AtomicTarget` (temp sibling, fsynced, renamed into place) and only
appears when the stream completed; Ctrl-C or an error leaves nothing behind.
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Final, Iterator

import numpy as np

from voxcli.audio.pcm import MAX_CHANNELS, StreamResampler, check_rate
from voxcli.errors import OutputError, UsageError, VoxError
from voxcli.fsutil import AtomicTarget, write_error

BLOCK_S: Final = 1.0
"""Seconds of source audio decoded per block by `iter_audio` (the caller may ask for smaller)."""
MAX_BLOCK_SAMPLES: Final = 1 << 20
"""Cap on samples per read over all channels (4 MiB of float32), whatever the rate and channel count."""

_FORMATS = {".wav": ("WAV", "PCM_16"), ".flac": ("FLAC", "PCM_16"), ".ogg": ("OGG", "VORBIS")}


@dataclass(frozen=True)
class AudioInfo:
    """What a file's header says, checked against the bounds before any sample is decoded."""

    path: Path
    rate: int
    """Sample rate from the header (Hz), within MIN_RATE..MAX_RATE."""
    channels: int
    """Channel count from the header, within 1..MAX_CHANNELS (mixed down to mono when read)."""
    frames: int
    """Frames the header announces; a truncated or lying file may deliver fewer (never trusted for allocation)."""

    @property
    def duration_s(self) -> float:
        return self.frames / self.rate


def _unreadable(p: Path, e: BaseException) -> UsageError:
    """soundfile raises LibsndfileError / RuntimeError / TypeError: keep only the last line of its reason."""
    reason = str(e).strip().splitlines()[-1] if str(e).strip() else type(e).__name__
    return UsageError(f"{p}: cannot read audio ({reason})", hint="supported: WAV, FLAC, OGG, MP3 (whatever libsndfile reads)")


def audio_info(path: str | os.PathLike[str]) -> AudioInfo:
    """Read and bound-check the header only: a lying rate or channel count is a UsageError here, not 10 GB later."""
    import soundfile as sf

    p = Path(path)
    if not p.exists():
        raise UsageError(f"{p}: no such file")
    if p.is_dir():
        raise UsageError(f"{p}: is a directory, not an audio file")
    try:
        info = sf.info(str(p))
    except Exception as e:  # noqa: BLE001 - any decoder failure is the file's fault
        raise _unreadable(p, e) from None
    check_rate(int(info.samplerate), f"{p}: header sample rate")
    if not 1 <= info.channels <= MAX_CHANNELS:
        raise UsageError(f"{p}: header channel count {info.channels} is out of range (1..{MAX_CHANNELS})")
    return AudioInfo(p, int(info.samplerate), int(info.channels), max(0, int(info.frames)))


def iter_audio(path: str | os.PathLike[str], rate: int | None = None, *,
               block_s: float = BLOCK_S) -> Iterator[np.ndarray]:
    """Mono float32 blocks of a file, resampled to `rate` (None: the file's own rate), in bounded memory.

    The header is checked now (a UsageError before the first block is asked
    for); decoding happens as you iterate, about `block_s` of source audio at a
    time, through one streaming resampler whose filter state spans the blocks,
    so the concatenation equals a whole-file resample and memory does not
    grow with the file's length. Block sizes vary (the resampler's delay).
    """
    return _open_blocks(path, rate, block_s)[1]


def _open_blocks(path: str | os.PathLike[str], rate: int | None, block_s: float) -> tuple[AudioInfo, Iterator[np.ndarray]]:
    """The checked header and a lazy block decoder (nothing decoded yet)."""
    info = audio_info(path)
    if rate is not None:
        check_rate(rate, "target sample rate")
    return info, _decode_blocks(info, rate, block_s)


def _block_frames(info: AudioInfo, block_s: float) -> int:
    """Frames per read: `block_s` of audio, but never more than MAX_BLOCK_SAMPLES samples over all channels."""
    return max(1, min(int(block_s * info.rate), MAX_BLOCK_SAMPLES // info.channels))


def _decode_blocks(info: AudioInfo, rate: int | None, block_s: float) -> Iterator[np.ndarray]:
    """The generator behind iter_audio: opens the file on the first `next()`, so it re-checks the header then."""
    import soundfile as sf

    resampler = StreamResampler(info.rate, rate) if rate is not None and rate != info.rate else None
    frames = _block_frames(info, block_s)
    try:
        f = sf.SoundFile(str(info.path))
    except Exception as e:  # noqa: BLE001
        raise _unreadable(info.path, e) from None
    with f:
        if (f.samplerate, f.channels) != (info.rate, info.channels):  # replaced since the header was checked
            raise UsageError(f"{info.path}: the file changed while it was being opened")
        while True:
            try:
                data = f.read(frames, dtype="float32", always_2d=True)
            except Exception as e:  # noqa: BLE001 - a file damaged past its header
                raise _unreadable(info.path, e) from None
            if not len(data):
                break
            mono = data.mean(axis=1, dtype=np.float32) if data.shape[1] > 1 else data[:, 0].copy()
            out = resampler.process(mono) if resampler else mono
            if out.size:
                yield out
    if resampler:
        tail = resampler.process(np.zeros(0, np.float32), last=True)
        if tail.size:
            yield tail


def read_audio(path: str | os.PathLike[str], rate: int | None = None) -> tuple[np.ndarray, int]:
    """A whole (short) file as mono float32 at `rate` (None: its own rate). Returns (audio, rate).

    Memory is the decoded result, so use `iter_audio` for anything that may
    be long (user files); this is for reference clips and tests.
    """
    info, blocks = _open_blocks(path, rate, BLOCK_S)
    parts = list(blocks)
    audio = np.concatenate(parts) if parts else np.zeros(0, np.float32)
    return audio, rate if rate is not None else info.rate


def audio_format_for(path: str | os.PathLike[str]) -> tuple[str, str]:
    suffix = Path(path).suffix.lower()
    if suffix not in _FORMATS:
        raise UsageError(f"{path}: unsupported output format {suffix or '(none)'}", hint="use a .wav, .flac or .ogg file name")
    return _FORMATS[suffix]


def check_output_path(path: Path) -> None:
    """A UsageError (exit 2) for an output path that cannot be a file: a directory, or under a missing/non-directory.

    Why: an existing directory as `-o` reached os.replace and was reported as an internal error.
    """
    parent = path.parent if str(path.parent) else Path(".")
    if path.is_dir():
        raise UsageError(f"{path}: is a directory", hint=f"give a file name, e.g. {path / ('out' + path.suffix)}")
    if not parent.is_dir():
        why = f"{parent} is not a directory" if parent.exists() else f"directory {parent} does not exist"
        raise UsageError(f"{path}: {why}")


def _sndfile_write_error(e: Exception, tmp: Path, path: Path) -> VoxError:
    """libsndfile reports a failed write(2) as "System error." with no errno: find the cause from the outside."""
    import errno

    try:
        import resource

        soft = resource.getrlimit(resource.RLIMIT_FSIZE)[0]
        if soft != resource.RLIM_INFINITY and tmp.stat().st_size >= soft - 65536:
            return write_error(OSError(errno.EFBIG, os.strerror(errno.EFBIG)), path)
    except (ImportError, OSError):
        pass
    try:
        if os.statvfs(tmp.parent).f_bavail == 0:
            return write_error(OSError(errno.ENOSPC, os.strerror(errno.ENOSPC)), path)
    except (AttributeError, OSError):
        pass
    return OutputError(f"cannot write {path}: {e}")


class AtomicAudioWriter:
    """Stream float32 chunks into an audio file that appears only on success."""

    def __init__(self, path: str | os.PathLike[str], sample_rate: int) -> None:
        import soundfile as sf

        self.path = Path(path)
        self.sample_rate = sample_rate
        fmt, subtype = audio_format_for(self.path)
        check_output_path(self.path)
        try:
            self._target = AtomicTarget(self.path)
        except OSError as e:  # a read-only or unwritable directory
            raise write_error(e, self.path) from None
        try:
            self._file = sf.SoundFile(str(self._target.tmp), "w", samplerate=sample_rate, channels=1, format=fmt, subtype=subtype)
        except BaseException as e:
            self._target.discard()
            raise self._cause(e) from None
        self.frames = 0

    def write(self, chunk: np.ndarray) -> None:
        a = np.clip(np.asarray(chunk, dtype=np.float32), -1.0, 1.0)
        if a.size:
            try:
                self._file.write(a)
            except BaseException as e:
                raise self._cause(e) from None
            self.frames += a.size

    def commit(self) -> Path:
        """Close and move into place; returns the final path."""
        if not self._target.done:
            try:
                self._file.close()
                self._target.commit()
            except BaseException as e:
                self._target.discard()
                raise self._cause(e) from None
        return self.path

    def abort(self) -> None:
        """Close and delete the temp file; the destination is untouched.

        A close that fails (the disk that stopped the write is still full) is
        ignored: the file is discarded anyway, and the first error is the one to report.
        """
        if not self._target.done:
            try:
                self._file.close()
            except Exception:  # noqa: BLE001 - see the docstring
                pass
            finally:
                self._target.discard()

    def _cause(self, e: BaseException) -> BaseException:
        """An OSError or libsndfile error while writing, as the one-line VoxError it deserves (else `e`)."""
        import soundfile as sf

        if isinstance(e, OSError):
            return write_error(e, self.path)
        if isinstance(e, sf.LibsndfileError):
            return _sndfile_write_error(e, self._target.tmp, self.path)
        return e

    def __enter__(self) -> "AtomicAudioWriter":
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        if exc_type is None:
            self.commit()
        else:
            self.abort()
