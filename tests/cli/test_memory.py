"""Issue 18 items 1-2 at the CLI: memory is flat in the length of the input file.

Every run is the real CLI in a subprocess; its peak RSS comes from os.wait4 (that child's own
rusage). The files are generated a second at a time, never held whole.
"""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf

pytestmark = pytest.mark.usefixtures("real_cache")


def _peak_rss_mb(*args: str) -> float:
    """Peak RSS of one real `voxcli` run (os.wait4 gives that child's own rusage), asserting exit 0."""
    p = subprocess.Popen([sys.executable, "-m", "voxcli", *args], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(p.pid, 0)
    err_text = p.stderr.read().decode() if p.stderr else ""
    assert os.waitstatus_to_exitcode(status) == 0, err_text
    return usage.ru_maxrss / 1024


def _quiet_wav(path: Path, seconds: int, rate: int = 192000) -> Path:
    """Near-silent 16-bit audio written a second at a time (never held whole, like the file it stands for)."""
    rng = np.random.default_rng(0)
    with sf.SoundFile(path, "w", rate, 1, "PCM_16") as f:
        for _ in range(seconds):
            f.write((rng.standard_normal(rate) * 1e-4).astype(np.float32))
    return path


@pytest.mark.parametrize("live", [False, True], ids=["offline", "live-unpaced"])
def test_memory_is_flat_in_file_length(tmp_path, live) -> None:
    """Issue 18 items 1-2: a file was decoded and resampled whole (3 min at 192 kHz: ~140 MB of float32 more
    than 10 s). Blocks of it are decoded as needed now, so the peak stays within a few MB whatever the length."""
    extra = ["--live", "--speed", "0"] if live else []
    short = _peak_rss_mb("transcribe", str(_quiet_wav(tmp_path / "short.wav", 10)), *extra)
    long = _peak_rss_mb("transcribe", str(_quiet_wav(tmp_path / "long.wav", 180)), *extra)
    assert long - short < 30, f"peak RSS {short:.0f} MB for 10 s, {long:.0f} MB for 3 min"
