"""Corpus fixtures: a small tree of real speech (copies of the speech samples), and a corrupt file."""
from __future__ import annotations

import shutil
from pathlib import Path

import pytest


def make_tree(root: Path, samples: dict[str, Path], copies: int = 1, corrupt: bool = False) -> Path:
    """root/a/beckett-N.wav, root/b/c/two_cities-N.wav (+ root/broken.wav: noise bytes under a .wav name)."""
    for n in range(copies):
        (root / "a").mkdir(parents=True, exist_ok=True)
        (root / "b" / "c").mkdir(parents=True, exist_ok=True)
        shutil.copy(samples["beckett"], root / "a" / f"beckett-{n}.wav")
        shutil.copy(samples["two_cities"], root / "b" / "c" / f"two_cities-{n}.wav")
    if corrupt:
        (root / "broken.wav").write_bytes(b"RIFF\x00\x00\x00\x00WAVEjunk" + bytes(range(256)) * 8)
    (root / "notes.txt").write_text("not audio: a directory walk skips it\n")
    return root


@pytest.fixture
def tree(tmp_path: Path, speech_samples: dict[str, Path], real_cache: Path) -> Path:
    return make_tree(tmp_path / "in", speech_samples, corrupt=True)
