"""The on-disk model cache: layout, manifests, locks, atomic installs.

Layout under the cache root (platformdirs user cache, or $VOXCLI_CACHE_DIR):

    models/<name>/       the model's files + manifest.json (present = installed)
    derived/<name>/      artifacts built from a model (split graphs, built LLM graph)
    downloads/           partial downloads (<key>.part), kept for Range resume
    tmp/                 process-unique staging dirs, renamed into models/ when verified
    locks/<name>.lock    one file lock per model: concurrent pulls download once

A model directory only ever appears through `os.replace` of a fully verified
staging dir, so a crash or a failed check leaves the cache as it was.
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
from typing import Any

from filelock import FileLock

from voxcli import paths
from voxcli.errors import UsageError

MANIFEST = "manifest.json"
_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$")


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

    def derived_dir(self, name: str) -> Path:
        """A writable directory for artifacts built from the model (created on demand)."""
        return self._dir("derived", check_name(name))

    def downloads(self) -> Path:
        return self._dir("downloads")

    def lock(self, name: str, timeout: float = -1) -> FileLock:
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
        # mtimes let first use notice an edited file with a stat() instead of a re-hash (registry.check_unchanged)
        manifest["files"] = [
            {**f, "mtime_ns": (staged / f["name"]).stat().st_mtime_ns} if (staged / f["name"]).is_file() else f
            for f in manifest.get("files", [])
        ]
        os.chmod(staged, 0o755)  # mkdtemp makes 0700; a model dir is as readable as any cache file
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
        for d in (self.model_dir(name), self.root / "derived" / check_name(name)):
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
