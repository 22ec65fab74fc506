"""Trust a derived file (split Piper graph, optimized graph, built LLM graph, LLM info) only if its record says so.

Why: derived files used to be found by the source's name, size and mtime
alone, so one flipped byte in the split Piper decoder made `speak` write
full-scale noise with exit 0 (issue 18, item 4). Every builder now records
size + sha256 + stat stamp right after writing (`Cache.record_derived`) and
every loader checks them first (`Cache.check_derived`); any problem --
changed, missing, or unrecorded because an older voxcli built it -- means
"not cached": the caller builds again and says why at warning level (`voxcli -v`).

This is the ONE integrity check of derived files, the optimized onnxruntime
graphs included (`voxcli.runtimes.onnx`): each file a session loads is
checked once, here. Why the stamp (size, mtime, ctime, inode;
`voxcli.hub.verify.file_stamp`): hashing the 63 MB of a split voice cost
every cold start ~60 ms (issue 15). A file whose stamp is the recorded one
has not been written since it was hashed, so it is not read again; a
different stamp (an in-place write, even with its mtime put back) means
hashing, then a rebuild if the digest differs. A stamp is only kept when
the file was fsync'd, unchanged while hashed, and not written within
`cache.RACY_WINDOW_S` of being stamped (coarse timestamps: git's "racy
clean"); otherwise the file is hashed next time. `digest` gives the sha256 of
a file something is built from (the key of an optimized graph) through the
same records and stamps.

A directory that is not `<cache>/derived/<name>` (a caller's own directory,
a test's tmp dir) has no record to check: only existence counts there.
"""
from __future__ import annotations

import logging
import os
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any, Final

from voxcli.errors import UsageError
from voxcli.hub.cache import Cache, settled, trusted
from voxcli.hub.verify import file_stamp, sha256_file

_LOG = logging.getLogger(__name__)
SOURCES: Final = "sources"
"""The table of `derived.json` that remembers digests of files outside the directory, by absolute path."""


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


def listed(derived_dir: Path, path: Path) -> bool:
    """True when `path` has a record in `derived_dir` (then it must be there: a graph's recorded weights)."""
    owner, rel = _owner(derived_dir), _inside(derived_dir, Path(path))
    return owner is not None and rel is not None and rel in owner[0].derived_table(owner[1], "files")


def recorded(derived_dir: Path) -> bool:
    """True when `derived_dir` keeps records (it is `<cache>/derived/<name>`): a damaged file there is found."""
    return _owner(derived_dir) is not None


def digest(derived_dir: Path, path: Path) -> str:
    """sha256 of `path`, a file that something in `derived_dir` is built from, hashed only when it changed.

    A file recorded in `derived_dir` (a split part) gives its recorded digest
    while it checks out (`problems`: by its stamp); any other file (a model
    in a package or in `models/`) is remembered in the records' SOURCES table
    with its stamp. Outside a cache it is hashed every time.
    """
    path = Path(path)
    owner = _owner(derived_dir)
    if owner is None:
        return sha256_file(path)
    cache, name = owner
    rel = _inside(derived_dir, path)
    rec = cache.derived_table(name, "files").get(rel) if rel is not None else None
    if isinstance(rec, dict) and isinstance(rec.get("sha256"), str):
        return rec["sha256"] if not cache.check_derived(name, [path]) else sha256_file(path)
    key, stamp = os.fspath(path.resolve()), file_stamp(path)
    memo = cache.derived_table(name, SOURCES).get(key)
    if trusted(memo, stamp) and isinstance(memo.get("sha256"), str):
        return memo["sha256"]
    found = sha256_file(path)
    if file_stamp(path) == stamp and settled(stamp, at := time.time_ns()):  # not written to while hashed
        def remember(table: dict[str, Any]) -> None:
            for gone in [k for k in table if not os.path.exists(k)]:  # sources that are gone (temp dirs)
                del table[gone]
            table[key] = {"stamp": stamp, "at": at, "sha256": found}

        try:
            cache.update_derived(name, SOURCES, remember)
        except OSError:
            pass  # read-only cache: hashed again next time
    return found


def _inside(derived_dir: Path, path: Path) -> str | None:
    try:
        return path.resolve().relative_to(Path(derived_dir).resolve()).as_posix()
    except ValueError:
        return None
