"""Fixtures of the chat tests that load real models once per module."""
from __future__ import annotations

from pathlib import Path
from typing import Iterator

import pytest


@pytest.fixture(scope="module")
def real_cache_module() -> Iterator[Path]:
    """VOXCLI_CACHE_DIR at the shared real-model cache while module-scoped fixtures load their models.

    The autouse `isolated_env` points each test at an empty cache, but only once the test itself
    starts: a module fixture that asks for this one loads from the real cache first.
    """
    from tests.conftest import REAL_CACHE

    mp = pytest.MonkeyPatch()
    mp.setenv("VOXCLI_CACHE_DIR", str(REAL_CACHE))
    yield REAL_CACHE
    mp.undo()
