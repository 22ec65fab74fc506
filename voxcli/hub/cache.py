"""The on-disk model cache: layout, manifests, locks, atomic installs.

Layout under the cache root (platformdirs user cache, or $VOXCLI_CACHE_DIR):

    models/<name>/       the model's files + manifest.json (present = installed)
    derived/<name>/      artifacts built from a model (split graphs, built LLM graph)
    derived/<name>/derived.json   size + sha256 + stat stamp of each derived file, recorded when it is built
    downloads/           partial downloads (<key>.part + .meta: the version, for If-Range), kept for resume
    tmp/                 process-unique staging dirs, renamed into models/ when verified
    locks/<name>.lock    one file lock per model: concurrent pulls download once

A model directory only ever appears through `os.replace` of a fully verified
staging dir, so a crash or a failed check leaves the cache as it was.
Derived files are verified too: whoever builds one records its size and
sha256 (`record_derived`), whoever loads one checks them (`check_derived`),
so a flipped byte in a split decoder is a rebuild, not full-scale noise.
"""
from __future__ import annotations

import json
import os
import re
import shutil
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterable

from voxcli import paths
from voxcli.errors import UsageError
from voxcli.fsutil import atomic_write
from voxcli.hub.verify import file_problem, file_stamp

if TYPE_CHECKING:  # pragma: no cover
    from filelock import FileLock  # imported where a lock is taken: a read-only start skips it (~10 ms)

MANIFEST = "manifest.json"
DERIVED_MANIFEST = "derived.json"
_verified: set[tuple[str, tuple[int, ...], str]] = set()
"""(path, stat stamp, sha256) of derived files hashed OK in this process: each is hashed once."""
RACY_WINDOW_S = 2.0
"""A stamp whose mtime or ctime is this close to the moment it was taken is not trusted (git's
"racy clean"): with coarse file timestamps a same-size write in the same tick keeps the stamp."""
_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$")


def settled(stamp: list[int], at_ns: int) -> bool:
    """True when a stamp taken at `at_ns` can vouch for the file: its mtime and ctime are RACY_WINDOW_S older.

    A later write then changes mtime or ctime even on a file system with
    coarse timestamps; a younger stamp could miss a same-size write in the
    same tick, so it is not kept (the file is hashed again instead).
    """
    return at_ns - max(stamp[1], stamp[2]) >= RACY_WINDOW_S * 1e9


def trusted(rec: Any, stamp: list[int]) -> bool:
    """True when a record (of derived.json) holds `stamp`, recorded settled: the file need not be read."""
    if not isinstance(rec, dict) or rec.get("stamp") != stamp or not isinstance(at := rec.get("at"), int):
        return False
    return settled(stamp, at)


def _fsync(path: Path) -> None:
    """Flush a file's blocks to the disk (a builder may have written it unsynced, onnxruntime does)."""
    fd = os.open(path, os.O_RDWR if os.name == "nt" else os.O_RDONLY)  # Windows' fsync needs write access
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def check_name(name: str) -> str:
    """Model names become directory names: refuse anything path-like."""
    if not _NAME_RE.match(name) or ".." in name:
        raise UsageError(f"invalid model name {name!r}", hint="use letters, digits, '.', '_' and '-' only")
    return name


@dataclass(frozen=True)
class Cache:
    root: Path

    @classmethod
    def default(cls, root: Path | None = None) -> "Cache":
        return cls(Path(root) if root is not None else paths.cache_dir())

    def _dir(self, *parts: str) -> Path:
        p = self.root.joinpath(*parts)
        p.mkdir(parents=True, exist_ok=True)
        return p

    @property
    def models(self) -> Path:
        return self.root / "models"

    def model_dir(self, name: str) -> Path:
        return self.models / check_name(name)

    def derived_dir(self, name: str, *, create: bool = False) -> Path:
        """Where artifacts built from the model go (split graphs, the built LLM graph).

        Only a path unless `create`: finding a model must not write to the
        disk (a read-only cache, `voxcli models`, completion), so the code
        that writes an artifact creates the directory when it writes.
        """
        path = self.root / "derived" / check_name(name)
        if create:
            path.mkdir(parents=True, exist_ok=True)
        return path

    @classmethod
    def of_derived(cls, derived_dir: Path) -> tuple["Cache", str]:
        """(the cache, the model name) that own `derived_dir` (a `ModelBundle.derived_dir`)."""
        derived_dir = Path(derived_dir)
        if derived_dir.parent.name != "derived":
            raise ValueError(f"{derived_dir} is not a derived/<name> directory of a cache")
        return cls(derived_dir.parent.parent), check_name(derived_dir.name)

    def _derived_records(self, name: str) -> dict[str, dict[str, Any]]:
        return dict(self.derived_table(name, "files"))

    def derived_table(self, name: str, table: str) -> dict[str, Any]:
        """One table of `derived/<name>/derived.json` ("files": the records; others: see update_derived)."""
        try:
            data = json.loads((self.derived_dir(name) / DERIVED_MANIFEST).read_text(encoding="utf-8"))
            found = data.get(table, {})
            return found if isinstance(found, dict) else {}
        except (OSError, ValueError, AttributeError, TypeError):
            return {}

    def update_derived(self, name: str, table: str, change: Callable[[dict[str, Any]], None]) -> None:
        """Apply `change` to one table of `derived.json` under its lock (read, change, atomic write).

        Several builders share one model's derived dir, and other tables
        (`voxcli.runtimes.derived`'s digest memo of source files) are kept.
        """
        from filelock import FileLock

        d = self.derived_dir(name, create=True)
        with FileLock(str(d / (DERIVED_MANIFEST + ".lock"))):
            try:
                data = json.loads((d / DERIVED_MANIFEST).read_text(encoding="utf-8"))
                data = data if isinstance(data, dict) else {}
            except (OSError, ValueError):
                data = {}
            current = data.get(table)
            data[table] = current if isinstance(current, dict) else {}
            change(data[table])
            atomic_write(d / DERIVED_MANIFEST, json.dumps(data, indent=1, sort_keys=True), durable=False)

    def record_derived(self, name: str, paths: Iterable[Path]) -> None:
        """Record size + sha256 of files just built into `derived/<name>/` (call it right after writing them).

        Each file is fsync'd first (a stamp must not vouch for blocks a power
        loss can still zero), and its stamp is kept only when it is the same
        before and after hashing and settled (`settled`): otherwise the next
        load hashes it. Merged into `derived/<name>/derived.json` under its own
        lock (several builders share one model's derived dir), written atomically.
        """
        d = self.derived_dir(name, create=True)
        new: dict[str, dict[str, Any]] = {}
        for p in map(Path, paths):
            rel = p.resolve().relative_to(d.resolve()).as_posix()
            _fsync(p)
            before = file_stamp(p)
            _problem, digest = file_problem(p)
            at = time.time_ns()
            new[rel] = {"size": before[0], "sha256": digest}
            if file_stamp(p) == before and settled(before, at):
                new[rel].update(stamp=before, at=at)
                _verified.add((str(p.resolve()), tuple(before), str(digest)))

        def merge(files: dict[str, Any]) -> None:
            for gone in [k for k in files if not (d / k).is_file()]:
                del files[gone]
            files.update(new)

        self.update_derived(name, "files", merge)

    def check_derived(self, name: str, paths: Iterable[Path], *, rehash: bool = False) -> list[str]:
        """One sentence per derived file that is missing, unrecorded, or not what was recorded ([] = all good).

        A file whose stat stamp (`verify.file_stamp`: size, mtime, ctime, inode)
        is the one recorded when it was written or last hashed OK is not read:
        nothing wrote to it since (a cold start then hashes nothing). Any other
        is hashed (once per process) and, if intact, its stamp recorded again.
        `rehash` (doctor) hashes every file. The caller rebuilds (or refuses
        to load) on any problem: nothing unrecorded is trusted.
        """
        d = self.derived_dir(name)
        records = self._derived_records(name)
        problems, restamp = [], {}
        for p in map(Path, paths):
            rel = p.resolve().relative_to(d.resolve()).as_posix()
            rec, stamp = records.get(rel), file_stamp(p) if p.is_file() else None
            if stamp is None:
                problems.append(f"{rel} is missing")
            elif not isinstance(rec, dict) or not isinstance(rec.get("sha256"), str) or not rec["sha256"]:
                problems.append(f"{rel} has no recorded hash (built by an older voxcli)")
            elif not rehash and trusted(rec, stamp):
                continue
            elif (problem := self._derived_problem(p, rel, rec, stamp)) is not None:
                problems.append(problem)
            elif not trusted(rec, stamp) and stamp == file_stamp(p) and settled(stamp, at := time.time_ns()):
                restamp[rel] = (rec["sha256"], stamp, at)  # (not written to while it was hashed)
        if restamp:
            self._restamp(name, restamp)
        return problems

    def _restamp(self, name: str, stamps: dict[str, tuple[str, list[int], int]]) -> None:
        """Record the stamps of files just hashed OK (touched, copied back...): the next process trusts them."""
        def change(files: dict[str, Any]) -> None:
            for rel, (sha, stamp, at) in stamps.items():
                if isinstance(files.get(rel), dict) and files[rel].get("sha256") == sha:  # not rebuilt meanwhile
                    files[rel].update(stamp=stamp, at=at)

        try:
            self.update_derived(name, "files", change)
        except OSError:
            pass  # read-only cache: hashed again next time

    @staticmethod
    def _derived_problem(path: Path, rel: str, rec: dict[str, Any], stamp: list[int]) -> str | None:
        key = (str(path.resolve()), tuple(stamp), str(rec["sha256"]))
        if key in _verified:
            return None
        size = rec.get("size") if isinstance(rec.get("size"), int) else None
        problem, _digest = file_problem(path, sha256=rec["sha256"], size=size, name=rel)
        if problem is None and file_stamp(path) == stamp and settled(stamp, time.time_ns()):
            _verified.add(key)
        return problem

    def derived_problems(self) -> dict[str, list[str]]:
        """model name -> problems of the recorded derived files in the cache (for `voxcli doctor`).

        A recorded file that is gone is no problem (its builder makes it
        again); one that is there but differs is.
        """
        root = self.root / "derived"
        out: dict[str, list[str]] = {}
        for d in sorted(root.iterdir()) if root.is_dir() else []:
            if d.is_dir() and _NAME_RE.match(d.name) and (d / DERIVED_MANIFEST).is_file():
                present = [d / rel for rel in self._derived_records(d.name) if (d / rel).is_file()]  # gone: rebuilt
                problems = self.check_derived(d.name, present, rehash=True)
                if problems:
                    out[d.name] = problems
        return out

    def downloads(self) -> Path:
        return self._dir("downloads")

    def lock(self, name: str, timeout: float = -1) -> FileLock:
        from filelock import FileLock

        return FileLock(str(self._dir("locks") / f"{check_name(name)}.lock"), timeout=timeout)

    def staging_dir(self, name: str) -> Path:
        """A fresh process-unique directory on the cache's filesystem."""
        return Path(tempfile.mkdtemp(prefix=f"{name}.{os.getpid()}.", dir=self._dir("tmp")))

    def manifest(self, name: str) -> dict[str, Any] | None:
        path = self.model_dir(name) / MANIFEST
        try:
            return json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None

    def installed(self) -> dict[str, dict[str, Any]]:
        """name -> manifest of every model in the cache."""
        out: dict[str, dict[str, Any]] = {}
        if not self.models.is_dir():
            return out
        for d in sorted(self.models.iterdir()):
            if d.is_dir() and _NAME_RE.match(d.name):
                m = self.manifest(d.name)
                if m is not None:
                    out[d.name] = m
        return out

    def install(self, name: str, staged: Path, manifest: dict[str, Any]) -> Path:
        """Write the manifest into the staged dir and move it into place atomically.

        An existing install (pull --force) is first renamed aside, then removed,
        so the model directory is never a mix of old and new files.
        """
        manifest = {**manifest, "name": name, "installed_at": time.strftime("%Y-%m-%dT%H:%M:%S%z")}
        # mtimes let first use notice an edited file with a stat() instead of a re-hash (resolve.check_unchanged)
        manifest["files"] = [
            {**f, "mtime_ns": (staged / f["name"]).stat().st_mtime_ns} if (staged / f["name"]).is_file() else f
            for f in manifest.get("files", [])
        ]
        os.chmod(staged, 0o755)  # mkdtemp makes 0700; a model dir is as readable as any cache file
        if (staged / MANIFEST).exists():  # a model file of that name would be overwritten (hub.pull refuses it)
            raise UsageError(f"{name}: a model file is named {MANIFEST}, which the cache reserves")
        (staged / MANIFEST).write_text(json.dumps(manifest, indent=2, sort_keys=True), encoding="utf-8")
        final = self.model_dir(name)
        final.parent.mkdir(parents=True, exist_ok=True)
        old: Path | None = None
        if final.exists():
            old = Path(tempfile.mkdtemp(prefix=f"{name}.old.", dir=self._dir("tmp")))
            os.replace(final, old / "m")
        os.replace(staged, final)
        if old is not None:
            shutil.rmtree(old, ignore_errors=True)
        return final

    def recover(self, name: str) -> bool:
        """Put back an install that a crash left renamed aside; True if one was restored.

        `install()` replacing a model does two renames (old aside, new in); a
        process killed between them leaves no model dir and the old one under
        tmp/. Callers hold the model's lock, so no install is in flight.
        """
        final = self.model_dir(name)
        tmp = self.root / "tmp"
        if final.exists() or not tmp.is_dir():
            return False
        for old in sorted(tmp.glob(f"{name}.old.*/m"), key=lambda p: p.stat().st_mtime, reverse=True):
            try:
                if json.loads((old / MANIFEST).read_text(encoding="utf-8")).get("name") != name:
                    continue
                final.parent.mkdir(parents=True, exist_ok=True)
                os.replace(old, final)
            except (OSError, ValueError):
                continue
            shutil.rmtree(old.parent, ignore_errors=True)
            return True
        return False

    def remove(self, name: str) -> bool:
        """Delete a model and its derived artifacts; True if something was removed."""
        removed = False
        for d in (self.model_dir(name), self.derived_dir(name)):
            if d.exists():
                trash = Path(tempfile.mkdtemp(prefix=f"{name}.rm.", dir=self._dir("tmp")))
                os.replace(d, trash / "m")
                shutil.rmtree(trash, ignore_errors=True)
                removed = True
        return removed

    def clean_tmp(self, max_age_s: float = 24 * 3600) -> None:
        """Remove staging dirs left by crashed processes (older than a day)."""
        tmp = self.root / "tmp"
        if not tmp.is_dir():
            return
        now = time.time()
        for d in tmp.iterdir():
            try:
                if now - d.stat().st_mtime > max_age_s:
                    shutil.rmtree(d, ignore_errors=True) if d.is_dir() else d.unlink()
            except OSError:
                pass
