"""Where things live, read from the environment at call time (never at import).

Tests and CI point these at temp dirs by setting environment variables; the
CLI's global options override them for one process.
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Final

DEFAULT_INDEX_URL: Final = "https://pypi.org/simple"


def cache_dir() -> Path:
    """Model cache root: $VOXCLI_CACHE_DIR or platformdirs' user cache dir."""
    env = os.environ.get("VOXCLI_CACHE_DIR")
    if env:
        return Path(env).expanduser()
    import platformdirs

    return Path(platformdirs.user_cache_dir("voxcli", appauthor=False))


def index_url() -> str:
    """Package index base (PEP 691 simple API); $VOXCLI_INDEX_URL for mirrors and tests."""
    return os.environ.get("VOXCLI_INDEX_URL", DEFAULT_INDEX_URL).rstrip("/")


def offline() -> bool:
    """True when $VOXCLI_OFFLINE is set to a true value: never download."""
    return os.environ.get("VOXCLI_OFFLINE", "").strip().lower() in {"1", "true", "yes", "on"}


def extra_catalogs() -> list[Path]:
    """User catalogs merged over the built-in one: $VOXCLI_CATALOG (os.pathsep-separated)."""
    env = os.environ.get("VOXCLI_CATALOG", "")
    return [Path(p).expanduser() for p in env.split(os.pathsep) if p.strip()]


DEFAULT_MAX_EXTRACT_BYTES: Final = 20 << 30


def max_extract_bytes() -> int:
    """Cap on what an ad-hoc archive may expand to: $VOXCLI_MAX_EXTRACT_BYTES, default 20 GiB.

    Catalog models are capped by their catalog sizes instead; this bound only
    guards archives nobody described in advance (decompression bombs).
    """
    env = os.environ.get("VOXCLI_MAX_EXTRACT_BYTES", "").strip()
    if env:
        try:
            return max(0, int(env))
        except ValueError:
            from voxcli.errors import UsageError

            raise UsageError(f"VOXCLI_MAX_EXTRACT_BYTES={env!r} is not a number of bytes") from None
    return DEFAULT_MAX_EXTRACT_BYTES
