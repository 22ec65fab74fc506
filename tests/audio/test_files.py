"""AtomicAudioWriter: the audio file appears whole on success and never otherwise (through fsutil)."""
from __future__ import annotations

import numpy as np
import pytest
import soundfile as sf

from voxcli.audio.files import AtomicAudioWriter
from voxcli.errors import UsageError


def test_commit_writes_the_whole_file_and_no_temp(tmp_path):
    tone = (0.5 * np.sin(np.arange(1600) / 5)).astype(np.float32)
    with AtomicAudioWriter(tmp_path / "out.wav", 16000) as w:
        w.write(tone[:800])
        assert not (tmp_path / "out.wav").exists()  # nothing under the final name mid-stream
        w.write(tone[800:])
    data, rate = sf.read(tmp_path / "out.wav", dtype="float32")
    assert rate == 16000 and data.size == 1600 and np.abs(data - tone).max() < 1e-3
    assert [p.name for p in tmp_path.iterdir()] == ["out.wav"]


def test_an_error_mid_stream_keeps_the_old_file(tmp_path):
    old = tmp_path / "out.flac"
    sf.write(old, np.zeros(100, np.float32), 8000)
    before = old.read_bytes()
    with pytest.raises(KeyboardInterrupt):
        with AtomicAudioWriter(old, 16000) as w:
            w.write(np.ones(400, np.float32) * 0.1)
            raise KeyboardInterrupt
    assert old.read_bytes() == before
    assert [p.name for p in tmp_path.iterdir()] == ["out.flac"]


def test_commit_is_durable_and_idempotent(tmp_path, monkeypatch):
    import os

    synced: list[int] = []
    real = os.fsync
    monkeypatch.setattr(os, "fsync", lambda fd: (synced.append(fd), real(fd))[1])
    w = AtomicAudioWriter(tmp_path / "a.ogg", 22050)
    w.write(np.zeros(2205, np.float32))
    assert w.commit() == tmp_path / "a.ogg" and w.commit() == tmp_path / "a.ogg"
    w.abort()  # after commit: a no-op, the file stays
    assert (tmp_path / "a.ogg").exists() and len(synced) == 2  # the file, then its directory


def test_bad_destinations_are_usage_errors(tmp_path):
    with pytest.raises(UsageError):
        AtomicAudioWriter(tmp_path / "x.mp4", 16000)
    with pytest.raises(UsageError):
        AtomicAudioWriter(tmp_path / "missing" / "x.wav", 16000)
    assert list(tmp_path.iterdir()) == []
