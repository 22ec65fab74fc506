"""Trust a derived file (split Piper graph, built LLM graph, LLM info) only if its recorded hash says so.

Why: derived files used to be found by the source's name, size and mtime
alone, so one flipped byte in the split Piper decoder made `speak` write
full-scale noise with exit 0 (issue 18, item 4). Every builder now records
size + sha256 right after writing (`Cache.record_derived`) and every loader
checks them first (`Cache.check_derived`: one hash per file per process,
then only a stat); any problem -- changed, missing, or unrecorded because an
older voxcli built it -- means "not cached": the caller builds again and says
why at warning level (`voxcli -v`).

A directory that is not `<cache>/derived/<name>` (a caller's own directory,
a test's tmp dir) has no record to check: only existence counts there.
"""
from __future__ import annotations

import logging
from collections.abc import Iterable
from pathlib import Path

from voxcli.errors import UsageError
from voxcli.hub.cache import Cache

_LOG = logging.getLogger(__name__)


def _owner(derived_dir: Path) -> tuple[Cache, str] | None:
    try:
        return Cache.of_derived(Path(derived_dir))
    except (ValueError, UsageError):  # not <root>/derived/<name>: nothing is recorded there
        return None


def problems(derived_dir: Path, paths: Iterable[Path]) -> list[str]:
    """One sentence per file in `derived_dir` that must not be loaded ([] = all present and as recorded)."""
    paths = [Path(p) for p in paths]
    owner = _owner(derived_dir)
    if owner is None:
        return [f"{p.name} is missing" for p in paths if not p.is_file()]
    cache, name = owner
    return cache.check_derived(name, paths)


def usable(derived_dir: Path, paths: Iterable[Path], what: str) -> bool:
    """True when the files can be loaded; otherwise logs why (unless none is built yet) and returns False."""
    paths = [Path(p) for p in paths]
    if not any(p.is_file() for p in paths):
        return False
    found = problems(derived_dir, paths)
    if found:
        _LOG.warning("rebuilding %s in %s: %s", what, derived_dir, "; ".join(found))
    return not found


def record(derived_dir: Path, paths: Iterable[Path]) -> None:
    """Record size + sha256 of files just written (call inside the builder's lock); no-op outside a cache."""
    owner = _owner(derived_dir)
    if owner is not None:
        cache, name = owner
        cache.record_derived(name, [Path(p) for p in paths])
