"""Fixtures of the derived-file integrity tests (split voice parts, optimized graphs)."""
from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture
def hashed(monkeypatch) -> list[str]:
    """Names of the files sha256'd from now on (every hash of a file goes through verify.sha256_file)."""
    from voxcli.hub import verify
    from voxcli.runtimes import derived

    names: list[str] = []
    real = verify.sha256_file

    def counting(path, *args, **kwargs):
        names.append(Path(path).name)
        return real(path, *args, **kwargs)

    monkeypatch.setattr(verify, "sha256_file", counting)
    monkeypatch.setattr(derived, "sha256_file", counting)
    return names


@pytest.fixture
def settled_now(monkeypatch) -> None:
    """Stamps count as settled at once (no racy window): trust right after a build, on any kernel."""
    from voxcli.hub import cache as cache_mod

    monkeypatch.setattr(cache_mod, "RACY_WINDOW_S", 0.0)
