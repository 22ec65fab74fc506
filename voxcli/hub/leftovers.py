"""What interrupted pulls leave in the cache, and removing it safely.

A pull killed with -9 (or a machine that lost power) leaves a partial
download under downloads/ (kept on purpose: the next pull of the same file
resumes it) and its staging or scratch folder under tmp/. Nothing else ever
removes a partial download, so `voxcli doctor` lists them and
`voxcli rm --partials` removes them: only the ones no live process holds.
Each is guarded by the lock its writer holds while it works: a partial file
by `<key>.part.lock` (`download.download`), a staging folder by its model's
lock (`hub.pull` stages under it), a scratch folder by the lock inside it
(`scratch`). If the lock can be taken at once, its owner is dead.
"""
from __future__ import annotations

import re
import shutil
import tempfile
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

from filelock import FileLock, Timeout

from voxcli.hub.cache import Cache

_PART_SUFFIXES = (".part.meta", ".part.lock", ".part")
_STAGING = re.compile(r"^(?P<name>.+?)\.(?P<tag>\d+|old|rm)\.[^.]+$")
_SCRATCH_LOCK = ".lock"


@dataclass(frozen=True)
class Leftover:
    """One partial download (its .part, .meta and .lock files) or one staging/scratch folder."""

    path: Path
    kind: str
    """"partial download" or "staging folder"."""
    size: int
    """Bytes it takes on the disk."""


@contextmanager
def scratch(cache: Cache) -> Iterator[Path]:
    """A process-unique scratch folder under tmp/ (for downloaded wheels and archives), locked while in use."""
    tmp = cache.root / "tmp"
    tmp.mkdir(parents=True, exist_ok=True)
    path = Path(tempfile.mkdtemp(prefix="blobs.", dir=tmp))
    try:
        with FileLock(str(path / _SCRATCH_LOCK)):
            yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def _size(path: Path) -> int:
    try:
        if path.is_dir() and not path.is_symlink():
            return sum(p.stat().st_size for p in path.rglob("*") if p.is_file() and not p.is_symlink())
        return path.stat().st_size
    except OSError:
        return 0


def _part_key(path: Path) -> str | None:
    return next((path.name[: -len(s)] for s in _PART_SUFFIXES if path.name.endswith(s)), None)


def _candidates(cache: Cache) -> Iterator[tuple[Leftover, FileLock, list[Path]]]:
    """(leftover, the lock that guards it, its paths) for everything interrupted pulls may have left."""
    downloads = cache.root / "downloads"
    # a lone <key>.part.lock is what every finished download leaves (filelock keeps its file): not a leftover
    keys = sorted({k for p in downloads.iterdir() if (k := _part_key(p)) and not p.name.endswith(".lock")}
                  ) if downloads.is_dir() else []
    for key in keys:
        files = [downloads / f"{key}{s}" for s in (".part", ".part.meta")]
        part = files[0]
        yield (Leftover(part, "partial download", sum(_size(p) for p in files)),
               FileLock(str(downloads / f"{key}.part.lock"), timeout=0), files + [downloads / f"{key}.part.lock"])
    tmp = cache.root / "tmp"
    for d in sorted(tmp.iterdir()) if tmp.is_dir() else []:
        if d.is_dir() and d.name.startswith("blobs."):
            lock = FileLock(str(d / _SCRATCH_LOCK), timeout=0)
        elif (m := _STAGING.match(d.name)) and d.is_dir():
            try:
                lock = cache.lock(m.group("name"), timeout=0)
            except Exception:  # noqa: BLE001 - not a model name: not ours to judge
                continue
        else:
            continue
        yield Leftover(d, "staging folder", _size(d)), lock, [d]


def _free(lock: FileLock) -> bool:
    """Take the lock at once (True: nobody holds it, so its owner is dead), else False."""
    try:
        lock.acquire()
        return True
    except Timeout:
        return False
    except OSError:  # a read-only cache: cannot lock, so cannot remove either
        return False


def find(cache: Cache | None = None) -> list[Leftover]:
    """Partial downloads and staging folders that no live process holds."""
    out = []
    for left, lock, _paths in _candidates(cache or Cache.default()):
        if _free(lock):
            lock.release()
            out.append(left)
    return out


def clean(cache: Cache | None = None) -> list[Leftover]:
    """Remove what `find` lists (each while holding its lock); what was removed.

    A staging folder that holds a replaced install a crash left aside is put
    back first (`Cache.recover`), so cleaning never loses an installed model.
    """
    cache = cache or Cache.default()
    removed = []
    for left, lock, paths in _candidates(cache):
        if not _free(lock):
            continue
        try:
            m = _STAGING.match(left.path.name)
            if m is not None and m.group("tag") == "old":
                cache.recover(m.group("name"))
            for p in paths:
                if p.is_dir():
                    shutil.rmtree(p, ignore_errors=True)
                else:
                    p.unlink(missing_ok=True)
            removed.append(left)
        finally:
            lock.release()
    return removed
